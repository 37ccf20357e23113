package objects

import (
	"context"
	"strings"

	"github.com/provgate/provgate/backend"
)

// splitIndexKey recognises "<Index>:<value>" keys (docs/design.md §3.4). Only a
// prefix that looks like an index name (a capitalised identifier) counts, so
// IPv6 reservation addresses and the like stay native keys.
func splitIndexKey(key string) (index, value string, ok bool) {
	i := strings.IndexByte(key, ':')
	if i <= 0 {
		return "", "", false
	}
	index = key[:i]
	if index[0] < 'A' || index[0] > 'Z' {
		return "", "", false
	}
	for _, r := range index {
		if !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9') {
			return "", "", false
		}
	}
	return index, key[i+1:], true
}

// read loads the record addressed by key (native or "<Index>:<value>") and
// decodes it. op is the operation failures report.
func (s *core) read(ctx context.Context, k *backend.Kind, key string, op backend.Operation) (backend.Record, backend.Model, error) {
	rec, err := s.readRecord(ctx, k, key, op)
	if err != nil {
		return rec, nil, err
	}
	m, err := decodeRecord(k, rec.Data)
	if err != nil {
		return rec, nil, err
	}
	return rec, m, nil
}

func (s *core) readRecord(ctx context.Context, k *backend.Kind, key string, op backend.Operation) (backend.Record, error) {
	var (
		rec backend.Record
		err error
	)
	if index, value, ok := splitIndexKey(key); ok {
		idx, known := k.Indexes[index]
		switch {
		case !known:
			return rec, backend.OpError(backend.ENOTFOUND, op, k.Prefix, key,
				"Not Found: "+k.Prefix+" has no index "+index)
		case !idx.Unique:
			return rec, backend.OpError(backend.EBADREQUEST, op, k.Prefix, key,
				"Index "+index+" of "+k.Prefix+" is not unique and cannot address an object")
		case idx.Field == k.KeyField:
			rec, err = s.st.Get(ctx, k.Prefix, value)
		default:
			rec, err = s.st.GetBy(ctx, k.Prefix, index, value)
		}
	} else {
		if key == "" {
			return rec, backend.NotFound(op, k.Prefix, key)
		}
		rec, err = s.st.Get(ctx, k.Prefix, key)
	}
	if err != nil {
		if backend.IsCode(err, backend.ENOTFOUND) {
			return rec, backend.NotFound(op, k.Prefix, key)
		}
		return rec, err
	}
	return rec, nil
}

// exists reports whether prefix/key is stored.
func (s *core) exists(ctx context.Context, prefix, key string) (bool, error) {
	if key == "" {
		return false, nil
	}
	_, err := s.st.Get(ctx, prefix, key)
	switch {
	case err == nil:
		return true, nil
	case backend.IsCode(err, backend.ENOTFOUND):
		return false, nil
	}
	return false, err
}

// load decodes prefix/key, or returns nil when it is absent.
func (s *core) load(ctx context.Context, prefix, key string) (backend.Model, error) {
	_, m, err := s.stored(ctx, prefix, key)
	return m, err
}

// stored reads and decodes prefix/key by its native key, with the record
// (its revision, to write it back); the model is nil when it is absent.
func (s *core) stored(ctx context.Context, prefix, key string) (backend.Record, backend.Model, error) {
	if key == "" {
		return backend.Record{}, nil, nil
	}
	rec, err := s.st.Get(ctx, prefix, key)
	if err != nil {
		if backend.IsCode(err, backend.ENOTFOUND) {
			return rec, nil, nil
		}
		return rec, nil, err
	}
	m, err := decodeRecord(s.kinds.Kind(prefix), rec.Data)
	return rec, m, err
}

// listAll decodes every object of prefix matching q's filters.
func (s *core) listAll(ctx context.Context, prefix string, q backend.Query) ([]backend.Model, error) {
	q.Limit = -1
	recs, _, _, err := s.st.List(ctx, prefix, q)
	if err != nil {
		return nil, err
	}
	k := s.kinds.Kind(prefix)
	out := make([]backend.Model, 0, len(recs))
	for _, r := range recs {
		m, err := decodeRecord(k, r.Data)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// eq builds a one-filter query: field Eq value (contains, for list indexes).
func (s *core) eq(prefix, index, value string) backend.Query {
	k := s.kinds.Kind(prefix)
	return backend.Query{Limit: -1, Filters: []backend.Filter{{
		Name: index, Target: backend.TargetIndex, Index: k.Indexes[index], Op: backend.OpEq, Values: []string{value},
	}}}
}
