package awstest

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// FreshShellEnv is the environment of a fresh login on this machine: HOME and
// the user, a system PATH with the tools README.md asks for (go, Python
// 3.11+ and 3.13+) where this machine has them, the machine's Go settings
// (module and build caches, proxy, toolchain policy) and the stack's ports,
// and a GOPATH of its own, so that `go install` goes where a fresh
// machine's would. Nothing of the test's own environment (the stack's
// endpoints, credentials, table and queues) is in it: a snippet run in it
// has only what the snippets before it set, as a reader's shell would.
func FreshShellEnv(t testing.TB) []string {
	t.Helper()
	path := []string{}
	for _, tool := range []string{"go", "python3", "python3.13"} {
		if p, err := exec.LookPath(tool); err == nil && !slices.Contains(path, filepath.Dir(p)) {
			path = append(path, filepath.Dir(p))
		}
	}
	path = append(path, "/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
	env := []string{"PATH=" + strings.Join(path, string(os.PathListSeparator)), "GOPATH=" + t.TempDir()}
	for _, k := range []string{"HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "TZ", "TMPDIR", "PYENV_ROOT",
		"GOPROXY", "GONOPROXY", "GONOSUMDB", "GOPRIVATE", "GOSUMDB", "GOINSECURE", "GOFLAGS", "GOTOOLCHAIN",
		"LEASEHOLD_STACK_PORT", "LEASEHOLD_STACK_DDB_PORT", "LEASEHOLD_PYTHON313"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	for _, k := range []string{"GOCACHE", "GOMODCACHE"} {
		out, err := exec.CommandContext(t.Context(), "go", "env", k).Output()
		if err != nil {
			t.Fatalf("go env %s: %v", k, err)
		}
		env = append(env, k+"="+strings.TrimSpace(string(out)))
	}
	return env
}
