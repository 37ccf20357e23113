package objects

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/provgate/provgate/backend"
)

// CreateMany creates every item as Create would, all in one transaction:
// one refused item (invalid, a duplicate, a name taken by an earlier item)
// refuses the whole request and leaves nothing written. The error names
// the item by its position (from 0) and its key. Only importable kinds
// (backend.Importable) are accepted (docs/design.md §4.9).
func (s *CRUD) CreateMany(ctx context.Context, prefix string, items []json.RawMessage) ([]backend.Model, error) {
	if !backend.Importable(prefix) {
		return nil, backend.OpError(backend.EBADREQUEST, backend.ActionOp, prefix, "", prefix+" cannot be imported")
	}
	out := make([]backend.Model, 0, len(items))
	err := s.inTx(ctx, func(ctx context.Context) error {
		for i, item := range items {
			m, err := s.Create(ctx, prefix, item)
			if err != nil {
				return itemError(err, i)
			}
			out = append(out, m)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// itemError prefixes err's messages with the item's position.
func itemError(err error, i int) error {
	be := *backend.AsError(err)
	msgs := make([]string, len(be.Messages))
	for j, m := range be.Messages {
		msgs[j] = fmt.Sprintf("item %d: %s", i, m)
	}
	be.Messages = msgs
	return &be
}
