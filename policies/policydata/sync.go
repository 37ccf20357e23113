// Package policydata keeps what the policies know in step with the store:
// Sync turns roles, tenants and the license into policies.Data for the
// engine, and Freshness reloads it, and drops the server's cached
// credentials, whenever the store says they changed (docs/design.md §9.2,
// §14.4).
package policydata

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/provgate/provgate/backend"
	"github.com/provgate/provgate/policies"
)

// Records lists stored objects; *store.Store satisfies it.
type Records interface {
	List(ctx context.Context, prefix string, q backend.Query) (recs []backend.Record, total, matched int, err error)
}

// License reports the license as the server holds it; backend/license
// implements it.
type License interface {
	LicenseState(ctx context.Context) backend.LicenseState
}

// Engine receives the policy data; policies/opa implements it.
type Engine interface {
	SetData(ctx context.Context, d policies.Data) error
}

// Sync loads roles, tenants and the license into the policy engine, and
// remembers each user's tenant for the gateway.
type Sync struct {
	st      Records
	lic     License
	engine  Engine
	mu      sync.Mutex
	tenants map[string]string
}

// NewSync returns a Sync; nothing is loaded before the first Refresh.
func NewSync(st Records, lic License, engine Engine) *Sync {
	return &Sync{st: st, lic: lic, engine: engine}
}

// Refresh reloads everything the policies know.
func (p *Sync) Refresh(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	roles, err := listAll[backend.Role](ctx, p.st, backend.PrefixRoles)
	if err != nil {
		return err
	}
	tenants, err := listAll[backend.Tenant](ctx, p.st, backend.PrefixTenants)
	if err != nil {
		return err
	}
	st := p.lic.LicenseState(ctx)
	d := policies.NewData(roles, tenants, policies.LicenseData{Valid: st.Valid, Features: st.Features})
	if err := p.engine.SetData(ctx, d); err != nil {
		return err
	}
	p.tenants = d.UserTenant
	return nil
}

// TenantOf names a user's tenant ("" for none), as of the last Refresh.
func (p *Sync) TenantOf(user string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.tenants[user]
}

func listAll[T any](ctx context.Context, st Records, prefix string) ([]T, error) {
	recs, _, _, err := st.List(ctx, prefix, backend.Query{Limit: -1})
	if err != nil {
		return nil, err
	}
	out := make([]T, 0, len(recs))
	for _, r := range recs {
		var v T
		if err := json.Unmarshal(r.Data, &v); err != nil {
			return nil, fmt.Errorf("%s/%s: %w", prefix, r.Key, err)
		}
		out = append(out, v)
	}
	return out, nil
}
