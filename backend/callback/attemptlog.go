package callback

import (
	"context"
	"log/slog"
	"sync"

	"github.com/provgate/provgate/backend"
)

// maxQueuedAttempts bounds the attempt records waiting to be written; an
// attempt beyond it is written by its caller, so the queue never grows
// without bound and no record is dropped.
const maxQueuedAttempts = 4096

// attemptLog writes callback attempt records off the request path, in
// batches (docs/design.md §12.8): a callbackDo answers as soon as its
// exchange is done, and one writer commits every record queued meanwhile
// in one transaction, so concurrent callbacks do not each wait for the
// database's writer. A record is in the store within one batch write of
// its attempt; this service's own reads of attempts (Attempts) and the
// worker's stop wait for the queue to drain first, so what this replica
// did is always readable through it.
type attemptLog struct {
	st  Store
	log *slog.Logger

	mu    sync.Mutex
	idle  *sync.Cond // signalled when the queue is empty and no batch is being written
	queue []backend.CallbackAttempt
	busy  bool
}

func newAttemptLog(st Store, log *slog.Logger) *attemptLog {
	l := &attemptLog{st: st, log: log}
	l.idle = sync.NewCond(&l.mu)
	return l
}

// add queues a for writing.
func (l *attemptLog) add(a backend.CallbackAttempt) {
	l.mu.Lock()
	if len(l.queue) >= maxQueuedAttempts {
		l.mu.Unlock()
		l.write([]backend.CallbackAttempt{a})
		return
	}
	l.queue = append(l.queue, a)
	start := !l.busy
	l.busy = true
	l.mu.Unlock()
	if start {
		go l.drain()
	}
}

// drain writes batches until the queue is empty.
func (l *attemptLog) drain() {
	for {
		l.mu.Lock()
		batch := l.queue
		l.queue = nil
		if len(batch) == 0 {
			l.busy = false
			l.idle.Broadcast()
			l.mu.Unlock()
			return
		}
		l.mu.Unlock()
		l.write(batch)
	}
}

func (l *attemptLog) write(batch []backend.CallbackAttempt) {
	if err := l.st.RecordAttempts(context.Background(), batch); err != nil {
		l.log.Warn("callback: recording attempts failed", "attempts", len(batch), "err", err)
	}
}

// flush returns once every attempt queued before it is written.
func (l *attemptLog) flush() {
	l.mu.Lock()
	for l.busy {
		l.idle.Wait()
	}
	l.mu.Unlock()
}
