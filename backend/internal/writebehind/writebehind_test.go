package writebehind

import (
	"slices"
	"sync"
	"testing"
	"time"
)

func TestQueueWritesEveryItemInOrder(t *testing.T) {
	for _, delay := range []time.Duration{0, 5 * time.Millisecond} {
		var mu sync.Mutex
		var got []int
		q := New(3, delay, func(b []int) {
			mu.Lock()
			got = append(got, b...)
			mu.Unlock()
		})
		q.Add(1, 2)
		q.Add(3)
		q.Flush()
		q.Add(4)
		q.Flush()
		q.Flush() // nothing queued: returns at once
		mu.Lock()
		if !slices.Equal(got, []int{1, 2, 3, 4}) {
			t.Errorf("delay %v: written %v, want [1 2 3 4]", delay, got)
		}
		mu.Unlock()
	}
}

func TestQueuePastItsBoundWritesInline(t *testing.T) {
	var batches [][]int
	q := New(2, time.Hour, func(b []int) { batches = append(batches, b) })
	q.Add(1, 2, 3) // more than the bound: written by the caller
	if len(batches) != 1 || !slices.Equal(batches[0], []int{1, 2, 3}) {
		t.Fatalf("batches %v, want [[1 2 3]] written inline", batches)
	}
	q.Add(4)
	q.Flush() // ends the hour's wait at once
	if len(batches) != 2 || !slices.Equal(batches[1], []int{4}) {
		t.Fatalf("batches %v, want [4] after the flush", batches)
	}
}
