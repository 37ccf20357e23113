package callback

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/provgate/provgate/backend"
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
	st  Store
	log *slog.Logger

	mu    sync.Mutex
	idle  *sync.Cond // signalled when the queue is empty and no batch is being written
	queue []backend.CallbackAttempt
	busy  bool
	// flushing counts the flushes waiting: the drainer then writes what
	// is queued without waiting for more.
	flushing int
	// now ends the drainer's wait for more records at once (flush).
	now chan struct{}
}

func newAttemptLog(st Store, log *slog.Logger) *attemptLog {
	l := &attemptLog{st: st, log: log, now: make(chan struct{}, 1)}
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

// drain writes batches until the queue is empty, each after waiting
// attemptBatchDelay for more records unless a flush is waiting.
func (l *attemptLog) drain() {
	t := time.NewTimer(attemptBatchDelay)
	defer t.Stop()
	for {
		l.mu.Lock()
		wait := l.flushing == 0
		l.mu.Unlock()
		if wait {
			select {
			case <-t.C:
			case <-l.now:
			}
		}
		l.mu.Lock()
		batch := l.queue
		l.queue = nil
		l.mu.Unlock()
		if len(batch) > 0 {
			l.write(batch)
		}
		l.mu.Lock()
		if len(l.queue) == 0 {
			l.busy = false
			l.idle.Broadcast()
			l.mu.Unlock()
			return
		}
		l.mu.Unlock()
		t.Reset(attemptBatchDelay)
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
	l.flushing++
	if l.busy {
		select {
		case l.now <- struct{}{}:
		default:
		}
	}
	for l.busy {
		l.idle.Wait()
	}
	l.flushing--
	l.mu.Unlock()
}
