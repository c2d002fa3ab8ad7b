package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/cli/rules"
)

func init() {
	register((*app).sendCommand)
	register((*app).eventCommand)
}

func (a *app) sendCommand() *cobra.Command {
	var messageID string
	cmd := &cobra.Command{
		Use:   "send ID TOPIC PAYLOAD",
		Short: "Send a message to a running workflow",
		Long: `Send puts PAYLOAD, a JSON document, in the inbox of the running workflow ID
on TOPIC, where its workflow.Receive takes it, in send order and once, and
prints its number in the topic. A workflow waiting on the topic is woken.

With --id the message is sent under that message id: sending the same id
again sends nothing and prints the number it got the first time, so a
script may retry. Without it each call is a new message.

A workflow that does not exist is exit 3; one that has ended, a payload
over 32 KiB or an inbox holding 1,000 messages not received are refused
(exit 1). See docs/workflows.md, "Messages and events".`,
		Example: `  leasehold send order-7 items '{"sku":"A-1","count":2}'
  leasehold send --id req-42 order-7 items '{"sku":"A-1","count":2}'`,
		Args: posArgs(cobra.ExactArgs(3)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if p, tooDeep := rules.JSONProblem([]byte(args[2])); p != "" {
				if !tooDeep {
					p = "is not a JSON document"
				}
				return usageErrorf("PAYLOAD %s", p)
			}
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			var seq int64
			if messageID != "" {
				seq, err = c.SendOnce(cmd.Context(), args[0], args[1], messageID, json.RawMessage(args[2]))
			} else {
				seq, err = c.Send(cmd.Context(), args[0], args[1], json.RawMessage(args[2]))
			}
			if err != nil {
				return a.taskErr(args[0], err)
			}
			_, err = fmt.Fprintf(a.io.Out, "message %d on %s sent to %s\n", seq, args[1], rules.DisplayID(args[0]))
			return err
		},
	}
	cmd.Flags().StringVar(&messageID, "id", "", "the message id: the same id is sent once")
	return cmd
}

func (a *app) eventCommand() *cobra.Command {
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "event ID KEY",
		Short: "Print an event a workflow published",
		Long: `Event prints the value workflow ID last set under KEY with workflow.SetEvent,
as JSON. With --wait it waits up to that long for the key to be set (one
read every 50 ms to 2 s). A key not set gives exit 3; a workflow that ended
without setting it exit 1.`,
		Example: `  leasehold event order-7 items
  leasehold event --wait 1m order-7 shipped`,
		Args: posArgs(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			v, err := c.GetEvent(cmd.Context(), args[0], args[1], wait)
			if err != nil {
				if errors.Is(err, leasehold.ErrNotFound) || errors.Is(err, leasehold.ErrFinished) {
					return err
				}
				return a.taskErr(args[0], err)
			}
			_, err = fmt.Fprintf(a.io.Out, "%s\n", v)
			return err
		},
	}
	cmd.Flags().DurationVar(&wait, "wait", 0, "wait up to this long for the event to be set")
	return cmd
}

// writeInbox prints what `leasehold status` shows of a workflow's inbox
// and events (t.Inbox, read by Client.Inbox with no message read): per topic the messages
// delivered and waiting, the topic a receive waits on, and the event keys
// its run set. It prints nothing for a task that has none, and the reason
// for an inbox it could not read (readErr).
func writeInbox(w io.Writer, t leasehold.TaskInfo, readErr error) error {
	if readErr != nil {
		_, err := fmt.Fprintf(w, "inbox: not read: %s\n", rules.OneLine(readErr.Error()))
		return err
	}
	ib := t.Inbox
	if ib == nil {
		return nil
	}
	if len(ib.Topics) > 0 {
		fmt.Fprintln(w, "inbox:")
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		for _, t := range ib.Topics {
			fmt.Fprintf(tw, "  %s\t%d delivered\t%d waiting\n", rules.Escape(t.Topic), t.Delivered, t.Waiting)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if ib.ReceivingOn != "" {
		fmt.Fprintf(w, "receiving on: %s\n", rules.Escape(ib.ReceivingOn))
	}
	if len(ib.Events) > 0 {
		keys := make([]string, len(ib.Events))
		for i, e := range ib.Events {
			keys[i] = rules.Escape(e.Key)
		}
		fmt.Fprintf(w, "events: %d (%s)\n", len(keys), strings.Join(keys, ", "))
	}
	return nil
}
