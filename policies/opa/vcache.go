package opa

import (
	"sync"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/topdown"
)

// flatCache is OPA's virtual document cache (topdown.VirtualCache) as one
// hash table per frame instead of a trie of them: a rule or function
// result is one entry, where the trie allocates a node and a map per
// segment of its reference. Entries are keyed and compared exactly as the
// trie keys them (term hashes, Term.Equal), so evaluation sees the same
// answers. A cache is reused from a pool: its frames keep their capacity.
type flatCache struct {
	frames []vcFrame
	top    int
}

type vcFrame struct {
	index   map[int]int32 // ref hash → first entry
	entries []vcEntry
}

type vcEntry struct {
	ref       ast.Ref
	value     *ast.Term
	undefined bool
	next      int32 // next entry of the same hash, -1 at the end
}

var flatCaches = sync.Pool{New: func() any { return &flatCache{} }}

// getFlatCache returns an empty cache; putFlatCache hands it back after
// the evaluation (nothing it holds may be used afterwards).
func getFlatCache() *flatCache {
	c := flatCaches.Get().(*flatCache)
	c.top = -1
	c.Push()
	return c
}

func putFlatCache(c *flatCache) {
	for c.top >= 0 {
		c.Pop()
	}
	flatCaches.Put(c)
}

var _ topdown.VirtualCache = (*flatCache)(nil)

func (c *flatCache) Push() {
	c.top++
	if c.top == len(c.frames) {
		c.frames = append(c.frames, vcFrame{index: map[int]int32{}})
	}
}

func (c *flatCache) Pop() {
	f := &c.frames[c.top]
	clear(f.index)
	clear(f.entries)
	f.entries = f.entries[:0]
	c.top--
}

func (c *flatCache) find(ref ast.Ref) (*vcEntry, int) {
	f := &c.frames[c.top]
	h := ref.Hash()
	i, ok := f.index[h]
	if !ok {
		return nil, h
	}
	for i >= 0 {
		e := &f.entries[i]
		if e.ref.Equal(ref) {
			return e, h
		}
		i = e.next
	}
	return nil, h
}

func (c *flatCache) Get(ref ast.Ref) (*ast.Term, bool) {
	e, _ := c.find(ref)
	if e == nil {
		return nil, false
	}
	if e.undefined {
		return nil, true
	}
	return e.value, false
}

func (c *flatCache) Put(ref ast.Ref, value *ast.Term) {
	e, h := c.find(ref)
	if e == nil {
		f := &c.frames[c.top]
		next, ok := f.index[h]
		if !ok {
			next = -1
		}
		// The caller may reuse ref's backing array (a function's cache key).
		f.entries = append(f.entries, vcEntry{ref: append(ast.Ref(nil), ref...), next: next})
		f.index[h] = int32(len(f.entries) - 1)
		e = &f.entries[len(f.entries)-1]
	}
	if value != nil {
		e.value, e.undefined = value, false
	} else {
		e.undefined = true
	}
}

func (c *flatCache) Keys() []ast.Ref {
	var out []ast.Ref
	for _, e := range c.frames[c.top].entries {
		if e.value != nil {
			out = append(out, e.ref)
		}
	}
	return out
}
