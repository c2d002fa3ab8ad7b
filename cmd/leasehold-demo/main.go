// Command leasehold-demo is `make demo`: the worker and the dispatcher run in
// this process against the local AWS stack, a mixed set of example tasks is
// sent with SQS SendMessage, and a summary says whether each ended as it
// should (exit status 0) or not (1). See internal/demo.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/smithy-go/logging"

	"github.com/leasehold/leasehold/internal/awsenv"
	"github.com/leasehold/leasehold/internal/demo"
)

func main() {
	delay := flag.Duration("delay", demo.DefaultDelay, "how long the delayed task waits")
	slow := flag.Duration("slow", demo.DefaultSlow, "how long the slow task runs")
	timeout := flag.Duration("timeout", demo.DefaultTimeout, "give up when tasks have not settled by then")
	logPath := flag.String("log", "", "file for the worker's and dispatcher's JSON logs (default: none)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	context.AfterFunc(ctx, stop) // a second Ctrl-C kills at once

	logs := io.Discard
	if *logPath != "" {
		f, err := os.Create(*logPath)
		if err != nil {
			fail(err)
		}
		defer f.Close()
		logs = f
	}
	// The SDK's own warnings go to the log file too, not into the display.
	awsCfg, err := config.LoadDefaultConfig(ctx, config.WithLogger(logging.NewStandardLogger(logs)))
	if err != nil {
		fail(err)
	}
	awsCfg.HTTPClient = awsenv.GuardHTTP(awsCfg.HTTPClient)
	res, err := demo.ResolveResources(ctx, awsCfg, os.Getenv)
	if err != nil {
		fail(err)
	}
	err = demo.Run(ctx, demo.Config{
		AWS: awsCfg, Resources: res, Delay: *delay, Slow: *slow, Timeout: *timeout,
		Out: os.Stdout, Terminal: isTerminal(os.Stdout),
		Log: slog.New(slog.NewJSONHandler(logs, nil)),
	})
	if *logPath != "" {
		fmt.Printf("worker and dispatcher logs: %s\n", *logPath)
	}
	if err != nil {
		fail(err)
	}
	fmt.Printf("the tasks stay in table %s: try `go run ./cmd/leasehold list --status failed`, then `go run ./cmd/leasehold status ID`\n", res.Table)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "leasehold-demo:", err)
	os.Exit(1)
}

// isTerminal reports whether f is a character device, such as a terminal,
// rather than a pipe or a file.
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
