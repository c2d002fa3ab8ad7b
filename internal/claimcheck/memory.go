package claimcheck

import (
	"bytes"
	"context"
	"sync"
	"sync/atomic"
)

// Memory is a Blobs in memory, for leaseholdtest.Env and tests. It counts
// its calls, so a test can assert that small values never reach it.
type Memory struct {
	mu      sync.Mutex
	objects map[string][]byte

	// Puts, Gets and Deletes count the calls made.
	Puts, Gets, Deletes atomic.Int64
}

// NewMemory returns an empty Memory.
func NewMemory() *Memory { return &Memory{objects: map[string][]byte{}} }

// Put stores a copy of value under key.
func (m *Memory) Put(ctx context.Context, key string, value []byte) error {
	m.Puts.Add(1)
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.objects[key] = bytes.Clone(value)
	return nil
}

// Get returns a copy of the value under key, or ErrNotFound.
func (m *Memory) Get(ctx context.Context, key string) ([]byte, error) {
	m.Gets.Add(1)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.objects[key]
	if !ok {
		return nil, ErrNotFound
	}
	return bytes.Clone(v), nil
}

// Delete removes key.
func (m *Memory) Delete(ctx context.Context, key string) error {
	m.Deletes.Add(1)
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.objects, key)
	return nil
}

// Calls is the number of calls made so far.
func (m *Memory) Calls() int64 { return m.Puts.Load() + m.Gets.Load() + m.Deletes.Load() }
