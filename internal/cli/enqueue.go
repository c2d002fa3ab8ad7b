package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/cli/rules"
	"github.com/leasehold/leasehold/settings"
)

type enqueueFlags struct {
	kind        string
	id          string
	payloadFile string
	delay       time.Duration
	at          string
	maxAttempts int
	queue       string
	file        string
	concurrency int
	jsonOut     bool
	after       []string
	afterAny    bool
	then        []string
	meta        map[string]string
}

func init() {
	register((*app).enqueueCommand)
}

func (a *app) enqueueCommand() *cobra.Command {
	var f enqueueFlags
	cmd := &cobra.Command{
		Use:   "enqueue [PAYLOAD | -]",
		Short: "Enqueue a task, or many from a JSON Lines file",
		Long: `Enqueue sends a task's dispatch token to the work queue and stores the task in
the tasks table. The token goes first and carries the task, so a command
stopped in between loses nothing: the worker creates the task from it. The payload is a JSON document: the argument, the file named by
--payload-file, or stdin when the argument (or the file) is "-". Without one the
task has no payload.

Enqueueing an --id that exists does nothing and says so on stderr: a retried
script never makes a second task. Without --id a random id is picked; an
empty --id ('') is a usage error, not a random id (an unset variable in a
script would otherwise lose its idempotency). The id is
printed on stdout (with --json, the stored task).

--file enqueues many tasks from a JSON Lines file ("-" for stdin), one object
per line:

  {"kind":"greet","payload":{"name":"ada"},"id":"greet-ada","max_attempts":3}
  {"kind":"report","payload":{},"delay_seconds":3600}
  {"kind":"report","run_at":"2027-06-01T09:00:00Z"}
  {"kind":"resize","payload":{"w":64},"queue":"images-work"}

--queue sends the task to the SQS queue of that name instead of the default
work queue (--queue-url); its retries go there too.

--after a,b makes the task WAITING until tasks a and b have SUCCEEDED (it is
cancelled with the reason if one of them fails or is cancelled); --after-any
runs it once they have ended, whatever the outcome. See docs/workflows.md. The queue must exist
(exit 4 otherwise; nothing is enqueued). In a file, a line's "queue" does the
same, and --queue applies to the lines that name none.

--meta key=value (repeatable, or comma-separated) sets the task's metadata,
which the worker's middleware reads and the task's children inherit (see
docs/worker.md#metadata); in a file, a line's "metadata" object does the same,
and --meta adds its entries to every line's (a line's own win).

--then KIND or --then 'KIND=PAYLOAD' (repeatable) makes the task the first of
a chain: each --then task runs once the one before it has SUCCEEDED, with
the id ID#2, ID#3, ... (the task needs --id), and reads the one before with
workflow.Dependencies. It is cheaper than --after: no waiting, no watch.

Only "kind" is required; "delay_seconds" and "run_at" are exclusive; "v":1
may be present (the lines are intake-queue submissions). Bad lines are
reported with their line numbers and skipped; the good ones are enqueued. The
ids of the enqueued tasks are printed on stdout, one per line; a progress bar
(on a terminal) and a summary go to stderr.

` + exitCodesHelp,
		Example: `  leasehold enqueue --kind greet '{"name":"ada"}'
  leasehold enqueue --kind greet --id greet-ada --max-attempts 3 '{"name":"ada"}'
  echo '{"name":"ada"}' | leasehold enqueue --kind greet -
  leasehold enqueue --kind report --delay 2h --payload-file report.json
  leasehold enqueue --kind report --at 2027-06-01T09:00:00Z
  leasehold enqueue --kind resize --queue images-work '{"w":64}'
  leasehold enqueue --kind report --id sum --after fetch-a,fetch-b
  leasehold enqueue --kind greet --meta tenant=acme --meta request=r-42 '{"name":"ada"}'
  leasehold enqueue --kind upper --id c1 --then upper --then 'upper={"text":"c"}' '{"text":"a"}'
  leasehold enqueue --file tasks.jsonl > ids.txt`,
		Args: posArgs(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.file != "" {
				return a.enqueueFile(cmd, f, args)
			}
			return a.enqueueOne(cmd, f, args)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.kind, "kind", "", "task kind (required unless --file)")
	fl.StringVar(&f.id, "id", "", "task id (default: random; an empty --id is an error); an existing id is not enqueued again")
	fl.StringVar(&f.payloadFile, "payload-file", "", `read the payload from FILE ("-" for stdin)`)
	fl.DurationVar(&f.delay, "delay", 0, "start after this long, e.g. 90s, 20m, 36h (longer than 15m is fine)")
	fl.StringVar(&f.at, "at", "", "start at this RFC 3339 time, e.g. 2027-06-01T09:00:00Z")
	fl.IntVar(&f.maxAttempts, "max-attempts", 0, "attempts before the task fails (1..100; default 5)")
	fl.StringVar(&f.queue, "queue", "", "send the task to the SQS queue of this NAME (default: the work queue)")
	fl.StringVar(&f.file, "file", "", `enqueue every task of a JSON Lines file ("-" for stdin)`)
	fl.IntVar(&f.concurrency, "concurrency", settings.Default().EnqueueConcurrency, "with --file: DynamoDB/SQS calls in flight at once")
	fl.BoolVar(&f.jsonOut, "json", false, "print the stored task as JSON instead of its id")
	fl.StringSliceVar(&f.after, "after", nil, "wait until these tasks (comma-separated ids) have SUCCEEDED; cancelled if one fails")
	fl.BoolVar(&f.afterAny, "after-any", false, "with --after: run once they have ended, whatever the outcome")
	fl.StringToStringVar(&f.meta, "meta", nil, "set the task's metadata entry KEY=VALUE (repeatable)")
	fl.StringArrayVar(&f.then, "then", nil, `run a task of KIND (with 'KIND=PAYLOAD', that JSON payload) after this one succeeds; repeat for a chain (needs --id)`)
	return cmd
}

func (a *app) enqueueOne(cmd *cobra.Command, f enqueueFlags, args []string) error {
	if f.kind == "" {
		return usageErrorf("--kind is required")
	}
	sub := leasehold.Submission{Kind: f.kind, MaxAttempts: f.maxAttempts}
	if len(f.meta) > 0 {
		sub.Metadata = f.meta
	}
	switch {
	case cmd.Flags().Changed("id") && f.id == "":
		// Most likely a script's unset variable: a random id would make
		// every rerun a new task.
		return usageErrorf("--id is empty; leave --id out for a random id")
	case f.id != "":
		sub.ID = f.id
	}
	if f.queue != "" {
		if err := rules.CheckQueueName(f.queue); err != nil {
			return usageErrorf("--queue: %v", err)
		}
		sub.Queue = f.queue
	}
	switch {
	case f.afterAny && len(f.after) == 0:
		return usageErrorf("--after-any needs --after")
	case len(f.after) > 0:
		sub.After, sub.AfterAny = f.after, f.afterAny
	}
	if len(f.then) > 0 {
		if f.id == "" {
			return usageErrorf("--then needs --id: the chain's tasks are named after it (ID#2, ID#3, ...)")
		}
		links := make([]leasehold.Link, len(f.then))
		for i, t := range f.then {
			kind, payload, hasPayload := strings.Cut(t, "=")
			links[i].Kind = kind
			if hasPayload {
				if p, tooDeep := rules.JSONProblem([]byte(payload)); p != "" {
					if !tooDeep {
						p = "is not a JSON document"
					}
					return usageErrorf("--then %s: the payload %s", kind, p)
				}
				links[i].Payload = json.RawMessage(payload)
			}
		}
		sub.Then = links
	}
	switch {
	case f.delay != 0 && f.at != "":
		return usageErrorf("--delay and --at are exclusive")
	case f.delay < 0:
		return usageErrorf("--delay cannot be negative")
	case f.delay > 0:
		sub.Delay = f.delay
	case f.at != "":
		at, err := time.Parse(time.RFC3339, f.at)
		if err != nil {
			return usageErrorf("--at %q is not an RFC 3339 time such as 2027-06-01T09:00:00Z", f.at)
		}
		sub.RunAt = at
	}
	payload, err := a.readPayload(args, f.payloadFile)
	if err != nil {
		return err
	}
	if payload != nil { // else no payload: a nil any, not a nil RawMessage
		sub.Payload = payload
	}
	c, err := a.client(cmd.Context())
	if err != nil {
		return err
	}
	info, err := c.Enqueue(cmd.Context(), sub)
	var conflict *leasehold.ConflictError
	switch {
	case errors.As(err, &conflict):
		return fmt.Errorf("%w; not enqueued (an id is an idempotency key: the same id needs the same kind and payload)", conflict)
	case errors.Is(err, leasehold.ErrAlreadyExists):
		fmt.Fprintf(a.io.Err, "leasehold: task %s already exists (%s); not enqueued again\n", rules.DisplayID(info.ID), info.Status)
	case errors.As(err, new(*leasehold.NotSentError)):
		// Stored: the id is worth printing even though the send failed.
		fmt.Fprintln(a.io.Out, rules.DisplayID(info.ID))
		return err
	case err != nil:
		return err
	}
	if f.jsonOut {
		return writeJSON(a.io.Out, info)
	}
	_, err = fmt.Fprintln(a.io.Out, rules.DisplayID(info.ID))
	return err
}

// readPayload returns the payload named by the argument or --payload-file,
// checked to be JSON; nil when there is none.
func (a *app) readPayload(args []string, file string) (json.RawMessage, error) {
	var (
		raw  []byte
		from string
	)
	switch {
	case len(args) == 1 && file != "":
		return nil, usageErrorf("give the payload as an argument or with --payload-file, not both")
	case len(args) == 1 && args[0] == "-", file == "-":
		b, err := io.ReadAll(io.LimitReader(a.io.In, maxInputBytes))
		if err != nil {
			return nil, fmt.Errorf("read payload from stdin: %w", err)
		}
		raw, from = b, "stdin"
	case len(args) == 1:
		raw, from = []byte(args[0]), "argument"
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, usageErrorf("read payload: %w", err)
		}
		raw, from = b, file
	default:
		return nil, nil
	}
	raw = bytes.TrimSpace(raw)
	if err := checkJSON(raw); err != nil {
		return nil, usageErrorf("payload (%s) is not valid JSON: %w", from, err)
	}
	return raw, nil
}

// maxInputBytes bounds what is read from stdin for one payload; the store's
// own limit is far lower and reported precisely.
const maxInputBytes = 4 << 20

// checkJSON says where a document stops being JSON.
func checkJSON(b []byte) error {
	if len(b) == 0 {
		return errors.New("it is empty")
	}
	if p, tooDeep := rules.JSONProblem(b); tooDeep {
		return errors.New("it " + p)
	}
	var v any
	err := json.Unmarshal(b, &v)
	var syn *json.SyntaxError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &syn):
		msg := fmt.Sprintf("%s (at byte %d)", syn.Error(), syn.Offset)
		if b[0] != '{' && b[0] != '[' && b[0] != '"' {
			msg += `; a string must be quoted, e.g. '"hello"'`
		}
		return errors.New(msg)
	}
	return err
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
