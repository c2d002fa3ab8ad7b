package awstest

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// LockNamedResources holds, until the test ends, the stack's named table and
// queues (leasehold-tasks, leasehold-work, ...), which `scripts/stack.sh
// env` hands every shell: a test that runs a worker on them (the doc test's
// README worker, the `leasehold init` project's README) would otherwise
// share them with another package's worker, each retrying the other's kinds
// as unknown. Most tests make their own resources (NewTable, NewQueues) and
// need no lock.
//
// The lock is a file lock beside the stack's endpoint, so it holds across
// the test processes that `go test ./...` runs at once; it is released when
// the test ends, or when its process dies.
func LockNamedResources(t testing.TB) {
	t.Helper()
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, strings.ToLower(os.Getenv(envEndpointSQS)))
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "leasehold-named-"+name+".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatalf("awstest: open the named resources' lock: %v", err)
	}
	bound := Scale(10 * time.Minute)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	timeout := time.NewTimer(bound)
	defer timeout.Stop()
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			t.Fatalf("awstest: lock the named resources: %v", err)
		}
		select {
		case <-tick.C:
		case <-timeout.C:
			f.Close()
			t.Fatalf("awstest: another test held the stack's named resources for over %s", bound)
		case <-t.Context().Done():
			f.Close()
			t.Fatal("awstest: the test ended while waiting for the stack's named resources")
		}
	}
	t.Cleanup(func() { f.Close() }) // closing the file releases the lock
}

// NamedResourceVar reports whether the environment variable k names one of
// the stack's named resources, as `scripts/stack.sh env` exports them:
// LEASEHOLD_TABLE, and a LEASEHOLD_<NAME>_QUEUE_URL or LEASEHOLD_<NAME>_DLQ_URL
// per queue.
func NamedResourceVar(k string) bool {
	if k == "LEASEHOLD_TABLE" {
		return true
	}
	rest, ok := strings.CutPrefix(k, "LEASEHOLD_")
	return ok && (strings.HasSuffix(rest, "_QUEUE_URL") || strings.HasSuffix(rest, "_DLQ_URL"))
}

// ChildEnv is the environment for a process a test starts: the test's own,
// without the stack's named resources (NamedResourceVar), then extra
// ("KEY=value" each, later ones winning). A shell pointed at the stack
// (`eval "$(scripts/stack.sh env)"`) exports them, and `leasehold run` or a
// worker of its own would serve whichever of them the test did not
// override: a child that inherited LEASEHOLD_INTAKE_QUEUE_URL ran an intake
// dispatcher on the shared leasehold-intake queue and took another test's
// submissions into its own table.
func ChildEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if !NamedResourceVar(k) {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}
