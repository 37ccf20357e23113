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
	"maps"
	"slices"
	"sync"

	"github.com/provgate/provgate/backend"
	"github.com/provgate/provgate/policies"
)

// Records reads stored objects; *store.Store satisfies it.
type Records interface {
	List(ctx context.Context, prefix string, q backend.Query) (recs []backend.Record, total, matched int, err error)
	Get(ctx context.Context, prefix, key string) (backend.Record, error)
}

// License reports the license as the server holds it; backend/license
// implements it.
type License interface {
	LicenseState(ctx context.Context) backend.LicenseState
}

// Engine receives the policy data; policies/opa implements it.
type Engine interface {
	SetData(ctx context.Context, d policies.Data) error
	PatchData(ctx context.Context, patches []policies.DataPatch) error
}

// Sync loads roles, tenants and the license into the policy engine, and
// remembers each user's tenant for the gateway. Refresh loads everything;
// Apply changes only the roles and tenants a list of changes names, so a
// write costs the same with ten roles or ten thousand (docs/design.md
// §14.4).
type Sync struct {
	st     Records
	lic    License
	engine Engine
	// scopes are the catalog's scopes, which role claims compile against.
	scopes map[string][]string

	mu sync.Mutex
	// What the engine holds, as of the last Refresh or Apply: the role
	// names, each tenant's plain data, and for each user and machine the
	// tenants listing it (sorted), from which user_tenant and
	// machine_tenants derive.
	roles        map[string]bool
	tenants      map[string]policies.TenantData
	userIn       map[string][]string
	machineIn    map[string][]string
	tenantOfUser map[string]string
}

// NewSync returns a Sync; nothing is loaded before the first Refresh.
func NewSync(st Records, lic License, engine Engine, kinds *backend.Catalog) *Sync {
	return &Sync{st: st, lic: lic, engine: engine, scopes: kinds.ScopeActions()}
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
	d := policies.NewDataIn(p.scopes, roles, tenants, policies.LicenseData{Valid: st.Valid, Features: st.Features})
	if err := p.engine.SetData(ctx, d); err != nil {
		return err
	}
	p.roles = make(map[string]bool, len(roles))
	for _, r := range roles {
		p.roles[r.Name] = true
	}
	p.tenants = make(map[string]policies.TenantData, len(tenants))
	p.userIn, p.machineIn = map[string][]string{}, map[string][]string{}
	for _, t := range tenants {
		td := plainTenant(t)
		p.tenants[t.Name] = td
		for _, u := range td.Users {
			p.userIn[u] = insertSorted(p.userIn[u], t.Name)
		}
		for _, m := range td.Members["machines"] {
			p.machineIn[m] = insertSorted(p.machineIn[m], t.Name)
		}
	}
	p.tenantOfUser = d.UserTenant
	return nil
}

// Apply brings the engine's data up to date with changes: each changed
// role or tenant is read again and its part of the data replaced (or
// removed), with the user_tenant and machine_tenants entries of the users
// and machines it lists or listed; a changed setting reloads the license.
// User changes need nothing here (a user's roles are read at
// authentication). All patches go to the engine in one step; on error the
// engine and Sync keep what they had, and the caller reloads everything.
func (p *Sync) Apply(ctx context.Context, changes []backend.Change) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.roles == nil {
		return fmt.Errorf("policy data: not loaded yet")
	}
	seen := map[[2]string]bool{}
	var patches []policies.DataPatch
	roles := map[string]bool{}
	tenants := map[string]*policies.TenantData{} // nil: removed
	license := false
	for _, c := range changes {
		k := [2]string{c.Prefix, c.Key}
		if seen[k] {
			continue
		}
		seen[k] = true
		switch c.Prefix {
		case backend.PrefixRoles:
			r, err := get[backend.Role](ctx, p.st, c.Prefix, c.Key)
			if err != nil {
				return err
			}
			roles[c.Key] = r != nil
			patch := policies.DataPatch{Path: []string{"roles", c.Key}, Remove: r == nil}
			if r != nil {
				d := policies.Data{Scopes: p.scopes, Roles: map[string]policies.RoleData{c.Key: {Claims: r.Claims}}}.Normalized()
				patch.Value = d.Roles[c.Key]
			}
			patches = append(patches, patch)
		case backend.PrefixTenants:
			t, err := get[backend.Tenant](ctx, p.st, c.Prefix, c.Key)
			if err != nil {
				return err
			}
			tenants[c.Key] = nil
			if t != nil {
				td := plainTenant(*t)
				tenants[c.Key] = &td
			}
		case backend.PrefixSettings:
			license = true
		}
	}

	// Tenants: the new membership indexes, computed on copies of the
	// entries they touch so that a failed patch leaves Sync as it was.
	userIn, machineIn := map[string][]string{}, map[string][]string{}
	for name, td := range tenants {
		if old, ok := p.tenants[name]; ok {
			for _, u := range old.Users {
				userIn[u] = slices.DeleteFunc(slices.Clone(entry(userIn, p.userIn, u)), eq(name))
			}
			for _, m := range old.Members["machines"] {
				machineIn[m] = slices.DeleteFunc(slices.Clone(entry(machineIn, p.machineIn, m)), eq(name))
			}
		}
		if td == nil {
			patches = append(patches, policies.DataPatch{Path: []string{"tenants", name}, Remove: true})
			continue
		}
		for _, u := range td.Users {
			userIn[u] = insertSorted(slices.Clone(entry(userIn, p.userIn, u)), name)
		}
		for _, m := range td.Members["machines"] {
			machineIn[m] = insertSorted(slices.Clone(entry(machineIn, p.machineIn, m)), name)
		}
		d := policies.Data{Scopes: p.scopes, Tenants: map[string]policies.TenantData{name: *td}}.Normalized()
		patches = append(patches, policies.DataPatch{Path: []string{"tenants", name}, Value: d.Tenants[name]})
	}
	// Entries whose tenants did not change are left alone: a tenant write
	// that keeps its users and machines (a Description, another scope's
	// members) patches only the tenant. OPA's store rehashes a whole
	// object when one of its keys is replaced, so each entry patched here
	// costs in proportion to the size of user_tenant, or of its shard of
	// machine_tenants (policies.MachineShard).
	for u, in := range userIn {
		if slices.Equal(in, p.userIn[u]) {
			delete(userIn, u)
		}
	}
	for m, in := range machineIn {
		if slices.Equal(in, p.machineIn[m]) {
			delete(machineIn, m)
		}
	}
	tenantOf := map[string]string{}
	for _, u := range slices.Sorted(maps.Keys(userIn)) {
		if in := userIn[u]; len(in) > 0 {
			// docs/design.md §6.1: the first tenant by name wins, as in
			// policies.Data.Normalized.
			tenantOf[u] = in[0]
			patches = append(patches, policies.DataPatch{Path: []string{"user_tenant", u}, Value: in[0]})
		} else {
			patches = append(patches, policies.DataPatch{Path: []string{"user_tenant", u}, Remove: true})
		}
	}
	for _, m := range slices.Sorted(maps.Keys(machineIn)) {
		if in := machineIn[m]; len(in) > 0 {
			patches = append(patches, policies.DataPatch{Path: []string{"machine_tenants", policies.MachineShard(m), m}, Value: in})
		} else {
			patches = append(patches, policies.DataPatch{Path: []string{"machine_tenants", policies.MachineShard(m), m}, Remove: true})
		}
	}
	if license {
		st := p.lic.LicenseState(ctx)
		d := policies.Data{Scopes: p.scopes, License: policies.LicenseData{Valid: st.Valid, Features: st.Features}}.Normalized()
		patches = append(patches, policies.DataPatch{Path: []string{"license"}, Value: d.License})
	}
	if len(patches) == 0 {
		return nil
	}
	if err := p.engine.PatchData(ctx, patches); err != nil {
		return err
	}

	// The engine holds the new data: Sync follows. tenantOfUser is
	// replaced, never modified, since TenantOf's callers may hold it.
	for name, held := range roles {
		if held {
			p.roles[name] = true
		} else {
			delete(p.roles, name)
		}
	}
	for name, td := range tenants {
		if td == nil {
			delete(p.tenants, name)
		} else {
			p.tenants[name] = *td
		}
	}
	for u, in := range userIn {
		setOrDelete(p.userIn, u, in)
	}
	for m, in := range machineIn {
		setOrDelete(p.machineIn, m, in)
	}
	if len(userIn) > 0 {
		next := maps.Clone(p.tenantOfUser)
		for u := range userIn {
			if t, ok := tenantOf[u]; ok {
				next[u] = t
			} else {
				delete(next, u)
			}
		}
		p.tenantOfUser = next
	}
	return nil
}

// TenantOf names a user's tenant ("" for none), as of the last Refresh or
// Apply.
func (p *Sync) TenantOf(user string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.tenantOfUser[user]
}

// plainTenant is a tenant's data as the store holds it, before the derived
// forms (policies.Data.Normalized) are filled in.
func plainTenant(t backend.Tenant) policies.TenantData {
	return policies.TenantData{Members: t.Members, Users: t.Users}
}

// entry is m's value for k when m has one, else base's.
func entry(m, base map[string][]string, k string) []string {
	if v, ok := m[k]; ok {
		return v
	}
	return base[k]
}

func eq(s string) func(string) bool { return func(v string) bool { return v == s } }

// insertSorted adds s to the sorted list once.
func insertSorted(list []string, s string) []string {
	i, found := slices.BinarySearch(list, s)
	if found {
		return list
	}
	return slices.Insert(list, i, s)
}

func setOrDelete(m map[string][]string, k string, v []string) {
	if len(v) == 0 {
		delete(m, k)
	} else {
		m[k] = v
	}
}

// get reads one stored object: nil, without error, when there is none.
func get[T any](ctx context.Context, st Records, prefix, key string) (*T, error) {
	rec, err := st.Get(ctx, prefix, key)
	if backend.IsCode(err, backend.ENOTFOUND) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	v := new(T)
	if err := json.Unmarshal(rec.Data, v); err != nil {
		return nil, fmt.Errorf("%s/%s: %w", prefix, key, err)
	}
	return v, nil
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
