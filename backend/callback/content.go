package callback

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/provgate/provgate/backend"
)

// ContentStore is where InstallContent adds the plugin's content; the
// object service's object part implements it.
type ContentStore interface {
	Get(ctx context.Context, prefix, key string) (backend.Model, int64, error)
	Create(ctx context.Context, prefix string, body []byte) (backend.Model, error)
}

// ParamSealer seals the plugin's Secure params; the object service's params
// part implements it.
type ParamSealer interface {
	// SealParam makes param definition name Secure and seals the values
	// objects hold of it in the clear.
	SealParam(ctx context.Context, name string) error
}

// InstallContent adds the plugin's content (Content: task, params, stage)
// when missing, so stages can call callbackDo out of the box, and keeps the
// Secure flag of its Secure params up to date: a data dir made before
// callback/callbacks was Secure (its header values and URLs carry
// credentials) may still hold it in the clear. It runs on every start, so
// a start interrupted halfway finishes the work on the next.
func InstallContent(ctx context.Context, o ContentStore, sealer ParamSealer) error {
	ctx = backend.WithSystem(ctx) // start-up work: no caller (docs/design.md §2.3)
	tasks, params, stages := Content()
	create := func(m backend.Model) error {
		if _, _, err := o.Get(ctx, m.Prefix(), m.Key()); err == nil {
			return nil
		}
		b, err := json.Marshal(m)
		if err != nil {
			return err
		}
		if _, err := o.Create(ctx, m.Prefix(), b); err != nil && !backend.IsCode(err, backend.ECONFLICT) {
			return fmt.Errorf("content %s/%s: %w", m.Prefix(), m.Key(), err)
		}
		return nil
	}
	for _, p := range params {
		if err := create(p); err != nil {
			return err
		}
		if p.Secure {
			if err := sealer.SealParam(ctx, p.Name); err != nil {
				return fmt.Errorf("content params/%s: %w", p.Name, err)
			}
		}
	}
	for _, t := range tasks {
		if err := create(t); err != nil {
			return err
		}
	}
	for _, s := range stages {
		if err := create(s); err != nil {
			return err
		}
	}
	return nil
}
