package peer

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"
)

// runLog is the slog.Handler of a run's handler.Call.Log: a text handler
// on the run's log writer, made at the first record, attribute or group.
// Most runs log nothing, and a text handler made for each of them was 3%
// of what a peer allocated under W1.
type runLog struct {
	w io.Writer
	h atomic.Pointer[slog.TextHandler]
}

func newRunLogger(w io.Writer) *slog.Logger { return slog.New(&runLog{w: w}) }

func (l *runLog) text() *slog.TextHandler {
	if h := l.h.Load(); h != nil {
		return h
	}
	l.h.CompareAndSwap(nil, slog.NewTextHandler(l.w, nil))
	return l.h.Load()
}

// Enabled is the text handler's with no options: Info and above.
func (l *runLog) Enabled(_ context.Context, level slog.Level) bool {
	return level >= slog.LevelInfo
}

func (l *runLog) Handle(ctx context.Context, r slog.Record) error { return l.text().Handle(ctx, r) }

func (l *runLog) WithAttrs(as []slog.Attr) slog.Handler { return l.text().WithAttrs(as) }

func (l *runLog) WithGroup(name string) slog.Handler { return l.text().WithGroup(name) }
