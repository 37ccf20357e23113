package callback

import (
	"context"
	"log/slog"
	"time"

	"github.com/provgate/provgate/backend"
	"github.com/provgate/provgate/backend/internal/writebehind"
)

// maxQueuedAttempts bounds the attempt records waiting to be written; an
// attempt beyond it is written by its caller, so the queue never grows
// without bound and no record is dropped.
const maxQueuedAttempts = 4096

// attemptBatchDelay is how long the writer waits after the first record of
// a batch for more to join it: concurrent callbacks then share one
// transaction, and the store's writer (SQLite has one connection) is
// taken once per batch rather than once per attempt. A record is in the
// store within this delay plus one batch write of its attempt.
const attemptBatchDelay = 50 * time.Millisecond

// attemptLog writes callback attempt records off the request path, in
// batches (docs/design.md §12.8): a callbackDo answers as soon as its
// exchange is done, and one writer commits every record queued meanwhile
// in one transaction, so concurrent callbacks do not each wait for the
// database's writer. A record is in the store within attemptBatchDelay
// plus one batch write of its attempt; this service's own reads of attempts (Attempts) and the
// worker's stop wait for the queue to drain first, so what this replica
// did is always readable through it.
type attemptLog struct {
	st    Store
	log   *slog.Logger
	queue *writebehind.Queue[backend.CallbackAttempt]
}

func newAttemptLog(st Store, log *slog.Logger) *attemptLog {
	l := &attemptLog{st: st, log: log}
	l.queue = writebehind.New(maxQueuedAttempts, attemptBatchDelay, l.write)
	return l
}

// add queues a for writing.
func (l *attemptLog) add(a backend.CallbackAttempt) { l.queue.Add(a) }

func (l *attemptLog) write(batch []backend.CallbackAttempt) {
	if err := l.st.RecordAttempts(context.Background(), batch); err != nil {
		l.log.Warn("callback: recording attempts failed", "attempts", len(batch), "err", err)
	}
}

// flush returns once every attempt queued before it is written.
func (l *attemptLog) flush() { l.queue.Flush() }
