package objects

import (
	"context"

	"github.com/provgate/provgate/backend"
)

// Tenancy: objects a tenant user creates join its tenant, and a deleted
// object leaves every tenant (docs/design.md §6). The object part keeps
// Members in step on every create and delete.

// addToTenant appends key to tenant's Members[prefix] when the tenant
// restricts that scope, and a user (user true) to its Users: a user a
// tenant user creates is in its tenant, never in none, which would let it
// see everything (docs/design.md §6.4).
func (s *CRUD) addToTenant(ctx context.Context, tenant, prefix, key string, user bool) error {
	if tenant == "" {
		return nil
	}
	rec, tm, err := s.stored(ctx, "tenants", tenant)
	if err != nil || tm == nil {
		return err
	}
	t := tm.(*backend.Tenant)
	old := clone(t)
	changed := false
	if list, ok := t.Members[prefix]; ok && !contains(list, key) {
		t.Members[prefix] = append(list, key)
		changed = true
	}
	if user && !contains(t.Users, key) {
		t.Users = append(t.Users, key)
		changed = true
	}
	if !changed {
		return nil
	}
	return s.writeTenant(ctx, rec.Key, rec.Rev, old, t)
}

func (s *CRUD) writeTenant(ctx context.Context, key string, rev int64, old, t backend.Model) error {
	data, err := encode(t)
	if err != nil {
		return err
	}
	if _, err := s.st.Update(ctx, "tenants", key, rev, data); err != nil {
		return err
	}
	emit(ctx, s.event(ctx, "update", t, old))
	return nil
}

// dropFromTenants removes a deleted key from every tenant's Members, and a
// deleted user from every tenant's Users.
func (s *CRUD) dropFromTenants(ctx context.Context, prefix, key string) error {
	recs, _, _, err := s.st.List(ctx, "tenants", backend.Query{Limit: -1})
	if err != nil {
		return err
	}
	tk := s.kinds.Kind("tenants")
	for _, rec := range recs {
		tm, err := decodeRecord(tk, rec.Data)
		if err != nil {
			return err
		}
		t := tm.(*backend.Tenant)
		old := clone(t)
		changed := false
		if list, ok := t.Members[prefix]; ok && contains(list, key) {
			t.Members[prefix] = without(list, key)
			changed = true
		}
		if prefix == "users" && contains(t.Users, key) {
			t.Users = without(t.Users, key)
			changed = true
		}
		if changed {
			if err := s.writeTenant(ctx, rec.Key, rec.Rev, old, t); err != nil {
				return err
			}
		}
	}
	return nil
}
