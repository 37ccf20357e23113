package objects

import (
	"context"
	"strings"

	"github.com/provgate/provgate/backend"
)

// Get returns prefix/key, addressed by its native key or "<Index>:<value>"
// for a unique index (Name:m1, Uuid:..., Key:...), sanitized, with its
// revision. Secure params are the stored envelopes. A missing object is
// not found ("Not Found", ReadOp).
func (s *CRUD) Get(ctx context.Context, prefix, key string) (backend.Model, int64, error) {
	k, err := backend.LookupKind(prefix)
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
	k, err := backend.LookupKind(prefix)
	if err != nil {
		return nil, 0, 0, err
	}
	recs, total, matched, err := s.st.List(ctx, prefix, q)
	if err != nil {
		return nil, 0, 0, err
	}
	out := make([]backend.Model, 0, len(recs))
	for _, r := range recs {
		m, err := decodeRecord(k, r.Data)
		if err != nil {
			return nil, 0, 0, err
		}
		backend.Sanitize(m)
		if err := s.Shape(ctx, m, q); err != nil {
			return nil, 0, 0, err
		}
		out = append(out, m)
	}
	return out, total, matched, nil
}

// Shape applies the view options of q to one object, as DRP does for show
// and list: aggregate (effective params), decode (clear secure values; the
// caller has checked getSecure), params (keep only those names) and slim
// (empty Params and/or Meta). Partial is set when Params were cut.
func (s *CRUD) Shape(ctx context.Context, m backend.Model, q backend.Query) error {
	pp := paramsOf(m)
	partial := false
	if pp != nil && (q.Aggregate || q.Decode) {
		v, err := s.paramsView(ctx, m, q.Aggregate, q.Decode)
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
