package policydata_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sync"
	"testing"

	"github.com/provgate/provgate/backend"
	"github.com/provgate/provgate/backend/store"
	"github.com/provgate/provgate/backend/store/storetest"
	"github.com/provgate/provgate/policies"
	"github.com/provgate/provgate/policies/opa"
	"github.com/provgate/provgate/policies/policydata"
)

// license is a license whose state a test changes.
type license struct {
	mu sync.Mutex
	st backend.LicenseState
}

func (l *license) LicenseState(context.Context) backend.LicenseState {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.st
}

// TestIncrementalEqualsFullReload writes a random sequence of users, roles,
// tenants and settings to a real store; after each step a replica that
// applies the change log (Freshness.Check → Sync.Apply → Engine.PatchData)
// must hold exactly the data a complete reload builds, and the real OPA
// evaluation of a set of requests must decide the same on both.
func TestIncrementalEqualsFullReload(t *testing.T) {
	for _, c := range storetest.Open(t) {
		t.Run(c.Name, func(t *testing.T) {
			steps := 150
			if testing.Short() {
				steps = 40
			}
			testIncremental(t, c.Store, steps)
		})
	}
}

func testIncremental(t *testing.T, st *store.Store, steps int) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(16, uint64(steps)))
	lic := &license{st: backend.LicenseState{Valid: true, Features: []string{"rbac"}}}

	newEngine := func() *opa.Engine {
		e, err := opa.New(ctx, opa.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = e.Close() })
		return e
	}
	inc, full := newEngine(), newEngine()
	incSync, fullSync := policydata.NewSync(st, lic, inc, backend.NewCatalog()), policydata.NewSync(st, lic, full, backend.NewCatalog())
	replica := policydata.NewFreshness(st, true, incSync)
	if err := replica.Refresh(ctx); err != nil {
		t.Fatal(err)
	}

	names := func(prefix string, n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("%s%d", prefix, i)
		}
		return out
	}
	roles, users, tenants, machines := names("r", 8), names("u", 8), names("t", 5), names("m", 6)
	pick := func(from []string, max int) []string {
		var out []string
		for range rng.IntN(max + 1) {
			out = append(out, from[rng.IntN(len(from))])
		}
		return out
	}
	scopes := []string{"machines", "profiles", "users", "pools", "tenants", "*", "machines,profiles", "nosuch"}
	actions := []string{"get", "list", "update", "update:/Description", "update:/Params", "action", "action:reboot", "*", "get,list", "create"}
	specifics := []string{"*", "m1", "m1,m2", "u3", "p1", "m4,u1"}
	claim := func() backend.Claim {
		return backend.Claim{Scope: scopes[rng.IntN(len(scopes))], Action: actions[rng.IntN(len(actions))],
			Specific: specifics[rng.IntN(len(specifics))]}
	}
	put := func(prefix, key string, v any) {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Update(ctx, prefix, key, 0, b); backend.IsCode(err, backend.ENOTFOUND) {
			_, err = st.Create(ctx, prefix, key, b)
			if err != nil {
				t.Fatal(err)
			}
		} else if err != nil {
			t.Fatal(err)
		}
	}
	del := func(prefix, key string) {
		if _, err := st.Delete(ctx, prefix, key); err != nil && !backend.IsCode(err, backend.ENOTFOUND) {
			t.Fatal(err)
		}
	}
	write := func() string {
		switch n := rng.IntN(10); {
		case n < 4:
			name := roles[rng.IntN(len(roles))]
			if rng.IntN(5) == 0 {
				del(backend.PrefixRoles, name)
				return "delete role " + name
			}
			var cs []backend.Claim
			for range rng.IntN(4) {
				cs = append(cs, claim())
			}
			put(backend.PrefixRoles, name, backend.Role{Name: name, Claims: cs})
			return "put role " + name
		case n < 8:
			name := tenants[rng.IntN(len(tenants))]
			if rng.IntN(5) == 0 {
				del(backend.PrefixTenants, name)
				return "delete tenant " + name
			}
			members := map[string][]string{"machines": pick(machines, 3)}
			if rng.IntN(2) == 0 {
				members["profiles"] = pick([]string{"p1", "p2", "p3"}, 2)
			}
			put(backend.PrefixTenants, name, backend.Tenant{Name: name, Users: pick(users, 3), Members: members})
			return "put tenant " + name
		case n < 9:
			name := users[rng.IntN(len(users))]
			put(backend.PrefixUsers, name, backend.User{Name: name, Roles: pick(roles, 2)})
			return "put user " + name
		default:
			lic.mu.Lock()
			lic.st.Valid = !lic.st.Valid
			lic.mu.Unlock()
			if err := st.SetSetting(ctx, "license_test", fmt.Sprint(rng.Int())); err != nil {
				t.Fatal(err)
			}
			return "license"
		}
	}

	// The requests both engines decide after each step.
	var inputs []policies.Input
	for i := range 40 {
		p := policies.Principal{Kind: "user", Name: users[i%len(users)], Roles: pick(roles, 3), Claims: []backend.Claim{}}
		if i%7 == 0 {
			p.TokenRoles = pick(roles, 2)
		}
		if i%10 == 9 {
			p = policies.Principal{Kind: "machine", Name: machines[i%len(machines)], MachineToken: "operations",
				Roles: []string{}, Claims: []backend.Claim{}}
		}
		in := policies.Input{Principal: p, Method: "GET", Operation: "get"}
		switch i % 3 {
		case 0:
			in.List = &policies.ListRequest{Scope: []string{"machines", "profiles", "users"}[i%3]}
			in.Required, in.Operation = []backend.Claim{}, "list"
		default:
			m := machines[rng.IntN(len(machines))]
			in.Object = &policies.Object{Scope: "machines", Key: m}
			c := claim()
			in.Required = []backend.Claim{{Scope: "machines", Action: []string{"get", "update:/Description", "action:reboot"}[i%3], Specific: m}, {Scope: c.Scope, Action: c.Action, Specific: m}}
		}
		inputs = append(inputs, in)
	}

	compare := func(step int, what []string) {
		t.Helper()
		if err := replica.Check(ctx); err != nil {
			t.Fatalf("step %d %v: incremental: %v", step, what, err)
		}
		if err := fullSync.Refresh(ctx); err != nil {
			t.Fatalf("step %d %v: full reload: %v", step, what, err)
		}
		a, err := inc.Document(ctx)
		if err != nil {
			t.Fatal(err)
		}
		b, err := full.Document(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(a, b) {
			ja, _ := json.Marshal(a)
			jb, _ := json.Marshal(b)
			t.Fatalf("step %d %v: data differs\nincremental: %s\nfull:        %s", step, what, ja, jb)
		}
		for _, u := range users {
			if incSync.TenantOf(u) != fullSync.TenantOf(u) {
				t.Fatalf("step %d %v: tenant of %s: %q, full reload %q", step, what, u, incSync.TenantOf(u), fullSync.TenantOf(u))
			}
		}
		for _, in := range inputs {
			da, err := inc.Decide(ctx, in)
			if err != nil {
				t.Fatal(err)
			}
			db, err := full.Decide(ctx, in)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(da, db) {
				t.Fatalf("step %d %v: %+v decided %+v, full reload %+v", step, what, in, da, db)
			}
		}
	}

	allows := 0
	for step := range steps {
		var what []string
		for range 1 + rng.IntN(4) {
			what = append(what, write())
		}
		compare(step, what)
		for _, in := range inputs {
			if d, _ := full.Decide(ctx, in); d.Allow {
				allows++
			}
		}
	}
	if n := replica.FullReloads(); n != 1 {
		t.Fatalf("the replica reloaded everything %d times; only the first load should be complete", n)
	}
	// The sequence must exercise both answers, or the comparison says little.
	if allows == 0 || allows == steps*len(inputs) {
		t.Fatalf("%d of %d decisions allowed", allows, steps*len(inputs))
	}

	// A replica whose revision the change log no longer reaches (pruned
	// after the first of these writes) reloads everything, and still agrees.
	first := write()
	if err := st.DB().Exec(`DELETE FROM revision_changes`).Error; err != nil {
		t.Fatal(err)
	}
	compare(steps, []string{first, write()})
	if n := replica.FullReloads(); n != 2 {
		t.Fatalf("after the log was pruned: %d complete reloads, want 2", n)
	}
	compare(steps+1, []string{write()})
	if n := replica.FullReloads(); n != 2 {
		t.Fatalf("after one more write: %d complete reloads, want 2", n)
	}
}
