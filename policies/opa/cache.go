package opa

import (
	"sync"
)

// cacheKey identifies a decision: the same input under the same policy and
// data always decides the same way. The input is hashed (SHA-256 of its
// JSON encoding) so entries stay small and collisions are not a concern.
type cacheKey struct {
	policy, data uint64
	input        [32]byte
}

// cache is a bounded cache of decisions (or grant checks, V) with
// first-in first-out eviction:
// decisions repeat within short bursts (one client paging a list, an agent
// polling), which FIFO serves as well as LRU without touching the order on
// every hit. All methods accept a nil cache (caching off).
type cache[V any] struct {
	mu    sync.Mutex
	max   int
	hint  int // the map's initial size, again after clear
	items map[cacheKey]V
	ring  []cacheKey // insertion order; next is the slot to overwrite
	next  int
}

// newCache holds at most max entries; its map starts with room for hint
// (max for a cache filled on every request, 0 for one that is filled
// rarely and cleared often, so that clearing allocates nothing large).
func newCache[V any](max, hint int) *cache[V] {
	return &cache[V]{max: max, hint: hint, items: make(map[cacheKey]V, hint)}
}

func (c *cache[V]) get(k cacheKey) (V, bool) {
	if c == nil {
		var zero V
		return zero, false
	}
	c.mu.Lock()
	d, ok := c.items[k]
	c.mu.Unlock()
	return d, ok
}

func (c *cache[V]) put(k cacheKey, d V) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.items[k]; ok {
		return
	}
	if len(c.ring) < c.max {
		c.ring = append(c.ring, k)
	} else {
		delete(c.items, c.ring[c.next])
		c.ring[c.next] = k
		c.next = (c.next + 1) % c.max
	}
	c.items[k] = d
}

// clear drops every entry. Revision changes already make old entries
// unreachable; clearing returns their memory at once.
func (c *cache[V]) clear() {
	if c == nil {
		return
	}
	c.mu.Lock()
	if len(c.items) > 0 {
		c.items = make(map[cacheKey]V, c.hint)
	}
	c.ring = c.ring[:0]
	c.next = 0
	c.mu.Unlock()
}

func (c *cache[V]) len() int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.items)
}
