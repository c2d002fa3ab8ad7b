package lifecycle

// Exported for the package's external tests.

// Transitions returns the declared transitions.
func Transitions() []Transition { return transitions }

// SetTransitionHook makes f see every transition an execution takes (nil:
// none). Set it before any execution runs.
func SetTransitionHook(f func(from, to State, declared bool)) { transitionHook = f }
