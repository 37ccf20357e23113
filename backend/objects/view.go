package objects

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"sync/atomic"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/provgate/provgate/backend"
)

// DefaultViewCacheSize is how many objects the read cache holds when
// Options.ViewCacheSize is 0.
const DefaultViewCacheSize = 4096

// RevReader reads one object's revision by native key; *store.Store
// satisfies it. A Store without it gets no read cache.
type RevReader interface {
	Rev(ctx context.Context, prefix, key string) (int64, error)
}

// WriteNotifier tells of every committed object write; *store.Store
// satisfies it. When SoleWriter is true every write to the database goes
// through it (SQLite), and the read cache drops entries as they are
// written instead of reading revisions.
type WriteNotifier interface {
	SoleWriter() bool
	OnCommittedWrite(fn func(prefix, key string))
}

// viewCache keeps the Views of recently read objects, bounded by count
// with least-recently-used eviction (docs/design.md §14.6). Where other
// processes may write (PostgreSQL), an entry is served only when the
// store's revision of the object, read for each request, still equals the
// entry's: revisions come from one counter and are never reused
// (backend/store nextRev), so a write made by any replica, a delete or a
// delete and create again, is never answered from the cache. Where this
// process is the only writer (SQLite), every committed write drops its
// entry, and a read that overlapped any write is not cached (gen), so no
// revision needs reading.
type viewCache struct {
	revs  RevReader
	local bool
	gen   atomic.Uint64 // committed writes seen (local)
	size  int           // the most entries items holds
	items *lru.Cache[viewKey, backend.View]
	// shaped holds lists' encodings of objects shaped by view options that
	// read nothing but the object (slim, params), by revision: an object
	// at one revision always shapes the same way.
	shaped *lru.Cache[shapedKey, []byte]
}

type viewKey struct{ prefix, key string }

type shapedKey struct {
	prefix, key string
	rev         int64
	shape       string
}

// pureShape is the signature of q's view options when they read nothing
// but the object itself, so that the shaped encoding can be kept by
// revision; "" when they read more (aggregate, decode) or there are none.
func pureShape(q backend.Query) string {
	if q.Aggregate || q.Decode || (len(q.Slim) == 0 && len(q.Params) == 0) {
		return ""
	}
	var sb strings.Builder
	for _, f := range q.Slim {
		sb.WriteString(strings.ToLower(f))
		sb.WriteByte(0)
	}
	sb.WriteByte(1)
	for _, p := range q.Params {
		sb.WriteString(p)
		sb.WriteByte(0)
	}
	return sb.String()
}

// newViewCache returns nil (no cache) when size is negative or st cannot
// read revisions.
func newViewCache(st Store, size int) *viewCache {
	revs, ok := st.(RevReader)
	if !ok || size < 0 {
		return nil
	}
	if size == 0 {
		size = DefaultViewCacheSize
	}
	items, err := lru.New[viewKey, backend.View](size)
	if err != nil {
		return nil
	}
	shaped, err := lru.New[shapedKey, []byte](size)
	if err != nil {
		return nil
	}
	c := &viewCache{revs: revs, size: size, items: items, shaped: shaped}
	if wn, ok := st.(WriteNotifier); ok && wn.SoleWriter() {
		c.local = true
		wn.OnCommittedWrite(func(prefix, key string) {
			c.gen.Add(1)
			c.items.Remove(viewKey{prefix, key})
		})
	}
	return c
}

// View reads one object as Get does and returns it encoded. Objects named
// by their native key are served from the read cache while they have not
// changed: on PostgreSQL their revision is read from the store every time
// (a lookup by primary key that returns one integer); on SQLite the store
// tells the cache of every write.
func (s *CRUD) View(ctx context.Context, prefix, key string) (backend.View, error) {
	k, err := backend.LookupKind(prefix)
	if err != nil {
		return backend.View{}, err
	}
	c := s.views
	if _, inTx := ctx.Value(eventsKey).(*pending); inTx {
		// A transaction may read what it has not committed yet.
		c = nil
	}
	var gen uint64
	_, _, indexed := splitIndexKey(key)
	switch {
	case c == nil:
	case c.local:
		// Taken before the read: a write committed while it runs makes
		// it too old to keep.
		gen = c.gen.Load()
		if v, ok := c.items.Get(viewKey{k.Prefix, key}); ok && !indexed {
			return v, nil
		}
	case !indexed && key != "":
		rev, err := c.revs.Rev(ctx, k.Prefix, key)
		if backend.IsCode(err, backend.ENOTFOUND) {
			return backend.View{}, backend.NotFound(backend.ReadOp, k.Prefix, key)
		}
		if err != nil {
			return backend.View{}, err
		}
		if v, ok := c.items.Get(viewKey{k.Prefix, key}); ok && v.Rev == rev {
			return v, nil
		}
	}
	m, rev, err := s.getTyped(ctx, k, key, backend.ReadOp)
	if err != nil {
		return backend.View{}, err
	}
	b, err := json.Marshal(m)
	if err != nil {
		return backend.View{}, backend.OpError(backend.EINTERNAL, backend.ReadOp, k.Prefix, key, "encode: "+err.Error())
	}
	v := backend.View{Model: m, Rev: rev, ETag: backend.ETag(rev, b), JSON: b}
	if c != nil && (!c.local || c.gen.Load() == gen) {
		c.items.Add(viewKey{k.Prefix, m.Key()}, v)
	}
	return v, nil
}

// ViewCacheLen reports how many objects the read cache holds.
func (s *CRUD) ViewCacheLen() int {
	if s.views == nil {
		return 0
	}
	return s.views.items.Len()
}

// ListJSON answers a list as List does, encoded as the JSON array a list
// reply carries (docs/design.md §14.6). Each row of the page comes with
// its revision, so an object the read cache holds at that revision is
// taken from the cache, encoded JSON and all when the query has no view
// options, without decoding the row; an object shaped by view options
// (slim, params, aggregate, decode) is shaped on a copy of the cached one.
// The cache entry is exactly as fresh as the row the page query returned:
// revisions are never reused. Rows not in the cache are decoded, and kept
// in the cache for the next read when the page is small against the cache.
func (s *CRUD) ListJSON(ctx context.Context, prefix string, q backend.Query) ([]byte, int, int, error) {
	k, err := backend.LookupKind(prefix)
	if err != nil {
		return nil, 0, 0, err
	}
	c := s.views
	if _, inTx := ctx.Value(eventsKey).(*pending); inTx {
		c = nil
	}
	var gen uint64
	if c != nil && c.local {
		gen = c.gen.Load()
	}
	recs, total, matched, err := s.st.List(ctx, prefix, q)
	if err != nil {
		return nil, 0, 0, err
	}
	keep := c != nil && len(recs) <= c.size/4
	shaped := len(q.Slim) > 0 || len(q.Params) > 0 || q.Aggregate || q.Decode
	pure := ""
	if c != nil {
		pure = pureShape(q)
	}
	var buf bytes.Buffer
	buf.WriteByte('[')
	for i, r := range recs {
		if i > 0 {
			buf.WriteByte(',')
		}
		if pure != "" {
			if out, ok := c.shaped.Peek(shapedKey{k.Prefix, r.Key, r.Rev, pure}); ok {
				buf.Write(out)
				continue
			}
		}
		var v backend.View
		hit := false
		if c != nil {
			v, hit = c.items.Peek(viewKey{k.Prefix, r.Key})
			hit = hit && v.Rev == r.Rev
		}
		if !hit {
			m, err := decodeRecord(k, r.Data)
			if err != nil {
				return nil, 0, 0, err
			}
			backend.Sanitize(m)
			b, err := json.Marshal(m)
			if err != nil {
				return nil, 0, 0, backend.OpError(backend.EINTERNAL, backend.ReadOp, k.Prefix, r.Key, "encode: "+err.Error())
			}
			v = backend.View{Model: m, Rev: r.Rev, ETag: backend.ETag(r.Rev, b), JSON: b}
			if keep && (!c.local || c.gen.Load() == gen) {
				c.items.Add(viewKey{k.Prefix, r.Key}, v)
			}
		}
		out := v.JSON
		if shaped {
			m := shallowCopy(v.Model)
			if err := s.Shape(ctx, m, q); err != nil {
				return nil, 0, 0, err
			}
			if out, err = json.Marshal(m); err != nil {
				return nil, 0, 0, backend.OpError(backend.EINTERNAL, backend.ReadOp, k.Prefix, r.Key, "encode: "+err.Error())
			}
			if pure != "" && keep {
				c.shaped.Add(shapedKey{k.Prefix, r.Key, r.Rev, pure}, out)
			}
		}
		buf.Write(out)
	}
	buf.WriteByte(']')
	return buf.Bytes(), total, matched, nil
}

// shallowCopy is a new object whose fields are m's: Shape replaces the
// maps it changes (Params, Meta) rather than writing into them, so the
// cached object m stays as it is.
func shallowCopy(m backend.Model) backend.Model {
	v := reflect.ValueOf(m).Elem()
	c := reflect.New(v.Type())
	c.Elem().Set(v)
	return c.Interface().(backend.Model)
}
