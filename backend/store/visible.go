package store

import (
	"context"
	"errors"
	"hash/maphash"
	"slices"
	"sync"

	"github.com/provgate/provgate/backend"
)

// A restricted list (q.Visible, a tenant's keys) costs what the page needs,
// not what the tenant holds (docs/design.md §14.6):
//
//   - the page of an unfiltered list in key order is read from the first
//     visible keys only, a few more than offset+limit at a time, since the
//     page holds the first existing keys of the sorted visible set;
//   - the total (how many visible keys exist) is kept per visible set. On
//     SQLite every write goes through this process: an entry is dropped
//     when any of its keys is written, and a count that overlapped a write
//     is not kept. On PostgreSQL other replicas write too: every create and
//     delete moves the existence generation (the sum of obj_exist's
//     existStripes rows; each transaction adds one to one row, just before
//     it commits, so the sum grows with every commit and concurrent
//     creates seldom wait on the same row), and an entry is served only
//     while the generation, read in one statement for each list, is the
//     one read before its count.
//     Jobs, created at the pace of tasks rather than of the fleet, move no
//     generation (that row would order their creates) and are counted
//     every time.

// existStripes is how many rows the existence generation is spread over.
const existStripes = 16

// tracksExistence says whether creates and deletes of prefix move the
// existence generation on PostgreSQL.
func tracksExistence(prefix string) bool { return prefix != "jobs" }

// visibleChunkMin is the fewest visible keys one page query names.
const visibleChunkMin = 16

// visibleCountMax bounds how many visible sets keep their count.
const visibleCountMax = 64

// visibleCounts holds the totals of recently listed visible sets.
type visibleCounts struct {
	mu    sync.Mutex
	gen   uint64 // committed writes seen (SQLite)
	seed  maphash.Seed
	items map[visibleSet]*visibleCount
	order []visibleSet // insertion order, for eviction
}

type visibleSet struct {
	prefix string
	hash   uint64
}

type visibleCount struct {
	keys []string // sorted; compared in full on a hit
	n    int
	// exist is the existence generation the count was taken at
	// (PostgreSQL; 0 on SQLite).
	exist int64
}

func newVisibleCounts() *visibleCounts {
	return &visibleCounts{seed: maphash.MakeSeed(), items: map[visibleSet]*visibleCount{}}
}

// id names the set of keys, which it also checks, in the same pass, to
// ascend without repeats in the order of "key" in both dialects (bytewise:
// SQLite's BINARY, PostgreSQL's "C"): false when they do not.
func (c *visibleCounts) id(prefix string, keys []string) (visibleSet, bool) {
	var h maphash.Hash
	h.SetSeed(c.seed)
	for i, k := range keys {
		if i > 0 && keys[i-1] >= k {
			return visibleSet{}, false
		}
		_, _ = h.WriteString(k)
		_ = h.WriteByte(0)
	}
	return visibleSet{prefix: prefix, hash: h.Sum64()}, true
}

// get is the kept count of keys at existence generation exist, and the
// write generation to keep a new count under when there is none.
func (c *visibleCounts) get(id visibleSet, keys []string, exist int64) (n int, ok bool, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.items[id]; e != nil && e.exist == exist && slices.Equal(e.keys, keys) {
		return e.n, true, c.gen
	}
	return 0, false, c.gen
}

// put keeps n for keys, counted at existence generation exist, unless a
// write committed since gen.
func (c *visibleCounts) put(id visibleSet, keys []string, n int, gen uint64, exist int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen {
		return
	}
	if _, ok := c.items[id]; !ok {
		if len(c.order) >= visibleCountMax {
			delete(c.items, c.order[0])
			c.order = append(c.order[:0], c.order[1:]...)
		}
		c.order = append(c.order, id)
	}
	c.items[id] = &visibleCount{keys: slices.Clone(keys), n: n, exist: exist}
}

// wrote drops the counts of the sets holding key (a committed write).
func (c *visibleCounts) wrote(prefix, key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	for id, e := range c.items {
		if id.prefix != prefix {
			continue
		}
		if _, found := slices.BinarySearch(e.keys, key); found {
			delete(c.items, id)
			c.order = slices.DeleteFunc(c.order, func(o visibleSet) bool { return o == id })
		}
	}
}

// visiblePage reads the page of q (see Query.KeyPaged): the first
// offset+limit existing objects among the sorted visible keys, taken a
// chunk of keys at a time.
func (s *Store) visiblePage(ctx context.Context, k *backend.Kind, prefix string, q backend.Query, data bool) ([]Record, error) {
	need := q.Offset + q.Limit
	keys := q.Visible
	dir := " ASC"
	if q.Reverse {
		dir = " DESC"
	}
	b := s.newBuilder(k)
	var recs []Record
	step := max(need+need/4, visibleChunkMin)
	for len(keys) > 0 && len(recs) < need {
		n := min(step, len(keys))
		var chunk []string
		if q.Reverse {
			chunk, keys = keys[len(keys)-n:], keys[:len(keys)-n]
		} else {
			chunk, keys = keys[:n], keys[n:]
		}
		vis, err := b.visible(chunk)
		if err != nil {
			return nil, err
		}
		w := whereClause(vis)
		got, err := s.scanRows(s.conn(ctx).Raw(`SELECT `+columns(data)+` FROM `+tableName(prefix)+w.sql+` ORDER BY "key"`+dir+` LIMIT ?`,
			append(w.args, need-len(recs))...), prefix, data)
		if err != nil {
			return nil, err
		}
		recs = append(recs, got...)
		step *= 2
	}
	if len(recs) <= q.Offset {
		return nil, nil
	}
	return recs[q.Offset:], nil
}

// visibleTotal counts the existing objects among the sorted keys, kept per
// set (see visibleCounts).
func (s *Store) visibleTotal(ctx context.Context, b *builder, id visibleSet, keys []string) (int, error) {
	prefix := id.prefix
	count := func() (int, error) {
		vis, err := b.visible(keys)
		if err != nil {
			return 0, err
		}
		return s.count(ctx, prefix, vis)
	}
	c := s.counts
	if s.txFrom(ctx) != nil {
		// A transaction may count what it has not committed yet.
		return count()
	}
	var exist int64
	if s.pg() {
		if !tracksExistence(prefix) {
			return count()
		}
		// Read before the count: a create or delete committed after it
		// moves the generation past the entry's.
		found, err := s.scanRev(s.conn(ctx), `SELECT COALESCE(SUM(gen), 0) FROM obj_exist`, nil, &exist)
		if err == nil && !found {
			err = errors.New("existence generation is missing")
		}
		if err != nil {
			return 0, s.dbErr(backend.ReadOp, prefix, "", err)
		}
	}
	n, ok, gen := c.get(id, keys, exist)
	if ok {
		return n, nil
	}
	n, err := count()
	if err != nil {
		return 0, err
	}
	c.put(id, keys, n, gen, exist)
	return n, nil
}

// CountVisible counts the objects of prefix among keys, kept per set as a
// restricted list's total is; sorted is false, and nothing counted, when
// keys do not ascend without repeats. A read cache that holds a restricted
// page's objects asks only this of the store (docs/design.md §14.6).
func (s *Store) CountVisible(ctx context.Context, prefix string, keys []string) (n int, sorted bool, err error) {
	k, err := s.kind(prefix)
	if err != nil {
		return 0, false, err
	}
	id, sorted := s.counts.id(prefix, keys)
	if !sorted {
		return 0, false, nil
	}
	n, err = s.visibleTotal(ctx, s.newBuilder(k), id, keys)
	return n, true, err
}
