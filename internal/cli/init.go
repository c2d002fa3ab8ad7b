package cli

import (
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold/internal/cli/scaffold"
)

func init() { register((*app).initCommand) }

func (a *app) initCommand() *cobra.Command {
	var (
		modulePath, local string
		force, noTidy     bool
	)
	cmd := &cobra.Command{
		Use:   "init DIR --module PATH [--local LEASEHOLD_CHECKOUT]",
		Short: "Write a new project for your own task kinds: worker, tests, deployment template",
		Long: `init writes a Go module in DIR (created if missing; it must be empty unless
--force) with a worker for your own task kinds, ready to build, test and
deploy:

  go.mod, main.go   the worker: Lambda on AWS, a long-lived poller elsewhere
  kinds.go          one sample kind, resize, to replace with yours
  main_test.go      handler tests (package leaseholdtest), and a task end to
                    end on the local stack (make test)
  template.yaml     your worker function beside leasehold's table, queues,
                    dispatcher and alarms (a nested stack of leasehold/)
  leasehold/        leasehold's own template and function Makefile, as of
                    this leasehold version: not yours to edit
  samconfig.toml, Makefile, README.md

leasehold is not on a public module proxy yet: --local names a leasehold
checkout that go.mod replaces the module with, and that the Makefile starts
the local stack from. With --local, init runs "go mod tidy" in DIR (which
needs the go command and may fetch modules); without it, add the replace
directive yourself and run "go mod tidy" (README.md in DIR says how).

` + exitCodesHelp,
		Example: `  leasehold init ../thumbnails --module example.com/thumbnails --local .
  cd ../thumbnails && make unit && make demo`,
		Args: posArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := args[0]
			if modulePath == "" {
				return usageErrorf("--module is required: the new module's path, such as example.com/thumbnails")
			}
			if err := scaffold.CheckModule(modulePath); err != nil {
				return usageErrorf("--module: %v", err)
			}
			written, err := scaffold.Write(scaffold.Config{Dir: dir, Module: modulePath, Local: local, Force: force})
			switch {
			case errors.Is(err, scaffold.ErrNotEmpty):
				return usageError{err}
			case err != nil:
				return err
			}
			out := a.io.Out
			fmt.Fprintf(out, "wrote %s (module %s):\n", dir, modulePath)
			for _, f := range written {
				fmt.Fprintln(out, "  "+filepath.FromSlash(f))
			}
			switch {
			case local == "":
				fmt.Fprintf(out, "\nleasehold is not on a public module proxy yet: add to %s\n\n  replace %s => /path/to/leasehold\n\nthen run `go mod tidy` there (README.md says more).\n",
					filepath.Join(dir, "go.mod"), scaffold.LeaseholdModule)
			case noTidy:
				fmt.Fprintf(out, "\nrun `go mod tidy` in %s before building it\n", dir)
			default:
				tidy := exec.CommandContext(cmd.Context(), "go", "mod", "tidy")
				tidy.Dir = dir
				if msg, err := tidy.CombinedOutput(); err != nil {
					return fmt.Errorf("wrote the project, but `go mod tidy` in %s failed (run it again there): %w: %s",
						dir, err, strings.TrimSpace(string(msg)))
				}
				fmt.Fprintln(out, "  go.sum (go mod tidy)")
			}
			fmt.Fprintf(out, "\nnext: cd %s && make unit (tests), make demo (a task on the local stack), make help\n", dir)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&modulePath, "module", "", "module path of the new project (required), such as example.com/thumbnails")
	f.StringVar(&local, "local", "", "a leasehold checkout: go.mod replaces leasehold with it, and the Makefile runs its local stack")
	f.BoolVar(&force, "force", false, "write into DIR even if it has files (files of the same names are replaced)")
	f.BoolVar(&noTidy, "no-tidy", false, "with --local, do not run `go mod tidy` (go.sum is then missing)")
	return cmd
}
