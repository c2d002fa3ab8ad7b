package cli

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/cli/rules"
)

// lineError is a rejected input line.
type lineError struct {
	line int
	err  error
}

// readSubmissions parses a JSON Lines input. Blank lines are skipped; each
// bad line is reported, never fatal. lines[i] is the line of subs[i].
func readSubmissions(r io.Reader) (subs []leasehold.Submission, lines []int, bad []lineError, err error) {
	br := bufio.NewReaderSize(r, 64<<10)
	for n := 1; ; n++ {
		raw, rerr := br.ReadBytes('\n')
		if rerr != nil && !errors.Is(rerr, io.EOF) {
			return nil, nil, nil, fmt.Errorf("read line %d: %w", n, rerr)
		}
		raw = bytes.TrimSpace(raw)
		if len(raw) > 0 {
			s, perr := parseLine(raw)
			if perr != nil {
				bad = append(bad, lineError{line: n, err: perr})
			} else {
				subs = append(subs, s)
				lines = append(lines, n)
			}
		}
		if rerr != nil { // io.EOF
			return subs, lines, bad, nil
		}
	}
}

// parseLine checks one submission line, with the intake dispatcher's own
// rules and words (rules.ParseSubmission).
func parseLine(raw []byte) (leasehold.Submission, error) {
	return rules.ParseSubmission(raw, time.Now())
}

// maxReportedLines bounds the bad lines listed one by one.
const maxReportedLines = 20

func (a *app) enqueueFile(cmd *cobra.Command, f enqueueFlags, args []string) error {
	if len(args) > 0 || f.kind != "" || cmd.Flags().Changed("id") || f.payloadFile != "" || f.delay != 0 || f.at != "" || f.maxAttempts != 0 || f.jsonOut {
		return usageErrorf("--file takes every field from the file: drop the payload argument and --kind, --id, --payload-file, --delay, --at, --max-attempts and --json")
	}
	if f.concurrency < 1 {
		return usageErrorf("--concurrency must be at least 1")
	}
	name := f.file
	var in io.Reader = a.io.In
	if name == "-" {
		name = "stdin"
	} else {
		fh, err := os.Open(f.file)
		if err != nil {
			return usageErrorf("read tasks: %w", err)
		}
		defer fh.Close()
		in = fh
	}
	if f.queue != "" {
		if err := rules.CheckQueueName(f.queue); err != nil {
			return usageErrorf("--queue: %v", err)
		}
	}
	subs, lines, bad, err := readSubmissions(in)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	for i := range subs {
		if subs[i].Queue == "" {
			subs[i].Queue = f.queue
		}
		for k, v := range f.meta { // a line's own entries win
			if _, own := subs[i].Metadata[k]; !own {
				if subs[i].Metadata == nil {
					subs[i].Metadata = make(map[string]string, len(f.meta))
				}
				subs[i].Metadata[k] = v
			}
		}
	}
	total := len(subs) + len(bad)
	var (
		enqueued, existing, conflicts, failed, unknown int
		firstFailure                                   error
	)
	began := time.Now()
	if len(subs) > 0 {
		c, err := a.clientWith(cmd.Context(), f.concurrency)
		if err != nil {
			return err
		}
		bar := a.newBar(len(subs), "enqueue")
		results, err := c.EnqueueMany(cmd.Context(), subs, leasehold.OnProgress(func(done, _ int) { bar.set(done) }))
		bar.finish()
		if err != nil {
			// The whole call failed (say, the stack is unreachable); tasks
			// of the chunks before may be in.
			for _, r := range results {
				if r.Err == nil {
					enqueued++
					fmt.Fprintln(a.io.Out, rules.DisplayID(r.ID))
				}
			}
			fmt.Fprintf(a.io.Err, "enqueued %d of %d tasks before the error\n", enqueued, total)
			return err
		}
		for i, r := range results {
			switch {
			case r.Err == nil:
				enqueued++
			case errors.Is(r.Err, leasehold.ErrAlreadyExists):
				existing++
			case errors.Is(r.Err, leasehold.ErrConflict):
				// Nothing enqueued: the id names another task.
				conflicts++
				if conflicts <= maxReportedLines {
					fmt.Fprintf(a.io.Err, "%s:%d: %s\n", name, lines[i], message(r.Err))
				}
				continue
			case errors.Is(r.Err, leasehold.ErrInvalid):
				bad = append(bad, lineError{line: lines[i], err: r.Err})
				continue
			case errors.Is(r.Err, context.DeadlineExceeded) && !errors.As(r.Err, new(*leasehold.NotSentError)):
				// The store sent the write again and still got no answer
				// in time: it may have landed. Not a failure that is
				// known to have happened.
				unknown++
				if unknown <= maxReportedLines {
					fmt.Fprintf(a.io.Err, "%s:%d: no answer in time; the task may be stored\n", name, lines[i])
				}
				continue
			default:
				failed++
				if firstFailure == nil {
					firstFailure = r.Err
				}
				if failed <= maxReportedLines {
					fmt.Fprintf(a.io.Err, "%s:%d: %s\n", name, lines[i], message(r.Err))
				}
				if !errors.As(r.Err, new(*leasehold.NotSentError)) {
					continue // not stored: no id to print
				}
			}
			fmt.Fprintln(a.io.Out, rules.DisplayID(r.ID))
		}
		if failed > maxReportedLines {
			fmt.Fprintf(a.io.Err, "%s: ... and %d more failed lines\n", name, failed-maxReportedLines)
		}
	}
	slices.SortFunc(bad, func(x, y lineError) int { return x.line - y.line })
	for i, b := range bad {
		if i == maxReportedLines {
			fmt.Fprintf(a.io.Err, "%s: ... and %d more bad lines\n", name, len(bad)-i)
			break
		}
		fmt.Fprintf(a.io.Err, "%s:%d: %v\n", name, b.line, b.err)
	}
	if conflicts > maxReportedLines {
		fmt.Fprintf(a.io.Err, "%s: ... and %d more id conflicts\n", name, conflicts-maxReportedLines)
	}
	unknownNote := ""
	if unknown > 0 {
		unknownNote = fmt.Sprintf(", %d unknown: no answer in time, may be stored", unknown)
	}
	fmt.Fprintf(a.io.Err, "enqueued %d of %d tasks in %s (%d already existed, %d id conflicts, %d bad lines, %d failed%s)\n",
		enqueued, total, time.Since(began).Round(time.Millisecond), existing, conflicts, len(bad), failed, unknownNote)
	switch {
	case unknown > 0 && firstFailure == nil:
		return fmt.Errorf("%d of %d tasks got no answer in time and may or may not be stored: enqueue the same lines again with ids to find out (an existing task is not enqueued twice); raise --call-timeout for a slow stack", unknown, total)
	case firstFailure != nil:
		return fmt.Errorf("%d of %d tasks could not be enqueued, the first: %w", failed, total, firstFailure)
	case conflicts > 0:
		return fmt.Errorf("%d of %d lines of %s name an existing task of another kind or payload (listed above) and were not enqueued: %w", conflicts, total, name, leasehold.ErrConflict)
	case len(bad) > 0:
		return usageErrorf("%d of %d lines of %s were rejected (listed above); the others were enqueued", len(bad), total, name)
	}
	return nil
}
