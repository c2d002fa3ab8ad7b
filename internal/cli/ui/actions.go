package ui

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/admin"
	"github.com/leasehold/leasehold/internal/cli/rules"
)

// maxRetryAttempts bounds the attempts one retry from the page adds.
const maxRetryAttempts = 100

// resultData is what an action's result page shows.
type resultData struct {
	Message string
	// Task is the task the action changed, if it was about one.
	Task *leasehold.TaskInfo
	Back string // URL of the page to return to
}

// action runs one POST /action/{name}. The guard has checked the token and
// origin; the form must also carry confirm=yes, ticked on the page.
func (s *Server) action(w http.ResponseWriter, r *http.Request) {
	if r.PostFormValue("confirm") != "yes" {
		s.fail(w, r, badRequest("not confirmed: tick the confirm box before you submit"))
		return
	}
	ctx, cancel := s.budget(r)
	defer cancel()
	id := r.PostFormValue("id")
	var (
		info leasehold.TaskInfo
		err  error
		res  resultData
	)
	taskAction := func(verb string, op func() (leasehold.TaskInfo, error)) {
		if id == "" {
			err = badRequest("id: no task id")
			return
		}
		if info, err = op(); err == nil {
			res = resultData{Message: fmt.Sprintf("task %s: %s; now %s", rules.DisplayID(id), verb, info.Status), Task: &info, Back: taskURL(id)}
		}
	}
	switch name := r.PathValue("name"); name {
	case "cancel":
		taskAction("cancel requested", func() (leasehold.TaskInfo, error) { return s.cfg.Tasks.Cancel(ctx, id) })
	case "retry":
		n, perr := strconv.Atoi(cmp.Or(r.PostFormValue("attempts"), "1"))
		if perr != nil || n < 1 || n > maxRetryAttempts {
			err = badRequest(fmt.Sprintf("attempts: a number of 1..%d", maxRetryAttempts))
			break
		}
		taskAction("retried", func() (leasehold.TaskInfo, error) { return s.cfg.Tasks.Retry(ctx, id, n) })
	case "complete":
		raw := json.RawMessage(cmp.Or(r.PostFormValue("result"), "null"))
		if !json.Valid(raw) {
			err = badRequest("result: not a JSON document")
			break
		}
		taskAction("callback completed", func() (leasehold.TaskInfo, error) {
			w, err := s.callbackWait(ctx, r, id)
			if err != nil {
				return leasehold.TaskInfo{}, err
			}
			return s.cfg.Tasks.OperatorComplete(ctx, w, raw)
		})
	case "fail":
		reason := cmp.Or(r.PostFormValue("reason"), "failed from the inspector")
		taskAction("callback failed", func() (leasehold.TaskInfo, error) {
			w, err := s.callbackWait(ctx, r, id)
			if err != nil {
				return leasehold.TaskInfo{}, err
			}
			return s.cfg.Tasks.OperatorFail(ctx, w, reason)
		})
	case "pause", "resume":
		queue := r.PostFormValue("queue")
		url := s.cfg.WorkQueueURL
		if queue != "" {
			if err = rules.CheckQueueName(queue); err != nil {
				err = badRequest("queue: " + err.Error())
				break
			}
			if url, err = s.cfg.Queues.QueueURL(ctx, queue); err != nil {
				break
			}
		}
		var rep admin.PauseReport
		if rep, err = s.cfg.Queues.Pause(ctx, url, name == "pause"); err == nil {
			state := "not paused: workers receive from it"
			if rep.Paused {
				state = "paused: workers start nothing from it; its messages stay queued"
			}
			res = resultData{Message: fmt.Sprintf("queue %s is %s", queueName(queue), state), Back: "/queues"}
		}
	case "redrive":
		queue, msg := r.PostFormValue("queue"), r.PostFormValue("message")
		if msg == "" {
			err = badRequest("message: no message id")
			break
		}
		var src, dlq string
		if src, dlq, err = s.deadLetterQueue(ctx, queue); err != nil {
			break
		}
		if err = s.cfg.Queues.RedriveDeadLetter(ctx, dlq, src, msg); err == nil {
			res = resultData{Message: fmt.Sprintf("message %s sent back to %s and deleted from its dead-letter queue", msg, queueName(queue)), Back: dlqURL(queue)}
		}
	default:
		http.NotFound(w, r)
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.render(w, r, http.StatusOK, "result", "Done", res)
}

// callbackWait is the callback wait an answer form names: the task id and
// the fence and attempt of the wait its page showed, so that the answer
// lands on that attempt's wait only. A form without them (a client that
// posts the id alone) answers the task's wait as read now.
func (s *Server) callbackWait(ctx context.Context, r *http.Request, id string) (leasehold.TaskInfo, error) {
	fence, attempt := r.PostFormValue("fence"), r.PostFormValue("attempt")
	if fence == "" && attempt == "" {
		return s.cfg.Tasks.Get(ctx, id)
	}
	f, ferr := strconv.ParseInt(fence, 10, 64)
	a, aerr := strconv.Atoi(attempt)
	if ferr != nil || aerr != nil {
		return leasehold.TaskInfo{}, badRequest("fence and attempt: whole numbers, as the task page gives them")
	}
	return leasehold.TaskInfo{ID: id, Fence: f, Attempt: a}, nil
}
