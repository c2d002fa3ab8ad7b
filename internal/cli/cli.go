// Package cli is the `leasehold` command: enqueue, inspect, cancel, retry and
// watch tasks from a shell. cmd/leasehold only calls Main.
//
// # Layout
//
// The root command and the global configuration (flags and environment,
// the AWS config, the client) live in this file and config.go. Each command
// is built in a file of its own, which registers it from an init function:
// a new command is a new file.
//
// # Exit codes
//
// Scripts can rely on them (see ExitOK and the others, docs/cli.md and
// `leasehold --help`). Every error is printed as one line on stderr.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/cli/rules"
)

// Exit codes.
const (
	ExitOK          = 0 // success
	ExitError       = 1 // any other error
	ExitUsage       = 2 // bad flags or arguments, bad JSON payload or input lines
	ExitNotFound    = 3 // no task has the id
	ExitUnreachable = 4 // DynamoDB/SQS endpoint unreachable, or table/queue missing
	ExitTaskEnded   = 5 // result/watch: a task ended FAILED or CANCELLED
	ExitConflict    = 6 // enqueue: the id names a task of another kind or payload
	ExitDiverged    = 7 // replay: a history diverges from, or fails in, the build's handlers
)

const exitCodesHelp = `Exit codes:
  0  success
  1  error
  2  usage: bad flags or arguments, a payload or input line that is not valid JSON
  3  task not found (schedule delete: no such schedule)
  4  stack unreachable: the DynamoDB/SQS endpoint does not answer, or the
     table or queue does not exist
  5  result/watch: a task ended FAILED or CANCELLED
  6  enqueue: the id names a task of another kind or payload (not enqueued);
     schedule create: the schedule exists
  7  replay: a workflow's history diverges from, or fails in, the handlers`

// Streams is what a run of the command reads and writes.
type Streams struct {
	In  io.Reader
	Out io.Writer
	Err io.Writer
	// Getenv reads the environment (os.Getenv in the binary).
	Getenv func(string) string
	// ErrIsTerminal reports whether Err is a terminal: progress bars are
	// drawn only then.
	ErrIsTerminal bool
	// Handlers are the kinds `leasehold replay` replays; nil for
	// leasehold's example kinds, which the binary links.
	Handlers *leasehold.Handlers
}

// StdStreams returns the process's standard streams and environment.
func StdStreams() Streams {
	return Streams{
		In: os.Stdin, Out: os.Stdout, Err: os.Stderr, Getenv: os.Getenv,
		ErrIsTerminal: term.IsTerminal(int(os.Stderr.Fd())),
	}
}

// Main runs the command line args (without the program name) and returns
// the exit code. ctx ends the run early (Ctrl-C).
func Main(ctx context.Context, args []string, s Streams) int {
	a := newApp(s)
	a.args = args
	root := a.rootCommand()
	root.SetArgs(args)
	root.SetIn(s.In)
	root.SetOut(s.Out)
	root.SetErr(s.Err)
	cmd, err := root.ExecuteContextC(ctx)
	a.stopTracing()
	if err == nil {
		return ExitOK
	}
	code := exitCode(err)
	fmt.Fprintln(s.Err, "leasehold: "+message(err))
	if code == ExitUsage {
		if cmd == nil {
			cmd = root
		}
		fmt.Fprintf(s.Err, "Run '%s --help' for usage.\n", cmd.CommandPath())
	}
	return code
}

// rootCommand builds the command tree.
func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "leasehold",
		Short: "Enqueue, inspect, cancel and retry leasehold tasks",
		Long: `leasehold talks to the tasks table (DynamoDB) and the work queue (SQS) of a
leasehold stack: it enqueues tasks, shows their status and results, cancels
and retries them, and watches them finish.

Configuration comes from flags or the environment: --table (LEASEHOLD_TABLE),
--queue-url (LEASEHOLD_WORK_QUEUE_URL; by default the queue named
leasehold-work is looked up), --region (AWS_REGION), --profile (AWS_PROFILE)
and --endpoint-url, which sends both DynamoDB and SQS calls to one endpoint
such as a local stack. Without --endpoint-url the standard AWS variables
apply, including AWS_ENDPOINT_URL_DYNAMODB and AWS_ENDPOINT_URL_SQS.

` + exitCodesHelp,
		Example: `  eval "$(scripts/stack.sh env)"          # point the SDK at the local stack
  leasehold enqueue --kind greet '{"name":"ada"}'
  leasehold result --wait 6b1f...
  leasehold list --status failed --json | jq -r '.[].id' | xargs -n1 leasehold retry`,
		Version:       Version(),
		SilenceErrors: true,
		SilenceUsage:  true,
		// Runs only when no subcommand matched: report the unknown one.
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cmd.Help()
			}
			return unknownCommand(cmd, args[0])
		},
	}
	root.CompletionOptions.HiddenDefaultCmd = true
	root.SuggestionsMinimumDistance = 2
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		// "leasehold enqeue --kind x": cobra parsed the flags for the root
		// command, which has no --kind. The unknown command is the mistake
		// to report.
		if c == root {
			if name := firstCommandArg(root, a.args); name != "" {
				if sub, _, ferr := root.Find([]string{name}); ferr != nil || sub == root {
					return unknownCommand(root, name)
				}
			}
		}
		return usageError{err}
	})
	a.addGlobalFlags(root)
	addCommands(root, a)
	return root
}

// Version is what `leasehold --version` prints after "leasehold version":
// the module version the binary was built from (with `go install ...@v1.2.3`
// the tag; in a checkout a pseudo-version from the commit, "+dirty" with
// local changes), the commit when the build recorded one, then the Go
// version.
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && !strings.Contains(v, s.Value[:min(12, len(s.Value))]) {
			v += " commit " + s.Value[:min(12, len(s.Value))]
		}
	}
	return v + " " + bi.GoVersion
}

// unknownCommand is the usage error for a command name that root lacks, with
// the names it resembles.
func unknownCommand(root *cobra.Command, name string) error {
	msg := fmt.Sprintf("unknown command %q", name)
	if s := root.SuggestionsFor(name); len(s) > 0 {
		msg += "; did you mean " + strings.Join(s, " or ") + "?"
	}
	return usageErrorf("%s", msg)
}

// firstCommandArg is the first argument that is neither a flag nor the value
// of a global flag: where the command name stands. Empty if there is none.
func firstCommandArg(root *cobra.Command, args []string) string {
	for i := 0; i < len(args); i++ {
		arg := args[i]
		switch {
		case arg == "--":
			if i+1 < len(args) {
				return args[i+1]
			}
			return ""
		case strings.HasPrefix(arg, "-") && len(arg) > 1:
			name := strings.TrimLeft(arg, "-")
			if strings.Contains(name, "=") {
				continue
			}
			f := root.PersistentFlags().Lookup(name)
			if f == nil && len(name) == 1 {
				f = root.PersistentFlags().ShorthandLookup(name)
			}
			if f != nil && f.NoOptDefVal == "" {
				i++ // its value
			}
		default:
			return arg
		}
	}
	return ""
}

// builders make the subcommands. Each command's file registers its own in
// an init function, so a new command (such as `leasehold run`) is a new file
// and touches nothing else.
var builders []func(*app) *cobra.Command

// register adds a subcommand builder; call it from init.
func register(b func(*app) *cobra.Command) { builders = append(builders, b) }

// addCommands builds every registered subcommand. cobra lists them sorted
// by name.
func addCommands(root *cobra.Command, a *app) {
	for _, b := range builders {
		root.AddCommand(b(a))
	}
}

// usageError marks a mistake in the command line or its input: exit 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usageErrorf(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// posArgs wraps a cobra argument check so that its failure is a usage error.
func posArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, a []string) error {
		if err := check(cmd, a); err != nil {
			return usageError{err}
		}
		return nil
	}
}

// exitCode maps an error to the documented exit code.
func exitCode(err error) int {
	var usage usageError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &usage), errors.Is(err, leasehold.ErrInvalid):
		return ExitUsage
	case errors.Is(err, leasehold.ErrNotFound):
		return ExitNotFound
	case errors.As(err, new(*leasehold.UnreachableError)), errors.As(err, new(*leasehold.MissingResourceError)), errors.Is(err, leasehold.ErrQueueNotFound):
		return ExitUnreachable
	case taskEnded(err), errors.As(err, new(*endedError)):
		return ExitTaskEnded
	case errors.Is(err, leasehold.ErrConflict):
		return ExitConflict
	case errors.Is(err, errDiverged):
		return ExitDiverged
	}
	return ExitError
}

// taskEnded reports err as a task that ended FAILED or CANCELLED: a
// *leasehold.TaskError, which Result and `leasehold result` give.
func taskEnded(err error) bool {
	var te *leasehold.TaskError
	return errors.As(err, &te) && (te.Status == leasehold.StatusFailed || te.Status == leasehold.StatusCancelled)
}

// message is the one line printed for err, with a hint where one helps,
// escaped for a terminal: a task's error text is part of some errors.
func message(err error) string { return rules.Escape(messageText(err)) }

func messageText(err error) string {
	var (
		unreachable *leasehold.UnreachableError
		missing     *leasehold.MissingResourceError
		notSent     *leasehold.NotSentError
	)
	msg := strings.ReplaceAll(err.Error(), "\n", " ")
	if errors.As(err, &notSent) && (errors.As(err, &unreachable) || errors.As(err, &missing)) {
		return fmt.Sprintf("task %s is stored but its dispatch token was not sent: %s", rules.DisplayID(notSent.ID), message(notSent.Err))
	}
	switch {
	case errors.As(err, &unreachable):
		msg = unreachable.Error()
		if isLocal(unreachable.Endpoint) {
			return msg + " — is the local stack running? (make stack-up)"
		}
		return msg + " — check --endpoint-url, the AWS_ENDPOINT_URL* variables and the network"
	case errors.As(err, &missing):
		msg = missing.Error()
		switch {
		case missing.Service == "SQS" && !strings.Contains(missing.Resource, "://"):
			// A queue known by its name: the work queue's default name, or
			// one named by --queue or a submission's "queue".
			return msg + " — create the queue (make stack-up creates the stack's), or name another with --queue or --queue-url"
		case missing.Service == "SQS":
			return msg + " — set --queue-url or LEASEHOLD_WORK_QUEUE_URL, or create the stack (make stack-up)"
		}
		return msg + " — set --table or LEASEHOLD_TABLE, or create the stack (make stack-up)"
	case errors.Is(err, context.DeadlineExceeded):
		return msg + " (timed out)"
	}
	return msg
}

func isLocal(endpoint string) bool {
	for _, h := range []string{"://127.", "://localhost", "://[::1]", "://0.0.0.0"} {
		if strings.Contains(endpoint, h) {
			return true
		}
	}
	return false
}
