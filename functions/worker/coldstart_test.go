package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/awstest"
)

// BenchmarkColdStart starts the worker's bootstrap and a hello-world
// aws-lambda-go function under the Runtime Interface Emulator, one after
// the other each round, and times each from the emulator's start to the
// answer of its first invocation (an SQS event with no records): the
// cold start Lambda bills and a first task waits for. It reports the
// medians and their ratio (issue 22's target: at most 1.2). The worker
// gets the environment a deployed function has; it makes no AWS call on
// an empty event. Run it with
//
//	go test -run '^$' -bench BenchmarkColdStart -benchtime 10x ./functions/worker
func BenchmarkColdStart(b *testing.B) {
	if runtime.GOOS != "linux" {
		b.Skip("the Lambda Runtime Interface Emulator runs only on Linux")
	}
	dir := b.TempDir()
	bootstrap, rie := buildBinaries(b, dir)
	hello := filepath.Join(dir, "hello")
	buildGo(b, []string{"build", "-tags", "lambda.norpc", "-trimpath", "-ldflags=-s -w", "-o", hello, "./testdata/hello"}, "", "GOOS=linux", "CGO_ENABLED=0")
	env := []string{
		"AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test",
		"LEASEHOLD_TABLE=leasehold-tasks", "LEASEHOLD_WORK_QUEUE_URL=http://127.0.0.1:9/000000000000/leasehold-work",
		"LEASEHOLD_WORK_DLQ_URL=http://127.0.0.1:9/000000000000/leasehold-work-dlq",
	}
	var worker, base []time.Duration
	for b.Loop() {
		worker = append(worker, coldStart(b, dir, rie, bootstrap, env))
		base = append(base, coldStart(b, dir, rie, hello, env))
	}
	b.StopTimer()
	med := func(ds []time.Duration) time.Duration {
		s := slices.Clone(ds)
		slices.Sort(s)
		return s[len(s)/2]
	}
	w, h := med(worker), med(base)
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(float64(w.Microseconds())/1000, "worker-ms")
	b.ReportMetric(float64(h.Microseconds())/1000, "hello-ms")
	b.ReportMetric(float64(w)/float64(h), "worker/hello")
}

// coldStart starts the emulator with bootstrap, invokes it once, stops it,
// and returns the time from the start to the first answer.
func coldStart(tb testing.TB, dir, rie, bootstrap string, env []string) time.Duration {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	runtimeL, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	runtimeAddr := runtimeL.Addr().String()
	runtimeL.Close()
	cmd := exec.Command(rie, "--runtime-interface-emulator-address", addr, "--runtime-api-address", runtimeAddr, "--log-level", "error", bootstrap)
	cmd.Dir = dir
	cmd.Env = awstest.ChildEnv(env...)
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start %s: %v", rie, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer stopEmulator(tb, cmd.Process.Pid, exited)
	ctx, cancel := context.WithTimeout(tb.Context(), 30*time.Second)
	defer cancel()
	url := "http://" + addr + "/2015-03-31/functions/function/invocations"
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader([]byte(`{"Records":[]}`)))
		if err != nil {
			tb.Fatal(err)
		}
		res, err := http.DefaultClient.Do(req)
		if err == nil {
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusOK {
				tb.Fatalf("invoke %s: HTTP %d: %s", filepath.Base(bootstrap), res.StatusCode, body)
			}
			return time.Since(start)
		}
		select {
		case <-ctx.Done():
			tb.Fatalf("%s: no answer: %v", filepath.Base(bootstrap), fmt.Errorf("%w: %w", ctx.Err(), err))
		case <-time.After(time.Millisecond): // the emulator is not listening yet
		}
	}
}
