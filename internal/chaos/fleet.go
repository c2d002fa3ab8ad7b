package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// Fleet runs worker processes in slots. Each slot always has one process;
// killing it starts the next generation under a new name ("w<slot>g<gen>"),
// with its own evidence, metrics and log files in Dir. Every process started
// is reaped: Wait is called on it exactly once, by its own goroutine.
type Fleet struct {
	Bin string   // the worker binary
	Dir string   // evidence, metrics and logs
	Env []string // the workers' environment, without CHAOS_NAME and the file paths

	mu    sync.Mutex
	slots []*proc
	names []string // every process ever started
	kills int
	stops int
	exits int // processes that exited on their own (CHAOS_EXIT_AFTER_FINISH)
	// downs holds when each process was killed or found exited.
	downs []time.Time
	// fate records, per process name, when it was SIGKILLed or paused.
	fate map[string][]string
	// code is the code version new processes run (CHAOS_CODE; Deploy
	// sets it), "" for the worker's default.
	code string
}

func (f *Fleet) note(name, what string) {
	if f.fate == nil {
		f.fate = map[string][]string{}
	}
	f.fate[name] = append(f.fate[name], what+" at "+time.Now().UTC().Format("15:04:05.000"))
}

// Fates returns, per process name, when it was killed or paused.
func (f *Fleet) Fates() map[string][]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string][]string, len(f.fate))
	for k, v := range f.fate {
		out[k] = append([]string(nil), v...)
	}
	return out
}

// proc is one worker process.
type proc struct {
	slot, gen int
	name      string
	cmd       *exec.Cmd
	done      chan struct{} // closed once the process has been reaped
	paused    bool
	// replacing: Deploy stopped it and starts its successor; the chaos
	// leaves it alone.
	replacing bool
}

// reapTimeout bounds the wait for a process that was sent SIGKILL.
const reapTimeout = 15 * time.Second

// Start starts n slots.
func (f *Fleet) Start(n int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range n {
		p, err := f.spawn(i, 1)
		if err != nil {
			return err
		}
		f.slots = append(f.slots, p)
	}
	return nil
}

// spawn starts generation gen of slot. Callers hold f.mu.
func (f *Fleet) spawn(slot, gen int) (*proc, error) {
	name := fmt.Sprintf("w%dg%d", slot, gen)
	logf, err := os.Create(filepath.Join(f.Dir, "stderr-"+name+".log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close() // the child has its own descriptor
	cmd := exec.Command(f.Bin)
	cmd.Env = append(append([]string(nil), f.Env...),
		"CHAOS_NAME="+name,
		"AWS_SDK_UA_APP_ID="+name, // the proxies tell workers apart by it
		"CHAOS_EVIDENCE="+filepath.Join(f.Dir, "evidence-"+name+".jsonl"),
		"CHAOS_METRICS="+filepath.Join(f.Dir, "metrics-"+name+".jsonl"),
	)
	if f.code != "" {
		cmd.Env = append(cmd.Env, "CHAOS_CODE="+f.code)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("chaos: start worker %s: %w", name, err)
	}
	p := &proc{slot: slot, gen: gen, name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		_ = cmd.Wait() // reaps the process; its exit status is not needed
	}()
	f.names = append(f.names, name)
	return p, nil
}

// Names lists every worker process started so far.
func (f *Fleet) Names() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.names...)
}

// Counts returns the kills and pauses so far.
func (f *Fleet) Counts() (kills, stops int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.kills, f.stops
}

func waitDone(p *proc, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.done:
		return nil
	case <-t.C:
		return fmt.Errorf("chaos: worker %s not reaped within %s", p.name, d)
	}
}

// KillRandom SIGKILLs the process of a random slot that is not paused,
// reaps it and starts the slot's next generation.
func (f *Fleet) KillRandom(rng *rand.Rand) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var cand []*proc
	for _, p := range f.slots {
		if !p.paused && !p.replacing {
			cand = append(cand, p)
		}
	}
	if len(cand) == 0 {
		return nil
	}
	p := cand[rng.IntN(len(cand))]
	_ = p.cmd.Process.Signal(syscall.SIGKILL) // fails only if it already exited
	if err := waitDone(p, reapTimeout); err != nil {
		return err
	}
	f.kills++
	f.downs = append(f.downs, time.Now())
	f.note(p.name, "SIGKILLed")
	next, err := f.spawn(p.slot, p.gen+1)
	if err != nil {
		return err
	}
	f.slots[p.slot] = next
	return nil
}

// RestartExited starts the next generation of every slot whose process
// exited on its own (a fault the worker injects into itself), and returns how
// many it restarted.
func (f *Fleet) RestartExited() (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for i, p := range f.slots {
		if p.replacing {
			continue
		}
		select {
		case <-p.done:
		default:
			continue
		}
		f.exits++
		f.downs = append(f.downs, time.Now())
		f.note(p.name, "exited on its own")
		next, err := f.spawn(p.slot, p.gen+1)
		if err != nil {
			return n, err
		}
		f.slots[i] = next
		n++
	}
	return n, nil
}

// Downs returns when each process was killed, or found to have exited.
func (f *Fleet) Downs() []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Time(nil), f.downs...)
}

// Exits returns how many processes exited on their own and were restarted.
func (f *Fleet) Exits() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.exits
}

// Pause SIGSTOPs the process of a random slot and returns a function that
// SIGCONTs it. At most one slot is paused at a time; ok is false when one
// already is.
func (f *Fleet) Pause(rng *rand.Rand) (resume func(), ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.anyPaused() {
		return nil, false
	}
	p := f.slots[rng.IntN(len(f.slots))]
	if p.replacing {
		return nil, false
	}
	return f.pause(p)
}

// PauseNamed is Pause for the process named name, if it still runs.
func (f *Fleet) PauseNamed(name string) (resume func(), ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.anyPaused() {
		return nil, false
	}
	for _, p := range f.slots {
		if p.name == name && !p.replacing {
			return f.pause(p)
		}
	}
	return nil, false
}

func (f *Fleet) anyPaused() bool {
	for _, p := range f.slots {
		if p.paused {
			return true
		}
	}
	return false
}

// pause SIGSTOPs p (f.mu held) and returns the function that SIGCONTs it.
func (f *Fleet) pause(p *proc) (resume func(), ok bool) {
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return nil, false
	}
	p.paused = true
	f.stops++
	f.note(p.name, "SIGSTOPped")
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
		p.paused = false
		f.note(p.name, "SIGCONTed")
	}, true
}

// Deploy switches every slot to code version code, as a deploy does: it
// stops each slot's process gracefully (SIGCONT, SIGTERM; SIGKILL after
// grace) and starts its next generation with CHAOS_CODE=code. Every
// process started from the call on runs code, those the chaos restarts
// meanwhile included. It returns when every slot runs the new code.
func (f *Fleet) Deploy(code string, grace time.Duration) error {
	f.mu.Lock()
	f.code = code
	old := append([]*proc(nil), f.slots...)
	for _, p := range old {
		p.replacing = true
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		p.paused = false
		f.note(p.name, "stopped for the deploy of "+code)
	}
	f.mu.Unlock()
	deadline := time.Now().Add(grace)
	var errs []error
	for _, p := range old {
		if waitDone(p, max(time.Until(deadline), time.Millisecond)) != nil {
			_ = p.cmd.Process.Signal(syscall.SIGKILL)
			if err := waitDone(p, reapTimeout); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		f.mu.Lock()
		next, err := f.spawn(p.slot, p.gen+1)
		if err == nil {
			f.slots[p.slot] = next
		}
		f.mu.Unlock()
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Chaos kills a random worker every KillMin..KillMax and pauses one for
// PauseFor every PauseEvery, until ctx is done. It resumes a paused worker
// before it returns.
type Chaos struct {
	KillMin, KillMax     time.Duration
	PauseEvery, PauseFor time.Duration
	Seed                 uint64
}

// Run runs the chaos on f until ctx is done; it returns the first error
// that stopped it (a worker that could not be reaped or restarted).
func (c Chaos) Run(ctx context.Context, f *Fleet) error {
	rng := rand.New(rand.NewPCG(c.Seed, c.Seed+1))
	between := func(a, b time.Duration) time.Duration {
		if b <= a {
			return a
		}
		return a + time.Duration(rng.Int64N(int64(b-a)))
	}
	killT := time.NewTimer(between(c.KillMin, c.KillMax))
	defer killT.Stop()
	pauseT := time.NewTimer(between(c.PauseEvery/2, c.PauseEvery*3/2))
	defer pauseT.Stop()
	resumeT := time.NewTimer(time.Hour)
	resumeT.Stop()
	defer resumeT.Stop()
	// Workers that exit on their own are restarted within a tick.
	exitT := time.NewTicker(250 * time.Millisecond)
	defer exitT.Stop()
	var resume func()
	defer func() {
		if resume != nil {
			resume()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-killT.C:
			if err := f.KillRandom(rng); err != nil {
				return err
			}
			killT.Reset(between(c.KillMin, c.KillMax))
		case <-pauseT.C:
			if r, ok := f.Pause(rng); ok {
				resume = r
				resumeT.Reset(c.PauseFor)
			}
			pauseT.Reset(between(c.PauseEvery/2, c.PauseEvery*3/2))
		case <-exitT.C:
			if _, err := f.RestartExited(); err != nil {
				return err
			}
		case <-resumeT.C:
			if resume != nil {
				resume()
				resume = nil
			}
		}
	}
}

// StopAll stops every worker gracefully (SIGCONT, then SIGTERM) and waits up
// to grace for each; those still running are killed. It returns once every
// process has been reaped, with an error naming those that had to be killed.
func (f *Fleet) StopAll(grace time.Duration) error {
	f.mu.Lock()
	slots := append([]*proc(nil), f.slots...)
	f.mu.Unlock()
	for _, p := range slots {
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	deadline := time.Now().Add(grace)
	var errs []error
	for _, p := range slots {
		if err := waitDone(p, max(time.Until(deadline), time.Millisecond)); err != nil {
			errs = append(errs, fmt.Errorf("chaos: worker %s ignored SIGTERM for %s; killed", p.name, grace))
			_ = p.cmd.Process.Signal(syscall.SIGKILL)
			if err := waitDone(p, reapTimeout); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}
