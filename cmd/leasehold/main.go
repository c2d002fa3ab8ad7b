// Command leasehold enqueues, inspects, cancels, retries and watches
// leasehold tasks. It only wires: the commands live in internal/cli.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/leasehold/leasehold/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], cli.StdStreams())
	stop()
	os.Exit(code)
}
