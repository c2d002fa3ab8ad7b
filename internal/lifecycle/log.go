package lifecycle

import (
	"context"
	"log/slog"
	"runtime"
	"time"
)

// taskLog holds the attributes every line about one execution carries. They
// are added to a record only when a line is written: an execution that
// writes nothing (a success at INFO) builds no logger and formats nothing.
//
// The execution's goroutine sets them; the renewer reads them while it runs,
// and none changes between the renewer's start and its join.
type taskLog struct {
	taskID     string
	kind       string
	fence      int64
	durationMS int64
	messageID  string
	base       *slog.Logger
	// The attempt (at most lease.MaxAttemptsLimit) and the flags last,
	// together: one word for them, which keeps the execution record in its
	// size class.
	attempt int32
	claimed bool // attempt and fence are set
	timed   bool // durationMS is set
}

// enabled reports whether a line at level would be written.
func (l *taskLog) enabled(level slog.Level) bool {
	return l.base.Enabled(context.Background(), level)
}

// logAt writes one line at level with the execution's attributes, then args
// (key-value pairs or slog.Attr values, as for slog.Logger.Log). It checks
// the level before it builds anything; callers on a path every task takes
// also check enabled before boxing their arguments.
func (l *taskLog) logAt(level slog.Level, msg string, args ...any) {
	ctx := context.Background()
	h := l.base.Handler()
	if !h.Enabled(ctx, level) {
		return
	}
	var pcs [1]uintptr
	runtime.Callers(3, pcs[:]) // skip Callers, logAt and its wrapper
	r := slog.NewRecord(time.Now(), level, msg, pcs[0])
	r.AddAttrs(slog.String("message_id", l.messageID))
	if l.taskID != "" {
		r.AddAttrs(slog.String("task_id", l.taskID))
	}
	if l.kind != "" {
		r.AddAttrs(slog.String("kind", l.kind))
	}
	if l.claimed {
		r.AddAttrs(slog.Int("attempt", int(l.attempt)), slog.Int64("fence", l.fence))
	}
	if l.timed {
		r.AddAttrs(slog.Int64("duration_ms", l.durationMS))
	}
	r.Add(args...)
	_ = h.Handle(ctx, r)
}

func (l *taskLog) debug(msg string, args ...any) { l.logAt(slog.LevelDebug, msg, args...) }
func (l *taskLog) info(msg string, args ...any)  { l.logAt(slog.LevelInfo, msg, args...) }
func (l *taskLog) warn(msg string, args ...any)  { l.logAt(slog.LevelWarn, msg, args...) }
func (l *taskLog) error(msg string, args ...any) { l.logAt(slog.LevelError, msg, args...) }
