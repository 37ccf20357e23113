package claims

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/provgate/provgate/backend"
)

// Getter reads one stored object by its native or "Index:value" key; the
// object service implements it.
type Getter interface {
	Get(ctx context.Context, prefix, key string) (backend.Model, int64, error)
}

// ObjectResolver is the Resolver over the object service: each lookup is
// one read of the object.
type ObjectResolver struct{ Objects Getter }

// NativeKey implements Resolver.
func (r ObjectResolver) NativeKey(ctx context.Context, prefix, key string) (string, error) {
	m, _, err := r.Objects.Get(ctx, prefix, key)
	if err != nil {
		return "", err
	}
	return m.Key(), nil
}

// JobMachine implements Resolver.
func (r ObjectResolver) JobMachine(ctx context.Context, key string) (string, error) {
	m, _, err := r.Objects.Get(ctx, backend.PrefixJobs, key)
	if err != nil {
		return "", err
	}
	j, ok := m.(*backend.Job)
	if !ok {
		return "", fmt.Errorf("jobs/%s: unexpected %T", key, m)
	}
	return j.Machine, nil
}

// Current implements Resolver.
func (r ObjectResolver) Current(ctx context.Context, prefix, key string) ([]byte, error) {
	m, _, err := r.Objects.Get(ctx, prefix, key)
	if err != nil {
		return nil, err
	}
	return json.Marshal(m)
}
