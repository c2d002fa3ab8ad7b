package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/cli/rules"
)

func init() {
	register((*app).completeCommand)
	register((*app).failCommand)
}

// An operator's answer by task replaced `leasehold callback-token`, whose
// token carried the table's hash of the callback's secret: that made the
// hash a password (docs/workflows.md).

func (a *app) completeCommand() *cobra.Command {
	var (
		jsonOut bool
		by      waitBy
	)
	cmd := &cobra.Command{
		Use:   "complete {TOKEN | --task ID} [RESULT]",
		Short: "Complete a task waiting for a callback",
		Long: `Complete answers a callback wait with RESULT, a JSON document (none when
left out): RESULT is recorded for the handler's workflow.WaitForCallback,
and the handler runs again to read it (the task is PENDING until then).

TOKEN is the callback token the handler took (what a system outside is
given). An operator who answers by hand names the task instead, with
--task ID: the command reads the task's waiting attempt and answers that
attempt only (--wait waits for the task to start waiting). --task needs
read and write access to the table, as any operator's command does.

A wait is answered once, and only while its attempt waits. A forged, stale
or used token, or one built from what the table holds (the table keeps only
a hash of the token's secret), is rejected with the reason (exit 1). See
docs/workflows.md.`,
		Example: `  leasehold complete "$TOKEN" '{"approved":true}'
  leasehold complete --task order-7-approval --wait 30s '{"approved":true}'`,
		Args: posArgs(by.args(0)),
		RunE: func(cmd *cobra.Command, args []string) error {
			tok, args := by.split(args)
			var result any
			if len(args) == 1 {
				if p, tooDeep := rules.JSONProblem([]byte(args[0])); p != "" {
					if !tooDeep {
						p = "is not a JSON document"
					}
					return usageErrorf("RESULT %s", p)
				}
				result = json.RawMessage(args[0])
			}
			return a.endWait(cmd, jsonOut, by, func(c *leasehold.Client, w leasehold.TaskInfo) (leasehold.TaskInfo, error) {
				if tok != "" {
					return c.CompleteCallback(cmd.Context(), tok, result)
				}
				return c.OperatorComplete(cmd.Context(), w, result)
			})
		},
	}
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print the task as JSON")
	by.flags(cmd)
	return cmd
}

func (a *app) failCommand() *cobra.Command {
	var (
		jsonOut bool
		by      waitBy
	)
	cmd := &cobra.Command{
		Use:   "fail {TOKEN | --task ID} REASON",
		Short: "Fail a task waiting for a callback",
		Long: `Fail answers a callback wait with a refusal: the handler runs again and its
workflow.WaitForCallback returns REASON as a *workflow.CallbackFailedError,
for the handler to decide what a refusal means. TOKEN is the callback token the
handler took; an operator names the task with --task ID instead (see
leasehold complete --help). A wait is answered once; a forged, stale or used
token is rejected with the reason (exit 1).`,
		Example: `  leasehold fail "$TOKEN" 'rejected by the reviewer'
  leasehold fail --task order-7-approval 'rejected by the reviewer'`,
		Args: posArgs(by.args(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			tok, args := by.split(args)
			return a.endWait(cmd, jsonOut, by, func(c *leasehold.Client, w leasehold.TaskInfo) (leasehold.TaskInfo, error) {
				if tok != "" {
					return c.FailCallback(cmd.Context(), tok, args[0])
				}
				return c.OperatorFail(cmd.Context(), w, args[0])
			})
		},
	}
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print the task as JSON")
	by.flags(cmd)
	return cmd
}

// waitBy says how complete and fail name the wait they answer: by the
// handler's token (the first argument), or, for an operator, by task
// (--task).
type waitBy struct {
	task string
	wait time.Duration
}

func (b *waitBy) flags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&b.task, "task", "", "answer the callback wait of this task, as an operator (instead of a TOKEN)")
	cmd.Flags().DurationVar(&b.wait, "wait", 0, "with --task: wait up to this long for the task to wait for a callback")
}

// args checks the positional arguments: a TOKEN unless --task, then want
// required ones, and at most one optional one when want is 0 (RESULT).
func (b *waitBy) args(want int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		n := len(args)
		if b.task == "" {
			if n == 0 {
				return fmt.Errorf("a callback TOKEN, or --task ID")
			}
			n--
		}
		if b.wait != 0 && b.task == "" {
			return fmt.Errorf("--wait needs --task")
		}
		if want == 0 {
			return cobra.MaximumNArgs(1)(cmd, args[len(args)-n:])
		}
		return cobra.ExactArgs(want)(cmd, args[len(args)-n:])
	}
}

// split returns the token (none with --task) and the other arguments.
func (b *waitBy) split(args []string) (string, []string) {
	if b.task != "" {
		return "", args
	}
	return args[0], args[1:]
}

// endWait answers a callback wait with the client, by the handler's token
// or, for --task, by the task's waiting attempt as read, and prints the
// task it left: its id and status, or, with jsonOut, the whole task.
func (a *app) endWait(cmd *cobra.Command, jsonOut bool, by waitBy, end func(*leasehold.Client, leasehold.TaskInfo) (leasehold.TaskInfo, error)) error {
	answer := func(c *leasehold.Client) (leasehold.TaskInfo, error) {
		var w leasehold.TaskInfo
		if by.task != "" {
			var err error
			if w, err = a.callbackWait(cmd.Context(), c, by.task, by.wait); err != nil {
				return leasehold.TaskInfo{}, err
			}
		}
		return end(c, w)
	}
	return a.showTask(cmd.Context(), jsonOut, answer, func(_ *leasehold.Client, info leasehold.TaskInfo) error {
		if info.Status == leasehold.StatusPending {
			_, err := fmt.Fprintf(a.io.Out, "task %s PENDING: answer recorded; its handler runs again to read it\n", rules.DisplayID(info.ID))
			return err
		}
		_, err := fmt.Fprintf(a.io.Out, "task %s %s\n", rules.DisplayID(info.ID), info.Status)
		return err
	})
}

// callbackWait reads task id, waiting up to wait for it to wait for a
// callback.
func (a *app) callbackWait(ctx context.Context, c *leasehold.Client, id string, wait time.Duration) (leasehold.TaskInfo, error) {
	deadline := time.Now().Add(wait)
	for {
		t, err := c.Get(ctx, id)
		switch {
		case err != nil:
			return t, a.taskErr(id, err)
		case t.Status == leasehold.StatusWaiting && t.Wait == "callback":
			return t, nil
		case !time.Now().Before(deadline):
			return t, fmt.Errorf("%w: task %s is %s, not waiting for a callback", leasehold.ErrNotWaiting, rules.DisplayID(id), t.Status)
		}
		select {
		case <-ctx.Done():
			return t, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
