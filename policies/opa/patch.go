package opa

import (
	"context"
	"encoding/json"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/open-policy-agent/opa/v1/util"

	"github.com/provgate/provgate/policies"
)

// PatchData applies patches to data.provgate in one store transaction: a
// write to one role or tenant changes only its part of the data, at a cost
// that does not grow with the number of roles and tenants (docs/design.md
// §14.4). Removing an absent path is not an error. As with SetData, the
// next Decide sees the new data and no decision cached from older data is
// served again. On error nothing is changed.
func (e *Engine) PatchData(ctx context.Context, patches []policies.DataPatch) error {
	values := make([]any, len(patches))
	for i, p := range patches {
		if p.Remove {
			continue
		}
		raw, err := json.Marshal(p.Value)
		if err != nil {
			return internal("encode policy data", err)
		}
		if err := util.UnmarshalJSON(raw, &values[i]); err != nil {
			return internal("decode policy data", err)
		}
	}
	return e.writeData(ctx, func(txn storage.Transaction) error {
		for i, p := range patches {
			path := append(storage.Path{"provgate"}, p.Path...)
			op := storage.AddOp
			if p.Remove {
				op = storage.RemoveOp
			}
			err := e.store.Write(ctx, txn, op, path, values[i])
			if err != nil && !(p.Remove && storage.IsNotFound(err)) {
				return err
			}
		}
		return nil
	})
}

// Document returns data.provgate as plain JSON values, for comparing the
// data two ways of loading it produced.
func (e *Engine) Document(ctx context.Context) (any, error) {
	txn, err := e.store.NewTransaction(ctx)
	if err != nil {
		return nil, internal("open policy data transaction", err)
	}
	defer e.store.Abort(ctx, txn)
	v, err := e.store.Read(ctx, txn, storage.Path{"provgate"})
	if err != nil {
		return nil, internal("read policy data", err)
	}
	if av, ok := v.(ast.Value); ok {
		return ast.JSON(av)
	}
	return v, nil
}
