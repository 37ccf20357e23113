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

// RevLister lists a page's keys and revisions without the documents and
// reads the documents of some keys; *store.Store satisfies it. A read
// cache over a Store with it reads a list's documents only for the objects
// it lacks.
type RevLister interface {
	ListRevs(ctx context.Context, prefix string, q backend.Query) ([]backend.Record, int, int, error)
	GetMany(ctx context.Context, prefix string, keys []string) ([]backend.Record, error)
}

// VisibleCounter counts the objects among sorted visible keys;
// *store.Store satisfies it (CountVisible).
type VisibleCounter interface {
	CountVisible(ctx context.Context, prefix string, keys []string) (int, bool, error)
}

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
	// paramsGen counts committed writes of param definitions (local);
	// defaults holds their schema defaults as of one count.
	paramsGen atomic.Uint64
	defaults  atomic.Pointer[paramDefaults]
	// missing remembers objects read as absent (local), dropped as items
	// are when written: a machine's aggregated params read the global
	// profile, which often does not exist.
	missing *lru.Cache[viewKey, struct{}]
	// shaped holds lists' encodings of objects shaped by view options that
	// read nothing but the object (slim, params), by revision: an object
	// at one revision always shapes the same way.
	shaped *lru.Cache[shapedKey, []byte]
	// lister, when the store has it, lets a list read only the documents
	// the cache lacks.
	lister RevLister
	// counter, on SQLite, lets a restricted page held whole by the cache
	// be answered without reading the page from the store.
	counter VisibleCounter
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
	c.lister, _ = st.(RevLister)
	c.counter, _ = st.(VisibleCounter)
	if wn, ok := st.(WriteNotifier); ok && wn.SoleWriter() {
		c.local = true
		if c.missing, err = lru.New[viewKey, struct{}](1024); err != nil {
			return nil
		}
		wn.OnCommittedWrite(func(prefix, key string) {
			if prefix == "params" {
				c.paramsGen.Add(1)
			}
			c.gen.Add(1)
			c.items.Remove(viewKey{prefix, key})
			c.missing.Remove(viewKey{prefix, key})
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
	k, err := s.kinds.Lookup(prefix)
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
// reply carries (docs/design.md §14.6). Where the store can (RevLister),
// the page query returns keys and revisions only, and documents are read
// for the objects the read cache does not hold at those revisions; an
// object the cache holds is written from its encoded JSON when the query
// has no view options, and from its kept shaped encoding for options that
// read nothing but the object (slim, params); other options (aggregate,
// decode) shape a copy of the cached object. Every entry is exactly as
// fresh as the revision the page query returned: revisions are never
// reused. An object changed between the page query and its document's
// read makes the page read again with documents. Decoded objects are kept
// in the cache for the next read when the page is small against the cache.
func (s *CRUD) ListJSON(ctx context.Context, prefix string, q backend.Query) ([]byte, int, int, error) {
	k, err := s.kinds.Lookup(prefix)
	if err != nil {
		return nil, 0, 0, err
	}
	c := s.views
	if _, inTx := ctx.Value(eventsKey).(*pending); inTx {
		c = nil
	}
	pure := ""
	if c != nil {
		pure = pureShape(q)
	}
	if c != nil && c.local && c.counter != nil && q.KeyPaged(k) {
		if body, total, ok, err := s.listFromCache(ctx, c, k, q, pure); err != nil || ok {
			return body, total, total, err
		}
	}
	if c != nil && c.lister != nil {
		// The page's keys and revisions first; documents only for the
		// objects the cache lacks at that revision.
		gen := c.writes()
		recs, total, matched, err := c.lister.ListRevs(ctx, prefix, q)
		if err != nil {
			return nil, 0, 0, err
		}
		if ok, err := s.fillMisses(ctx, c, k, recs, pure); err != nil {
			return nil, 0, 0, err
		} else if ok {
			if body, ok, err := s.encodeList(ctx, c, gen, k, q, pure, recs); err != nil || ok {
				return body, total, matched, err
			}
		}
		// An object changed between the two reads, or left the cache
		// meanwhile: the page is read again, documents and all.
	}
	gen := c.writes()
	recs, total, matched, err := s.st.List(ctx, prefix, q)
	if err != nil {
		return nil, 0, 0, err
	}
	body, _, err := s.encodeList(ctx, c, gen, k, q, pure, recs)
	return body, total, matched, err
}

// listFromCache answers a restricted page (Query.KeyPaged) from the read cache
// where this process is the only writer: each cached object is current
// there (every committed write drops its entry before the write returns),
// so when the cache holds every one of the first offset+limit visible
// keys, those are the page, and only the total is asked of the store. It
// reports false when a key is not in the cache (not read yet, or not an
// object) or the keys are not sorted.
func (s *CRUD) listFromCache(ctx context.Context, c *viewCache, k *backend.Kind, q backend.Query, pure string) ([]byte, int, bool, error) {
	need := q.Offset + q.Limit
	keys := q.Visible
	if need > len(keys) || need > c.size/4 {
		return nil, 0, false, nil
	}
	recs := make([]backend.Record, 0, q.Limit)
	for i := range need {
		key := keys[i]
		if q.Reverse {
			key = keys[len(keys)-1-i]
		}
		v, ok := c.items.Peek(viewKey{k.Prefix, key})
		if !ok {
			return nil, 0, false, nil
		}
		if i >= q.Offset {
			recs = append(recs, backend.Record{Key: key, Rev: v.Rev})
		}
	}
	total, sorted, err := c.counter.CountVisible(ctx, k.Prefix, keys)
	if err != nil || !sorted {
		return nil, 0, false, err
	}
	body, ok, err := s.encodeList(ctx, c, c.writes(), k, q, pure, recs)
	return body, total, ok, err
}

// hit reports whether c holds r's object at r's revision, shaped by pure
// when pure is set.
func (c *viewCache) hit(k *backend.Kind, r backend.Record, pure string) bool {
	if pure != "" && c.shaped.Contains(shapedKey{k.Prefix, r.Key, r.Rev, pure}) {
		return true
	}
	v, ok := c.items.Peek(viewKey{k.Prefix, r.Key})
	return ok && v.Rev == r.Rev
}

// fillMisses reads the documents of the records the cache lacks, and
// reports false when one of them is no longer at its listed revision.
func (s *CRUD) fillMisses(ctx context.Context, c *viewCache, k *backend.Kind, recs []backend.Record, pure string) (bool, error) {
	miss := map[string]int{}
	var keys []string
	for i, r := range recs {
		if !c.hit(k, r, pure) {
			miss[r.Key] = i
			keys = append(keys, r.Key)
		}
	}
	if len(keys) == 0 {
		return true, nil
	}
	got, err := c.lister.GetMany(ctx, k.Prefix, keys)
	if err != nil {
		return false, err
	}
	for _, g := range got {
		if i, ok := miss[g.Key]; ok && recs[i].Rev == g.Rev {
			recs[i].Data = g.Data
			delete(miss, g.Key)
		}
	}
	return len(miss) == 0, nil
}

// writes is the count of committed writes (SQLite), taken before a read
// whose objects the cache may keep: a write committed since makes them too
// old to keep, since View serves them without reading revisions there.
func (c *viewCache) writes() uint64 {
	if c == nil || !c.local {
		return 0
	}
	return c.gen.Load()
}

// encodeList writes recs as a list reply's JSON array, each object from
// the cache at its revision or decoded from its document; false when an
// object has neither (it left the cache after fillMisses). gen is writes()
// from before recs were read.
func (s *CRUD) encodeList(ctx context.Context, c *viewCache, gen uint64, k *backend.Kind, q backend.Query, pure string, recs []backend.Record) ([]byte, bool, error) {
	keep := c != nil && len(recs) <= c.size/4
	shaped := len(q.Slim) > 0 || len(q.Params) > 0 || q.Aggregate || q.Decode
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
			if r.Data == nil {
				return nil, false, nil
			}
			m, err := decodeRecord(k, r.Data)
			if err != nil {
				return nil, false, err
			}
			backend.Sanitize(m)
			b, err := json.Marshal(m)
			if err != nil {
				return nil, false, backend.OpError(backend.EINTERNAL, backend.ReadOp, k.Prefix, r.Key, "encode: "+err.Error())
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
				return nil, false, err
			}
			var err error
			if out, err = json.Marshal(m); err != nil {
				return nil, false, backend.OpError(backend.EINTERNAL, backend.ReadOp, k.Prefix, r.Key, "encode: "+err.Error())
			}
			if pure != "" && keep {
				c.shaped.Add(shapedKey{k.Prefix, r.Key, r.Rev, pure}, out)
			}
		}
		buf.Write(out)
	}
	buf.WriteByte(']')
	return buf.Bytes(), true, nil
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

// paramDefaults are the schema defaults of every param definition, as
// aggregate merges them last, computed at a count of committed params
// writes (viewCache.paramsGen).
type paramDefaults struct {
	gen      uint64
	defaults map[string]any
}

// loadShared reads prefix/key for reading only, through the read cache
// (nil when it does not exist, as load). The model may be shared with the
// cache and other readers: it must not be modified.
func (s *core) loadShared(ctx context.Context, prefix, key string) (backend.Model, error) {
	c := s.views
	if c == nil || key == "" {
		return s.load(ctx, prefix, key)
	}
	_, inTx := ctx.Value(eventsKey).(*pending)
	remember := c.local && !inTx
	var gen uint64
	if remember {
		gen = c.gen.Load()
		if c.missing.Contains(viewKey{prefix, key}) {
			return nil, nil
		}
	}
	v, err := (&CRUD{core: s}).View(ctx, prefix, key)
	if backend.IsCode(err, backend.ENOTFOUND) {
		if remember && c.gen.Load() == gen {
			c.missing.Add(viewKey{prefix, key}, struct{}{})
		}
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return v.Model, nil
}

// schemaDefaults returns the default of every param definition whose
// Schema has one, by param name. Where this process is the only writer
// (SQLite) the answer is kept until a params definition is written, so a
// machine's aggregated params do not decode every definition each time;
// elsewhere (or inside a transaction) the definitions are read. The map is
// shared: callers only read it.
func (s *core) schemaDefaults(ctx context.Context) (map[string]any, error) {
	c := s.views
	_, inTx := ctx.Value(eventsKey).(*pending)
	cached := c != nil && c.local && !inTx
	var gen uint64
	if cached {
		gen = c.paramsGen.Load()
		if d := c.defaults.Load(); d != nil && d.gen == gen {
			return d.defaults, nil
		}
	}
	defs, err := s.listAll(ctx, "params", backend.Query{})
	if err != nil {
		return nil, err
	}
	out := map[string]any{}
	for _, d := range defs {
		p := d.(*backend.Param)
		if sch, ok := p.Schema.(map[string]any); ok {
			if dv, ok := sch["default"]; ok {
				out[p.Name] = dv
			}
		}
	}
	if cached && c.paramsGen.Load() == gen {
		c.defaults.Store(&paramDefaults{gen: gen, defaults: out})
	}
	return out, nil
}
