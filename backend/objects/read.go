package objects

import (
	"context"
	"runtime"
	"strings"
	"sync"

	"github.com/provgate/provgate/backend"
)

// Get returns prefix/key, addressed by its native key or "<Index>:<value>"
// for a unique index (Name:m1, Uuid:..., Key:...), sanitized, with its
// revision. Secure params are the stored envelopes. A missing object is
// not found ("Not Found", ReadOp).
func (s *CRUD) Get(ctx context.Context, prefix, key string) (backend.Model, int64, error) {
	k, err := s.kinds.Lookup(prefix)
	if err != nil {
		return nil, 0, err
	}
	return s.getTyped(ctx, k, key, backend.ReadOp)
}

func (s *core) getTyped(ctx context.Context, k *backend.Kind, key string, op backend.Operation) (backend.Model, int64, error) {
	rec, m, err := s.read(ctx, k, key, op)
	if err != nil {
		return nil, 0, err
	}
	backend.Sanitize(m)
	return m, rec.Rev, nil
}

// List returns the page of prefix objects matching q (filters, sort and
// paging run in the store) with the kind's total and matched counts, each
// object sanitized and shaped by q (see Shape).
func (s *CRUD) List(ctx context.Context, prefix string, q backend.Query) ([]backend.Model, int, int, error) {
	k, err := s.kinds.Lookup(prefix)
	if err != nil {
		return nil, 0, 0, err
	}
	recs, total, matched, err := s.st.List(ctx, prefix, q)
	if err != nil {
		return nil, 0, 0, err
	}
	out, err := decodeRecords(k, recs)
	if err != nil {
		return nil, 0, 0, err
	}
	for _, m := range out {
		if err := s.Shape(ctx, m, q); err != nil {
			return nil, 0, 0, err
		}
	}
	return out, total, matched, nil
}

// decodeRecords decodes and sanitizes records, a long list on every CPU
// (decoding is most of listing thousands of objects; each record is
// decoded on its own, so the order and the result are those of one loop).
func decodeRecords(k *backend.Kind, recs []backend.Record) ([]backend.Model, error) {
	out := make([]backend.Model, len(recs))
	decode := func(lo, hi int) error {
		for i := lo; i < hi; i++ {
			m, err := decodeRecord(k, recs[i].Data)
			if err != nil {
				return err
			}
			out[i] = backend.Sanitize(m)
		}
		return nil
	}
	const chunk = 512
	workers := min(runtime.GOMAXPROCS(0), (len(recs)+chunk-1)/chunk)
	if workers <= 1 {
		return out, decode(0, len(recs))
	}
	errs := make([]error, workers)
	var wg sync.WaitGroup
	per := (len(recs) + workers - 1) / workers
	for w := range workers {
		lo, hi := w*per, min((w+1)*per, len(recs))
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[w] = decode(lo, hi)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Shape applies the view options of q to one object, as DRP does for show
// and list: aggregate (effective params), decode (clear secure values; the
// caller has checked getSecure), params (keep only those names) and slim
// (empty Params and/or Meta). Partial is set when Params were cut.
func (s *CRUD) Shape(ctx context.Context, m backend.Model, q backend.Query) error {
	pp := paramsOf(m)
	partial := false
	if pp != nil && (q.Aggregate || q.Decode) {
		v, err := s.params.paramsView(ctx, m, q.Aggregate, q.Decode)
		if err != nil {
			return err
		}
		*pp = v
	}
	if pp != nil && len(q.Params) > 0 {
		keep := map[string]any{}
		for _, n := range q.Params {
			if v, ok := (*pp)[n]; ok {
				keep[n] = v
			}
		}
		*pp = keep
		partial = true
	}
	for _, f := range q.Slim {
		switch strings.ToLower(f) {
		case "params":
			if pp != nil {
				*pp = map[string]any{}
				partial = true
			}
		case "meta":
			m.Env().Meta = map[string]string{}
			partial = true
		}
	}
	if partial {
		setPartial(m)
	}
	return nil
}

func setPartial(m backend.Model) {
	switch v := m.(type) {
	case *backend.Machine:
		v.Partial = true
	case *backend.Profile:
		v.Partial = true
	case *backend.Stage:
		v.Partial = true
	case *backend.Plugin:
		v.Partial = true
	}
}
