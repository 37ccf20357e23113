package backend

import (
	"sync"
	"sync/atomic"
)

// Counts counts events by a label out of a small, fixed set (outcomes,
// reasons), for the metrics the gateway exports (docs/design.md §15.4). It
// is safe for concurrent use; the zero value is ready.
type Counts struct {
	m sync.Map // label → *atomic.Uint64
}

// Add counts one event labelled label.
func (c *Counts) Add(label string) {
	v, ok := c.m.Load(label)
	if !ok {
		v, _ = c.m.LoadOrStore(label, new(atomic.Uint64))
	}
	v.(*atomic.Uint64).Add(1)
}

// Snapshot returns every label's count so far.
func (c *Counts) Snapshot() map[string]uint64 {
	out := map[string]uint64{}
	c.m.Range(func(k, v any) bool {
		out[k.(string)] = v.(*atomic.Uint64).Load()
		return true
	})
	return out
}
