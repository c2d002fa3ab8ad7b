// Package rie runs a Lambda function's bootstrap under the AWS Lambda
// Runtime Interface Emulator, for tests: the emulator serves the Lambda
// Runtime API to the bootstrap, takes invocations as HTTP POSTs, and on
// SIGTERM shuts the runtime down as Lambda does (SIGKILL at once, or
// SIGTERM first when the runtime registered an extension).
package rie

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/awstest"
)

// Module and Version name the emulator's command, installed from the Go
// module proxy. The version is a pseudo-version because the proxy does not
// serve the repository's release tags (v1.23.0 and later are not Go-module
// versions).
const (
	Module  = "github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie"
	Version = "v0.0.0-20261030222936-bef5c4ba774d"
)

// ErrExited is the error of a wait that saw the emulator exit first.
var ErrExited = errors.New("the emulator exited before it answered")

// Install installs the emulator into dir and returns its path. It is
// installed outside any module so that the emulator's own go.mod decides
// its dependencies. A proxy that cannot be reached fails the test: the
// tests that use it are part of `make test`, which needs the proxy anyway.
func Install(t testing.TB, dir string) string {
	t.Helper()
	Go(t, []string{"install", Module + "@" + Version}, dir,
		"GOBIN="+dir, "GOOS=linux", "CGO_ENABLED=0", "GOFLAGS=-buildvcs=false")
	return filepath.Join(dir, "aws-lambda-rie")
}

// Bootstrap builds the package in pkgDir ("" for the test's own) with tags
// (beside lambda.norpc) as dir/bootstrap, as for a provided.al2023
// function, and returns its path.
func Bootstrap(t testing.TB, dir, pkgDir, tags string) string {
	t.Helper()
	out := filepath.Join(dir, "bootstrap")
	if tags != "" {
		tags = "," + tags
	}
	Go(t, []string{"build", "-tags", "lambda.norpc" + tags, "-trimpath", "-ldflags=-s -w", "-o", out, "."}, pkgDir,
		"GOOS=linux", "CGO_ENABLED=0")
	return out
}

// Go runs the go command with args in wd ("" for the test's package
// directory) and env added.
func Go(t testing.TB, args []string, wd string, env ...string) {
	t.Helper()
	// go test puts its own GOROOT/bin first on PATH.
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go command on PATH: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), awstest.Scale(5*time.Minute))
	defer cancel()
	cmd := exec.CommandContext(ctx, goTool, args...)
	cmd.Dir = wd
	cmd.Env = awstest.ChildEnv(env...)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	t.Logf("go %s: %s", args[0], time.Since(start).Round(time.Millisecond))
}

// Emulator is a running aws-lambda-rie.
type Emulator struct {
	URL string // invocation endpoint
	Log string // path of the emulator's and the function's output

	stop func(t testing.TB)
}

// Start starts rie serving bootstrap on free 127.0.0.1 ports, with env
// added to the test's environment, its output (and the function's) in
// dir/rie.log, waits until it accepts connections, and stops it (and the
// function it started) when the test ends, logging the output if the test
// failed.
func Start(t *testing.T, dir, rie, bootstrap string, env []string) *Emulator {
	t.Helper()
	invokeAddr, runtimeAddr := FreeAddrs(t)
	logPath := filepath.Join(dir, "rie.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close() // the child has its own descriptor

	cmd := exec.Command(rie,
		"--runtime-interface-emulator-address", invokeAddr,
		"--runtime-api-address", runtimeAddr,
		"--log-level", "warn",
		bootstrap)
	cmd.Dir = dir
	cmd.Env = awstest.ChildEnv(env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", rie, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	var once sync.Once
	e := &Emulator{URL: "http://" + invokeAddr + "/2015-03-31/functions/function/invocations", Log: logPath,
		stop: func(t testing.TB) { once.Do(func() { StopGroup(t, cmd.Process.Pid, exited) }) }}
	t.Cleanup(func() {
		e.Stop(t)
		if t.Failed() {
			out, _ := os.ReadFile(logPath)
			t.Logf("emulator and function output:\n%s", out)
		}
	})

	ctx, cancel := context.WithTimeout(t.Context(), awstest.Scale(30*time.Second))
	defer cancel()
	// Both: the emulator's Runtime API can start listening after its
	// invocation endpoint does, and an invocation before it starts the
	// function, which then finds nothing on the Runtime API and exits.
	for _, addr := range []string{runtimeAddr, invokeAddr} {
		if err := WaitListening(ctx, addr, 20*time.Millisecond, exited); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// Stop stops the emulator with SIGTERM (StopGroup) and waits for it. Only
// the first call does anything.
func (e *Emulator) Stop(t testing.TB) { e.stop(t) }

// Invoke posts body to the function and returns its answer, failing the
// test on anything but HTTP 200 or after timeout.
func (e *Emulator) Invoke(t testing.TB, body []byte, timeout time.Duration) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.URL, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("invoke: %v", err)
	}
	defer res.Body.Close()
	out, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("read invocation response: %v", err)
	}
	if res.StatusCode != http.StatusOK {
		t.Fatalf("invoke: HTTP %d: %s", res.StatusCode, out)
	}
	return out
}

// WaitListening dials addr every poll until it accepts a connection. It
// fails when ctx ends or the process whose Wait reports on exited exits
// (the report is put back for whoever waits next).
func WaitListening(ctx context.Context, addr string, poll time.Duration, exited chan error) error {
	var d net.Dialer
	for {
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			conn.Close()
			return nil
		}
		select {
		case err := <-exited:
			exited <- err
			return fmt.Errorf("%w (%v) before it listened on %s", ErrExited, err, addr)
		case <-ctx.Done():
			return fmt.Errorf("nothing listening on %s: %w", addr, ctx.Err())
		case <-time.After(poll):
		}
	}
}

// StopGroup sends SIGTERM to the emulator's process group (the emulator
// then stops the function it started, which runs in a group of its own),
// escalates to SIGKILL after 10s, and kills any function process left
// over. exited reports the emulator's Wait.
func StopGroup(t testing.TB, pid int, exited chan error) {
	t.Helper()
	children := childPIDs(pid)
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	timer := time.NewTimer(10 * time.Second)
	defer timer.Stop()
	select {
	case <-exited:
	case <-timer.C:
		t.Errorf("emulator (pid %d) ignored SIGTERM for 10s; killing it", pid)
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		<-exited
	}
	for _, c := range children {
		// The function was started with its own process group; the
		// emulator normally kills it. ESRCH (already gone) is the usual
		// answer here.
		if err := syscall.Kill(-c, syscall.SIGKILL); err == nil {
			t.Logf("killed leftover function process group %d", c)
		}
	}
}

// childPIDs lists the direct children of pid from /proc.
func childPIDs(pid int) []int {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	var out []int
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		for _, s := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(s); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

// FreeAddrs returns two 127.0.0.1 addresses free a moment ago, and
// different: both listeners are open together, since a port just closed
// can be the next one handed out (an emulator given the same port twice
// binds one of its servers and never answers).
func FreeAddrs(t testing.TB) (string, string) {
	t.Helper()
	var addrs [2]string
	for i := range addrs {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		addrs[i] = l.Addr().String()
	}
	return addrs[0], addrs[1]
}

// StoppedOnSIGTERM checks the output of an emulator stopped with Stop: the
// function logged line, which it writes only when it got SIGTERM, and the
// emulator did not have to kill it after its shutdown deadline. It
// returns what is wrong, or "" when both hold.
func StoppedOnSIGTERM(output []byte, line string) string {
	switch {
	case !bytes.Contains(output, []byte(line)):
		return "the function logged no stop on SIGTERM"
	case bytes.Contains(output, []byte("did not exit after deadline")):
		return "the emulator had to kill the function after SIGTERM"
	}
	return ""
}
