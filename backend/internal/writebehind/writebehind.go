// Package writebehind writes items off their callers' path, in batches,
// by one drainer goroutine at a time: the callback attempt records
// (docs/design.md §12.8) and the store's event notices (§13.4).
package writebehind

import (
	"sync"
	"time"
)

// Queue holds the items waiting to be written. The queue never grows past
// its bound: items beyond it are written by their caller, so nothing is
// dropped.
type Queue[T any] struct {
	max   int
	delay time.Duration
	write func([]T)

	mu    sync.Mutex
	idle  *sync.Cond // signalled when the queue is empty and no batch is being written
	queue []T
	busy  bool
	// flushing counts the flushes waiting: the drainer then writes what
	// is queued without waiting for more.
	flushing int
	// now ends the drainer's wait for more items at once (Flush).
	now chan struct{}
}

// New returns a queue of at most max items that writes its batches with
// write. With a delay the drainer waits that long after the first item of
// a batch for more to join it; without one it writes at once.
func New[T any](max int, delay time.Duration, write func([]T)) *Queue[T] {
	q := &Queue[T]{max: max, delay: delay, write: write, now: make(chan struct{}, 1)}
	q.idle = sync.NewCond(&q.mu)
	return q
}

// Add queues items for writing, or writes them itself when they would
// take the queue past its bound.
func (q *Queue[T]) Add(items ...T) {
	q.mu.Lock()
	if len(q.queue)+len(items) > q.max {
		q.mu.Unlock()
		q.write(items)
		return
	}
	q.queue = append(q.queue, items...)
	start := !q.busy
	q.busy = true
	q.mu.Unlock()
	if start {
		go q.drain()
	}
}

// drain writes batches until the queue is empty, each after waiting the
// delay for more items unless a flush is waiting.
func (q *Queue[T]) drain() {
	var t *time.Timer
	if q.delay > 0 {
		t = time.NewTimer(q.delay)
		defer t.Stop()
	}
	for {
		if t != nil {
			q.mu.Lock()
			wait := q.flushing == 0
			q.mu.Unlock()
			if wait {
				select {
				case <-t.C:
				case <-q.now:
				}
			}
		}
		q.mu.Lock()
		batch := q.queue
		q.queue = nil
		q.mu.Unlock()
		if len(batch) > 0 {
			q.write(batch)
		}
		q.mu.Lock()
		if len(q.queue) == 0 {
			q.busy = false
			q.idle.Broadcast()
			q.mu.Unlock()
			return
		}
		q.mu.Unlock()
		if t != nil {
			t.Reset(q.delay)
		}
	}
}

// Flush returns once every item queued before it is written.
func (q *Queue[T]) Flush() {
	q.mu.Lock()
	q.flushing++
	if q.busy {
		select {
		case q.now <- struct{}{}:
		default:
		}
	}
	for q.busy {
		q.idle.Wait()
	}
	q.flushing--
	q.mu.Unlock()
}
