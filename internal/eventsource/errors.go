package eventsource

import (
	"errors"
	"fmt"

	"github.com/leasehold/leasehold/internal/queues"
)

var (
	// ErrInvalidConfig is wrapped by every error New returns for a bad Config.
	ErrInvalidConfig = errors.New("invalid event source config")

	// ErrQueueNotFound means the configured queue does not exist (SQS
	// QueueDoesNotExist). Run returns it, wrapped, when it cannot start.
	// It is queues.ErrNotFound, so one sentinel covers every lookup.
	ErrQueueNotFound = queues.ErrNotFound

	// ErrAlreadyRunning is returned by Run while another Run call on the same
	// Runner has not returned yet.
	ErrAlreadyRunning = errors.New("event source runner already running")

	// errInvocationTimeout is logged when a handler returns after its
	// invocation deadline. Lambda would have stopped the function by then, so
	// the batch counts as failed whatever the handler answered.
	errInvocationTimeout = errors.New("invocation timed out")

	// errInvalidBatchItemFailure is logged when a response lists an empty
	// ItemIdentifier or one that is not in the batch; as in Lambda, the whole
	// batch then counts as failed.
	errInvalidBatchItemFailure = errors.New("invalid batch item failure")
)

// panicError is how a recovered handler panic is reported. The batch it
// happened in counts as failed.
type panicError struct {
	value any    // the value passed to panic
	stack []byte // the handler goroutine's stack at the panic
}

func (e *panicError) Error() string {
	return fmt.Sprintf("handler panicked: %v", e.value)
}

// Unwrap returns the panic value if it is an error, so errors.Is and
// errors.As see through a panic(err).
func (e *panicError) Unwrap() error {
	err, _ := e.value.(error)
	return err
}
