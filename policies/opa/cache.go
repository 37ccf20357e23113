package opa

import (
	"sync"

	"github.com/provgate/provgate/policies"
)

// cacheKey identifies a decision: the same input under the same policy and
// data always decides the same way. The input is hashed (SHA-256 of its
// JSON encoding) so entries stay small and collisions are not a concern.
type cacheKey struct {
	policy, data uint64
	input        [32]byte
}

// cache is a bounded decision cache with first-in first-out eviction:
// decisions repeat within short bursts (one client paging a list, an agent
// polling), which FIFO serves as well as LRU without touching the order on
// every hit. All methods accept a nil cache (caching off).
type cache struct {
	mu    sync.Mutex
	max   int
	items map[cacheKey]policies.Decision
	ring  []cacheKey // insertion order; next is the slot to overwrite
	next  int
}

func newCache(max int) *cache {
	return &cache{max: max, items: make(map[cacheKey]policies.Decision, max)}
}

func (c *cache) get(k cacheKey) (policies.Decision, bool) {
	if c == nil {
		return policies.Decision{}, false
	}
	c.mu.Lock()
	d, ok := c.items[k]
	c.mu.Unlock()
	return d, ok
}

func (c *cache) put(k cacheKey, d policies.Decision) {
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
func (c *cache) clear() {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.items = make(map[cacheKey]policies.Decision, c.max)
	c.ring = c.ring[:0]
	c.next = 0
	c.mu.Unlock()
}

func (c *cache) len() int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.items)
}
