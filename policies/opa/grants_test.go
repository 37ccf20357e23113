package opa

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/provgate/provgate/backend"
	"github.com/provgate/provgate/policies"
)

// atomsOf breaks a claim into its atomic parts in Go (docs/design.md §5.9):
// one scope, one action key, one specific or "*" for every object.
func atomsOf(c backend.Claim) []backend.Claim {
	var out []backend.Claim
	for scope, actions := range policies.CompileClaim(c, testScopes) {
		for action, n := range actions {
			if n.All {
				out = append(out, backend.Claim{Scope: scope, Action: action, Specific: "*"})
				continue
			}
			for k := range n.Keys {
				out = append(out, backend.Claim{Scope: scope, Action: action, Specific: k})
			}
		}
	}
	return out
}

// unnamed is a key no generated claim names: a request on it is allowed
// only by a claim on every object.
const unnamed = "never-named-key"

// requestAllows decides the request a grant atom stands for: the atom's own
// specific, or for "*" a key no claim names.
func requestAllows(t *testing.T, e *Engine, p policies.Principal, a backend.Claim) bool {
	t.Helper()
	key := a.Specific
	if key == "*" {
		key = unnamed
	}
	d, err := e.Decide(context.Background(), request(p, backend.Claim{Scope: a.Scope, Action: a.Action, Specific: key}))
	if err != nil {
		t.Fatal(err)
	}
	return d.Allow
}

// TestGrantContainmentAgreesWithRequests: the grant check and request
// decisions share one containment. For random roles and random granted
// claims (lists, "*", action:<x>, update:<pointer>), an atom of a grant is
// reported not held exactly when the holder's request for that atom is
// refused; a whole claim is grantable exactly when every atom's request is
// allowed. The self claims naming their holder are left out: requests count
// them, grants do not (test_self_claims_do_not_grant).
func TestGrantContainmentAgreesWithRequests(t *testing.T) {
	e := newTestEngine(t, Options{CacheSize: -1})
	rng := rand.New(rand.NewPCG(23, 17))
	scopes := []string{"machines", "profiles", "pools", "roles", "jobs", "machines,pools", "*"}
	actions := []string{"get", "list", "update", "update:", "update:/Params", "update:/Params/a", "update:/Params/a/b",
		"update:/Meta", "action", "action:callbackDo", "action:other", "getSecure", "get,list", "update:/Params,get", "*", "bind", "delete"}
	specifics := []string{"a", "b", "c", "a,b", "b, c", "*", ""}
	pick := func(list []string) string { return list[rng.IntN(len(list))] }
	claimOf := func() backend.Claim {
		return backend.Claim{Scope: pick(scopes), Action: pick(actions), Specific: pick(specifics)}
	}
	rounds := 300
	if testing.Short() {
		rounds = 40
	}
	for i := range rounds {
		var roles []backend.Role
		var names []string
		for r := range 1 + rng.IntN(3) {
			role := backend.Role{Name: fmt.Sprintf("r%d", r)}
			for range 1 + rng.IntN(3) {
				role.Claims = append(role.Claims, claimOf())
			}
			roles = append(roles, role)
			names = append(names, role.Name)
		}
		if err := e.SetData(context.Background(), policies.NewData(roles, nil, policies.LicenseData{Valid: true, Features: []string{"rbac"}})); err != nil {
			t.Fatal(err)
		}
		p := user("zed", names...)
		grant := claimOf()
		missing, err := e.Ungranted(context.Background(), policies.Input{Principal: p, Grants: []backend.Grant{{Claims: []backend.Claim{grant}}}})
		if err != nil {
			t.Fatal(err)
		}
		// The self claims (users get,password,token on the holder, which
		// requests with an empty specific reach too) count for requests
		// only.
		self := func(c backend.Claim) bool {
			return c.Scope == "users" && (c.Specific == "" || c.Specific == p.Name) && slices.Contains([]string{"get", "password", "token"}, c.Action)
		}
		missing = slices.DeleteFunc(missing, self)
		var want []backend.Claim
		for _, a := range atomsOf(grant) {
			if !self(a) && !requestAllows(t, e, p, a) {
				want = append(want, a)
			}
		}
		sortClaims(missing)
		sortClaims(want)
		if !slices.Equal(missing, want) {
			var only1, only2 []backend.Claim
			for _, c := range missing {
				if !slices.Contains(want, c) {
					only1 = append(only1, c)
				}
			}
			for _, c := range want {
				if !slices.Contains(missing, c) {
					only2 = append(only2, c)
				}
			}
			t.Fatalf("round %d: roles %+v granting %v: only the grant check misses %v; only requests refuse %v", i, roles, grant, only1, only2)
		}
	}
}

func sortClaims(cs []backend.Claim) {
	slices.SortFunc(cs, func(a, b backend.Claim) int { return strings.Compare(a.String(), b.String()) })
}

// TestUngranted pins the grant check's answers on the engine: the
// superuser's wildcard and list roles (a reverted attempt answered 403 or
// 500 for some), delegations, deltas and machine tokens.
func TestUngranted(t *testing.T) {
	e := newTestEngine(t, Options{})
	ctx := context.Background()
	ops := policies.Principal{Kind: "machine", Name: "uuid-1", MachineToken: "operations", Claims: []backend.Claim{claim("*", "*", "*")}}
	tests := []struct {
		name   string
		p      policies.Principal
		grants []backend.Grant
		want   []backend.Claim
	}{
		{"superuser grants * * *", user("root", "superuser"), []backend.Grant{{Claims: []backend.Claim{claim("*", "*", "*")}}}, []backend.Claim{}},
		{"superuser grants lists and forms", user("root", "superuser"), []backend.Grant{{Claims: []backend.Claim{
			claim("machines,profiles", "get,update:/Params,action:callbackDo", "a, b"), claim("users", "action:x,update:/Meta/a", "*"),
			claim("machines", "update:", "*"), claim("roles", "bind,escalate", "*")}}}, []backend.Claim{}},
		{"superuser binds an unknown role", user("root", "superuser"), []backend.Grant{{Role: "ghost", Via: backend.BindClaim("ghost")}}, []backend.Claim{}},
		{"reader lacks delete", user("rita", "reader"), []backend.Grant{{Claims: []backend.Claim{claim("machines", "get,delete", "m1,m2")}}},
			[]backend.Claim{claim("machines", "delete", "m1"), claim("machines", "delete", "m2")}},
		{"reader gives m1reader", user("rita", "reader", "rolereader"), []backend.Grant{{Role: "m1reader", Via: backend.BindClaim("m1reader")}}, []backend.Claim{}},
		{"m1reader cannot give reader", user("mia", "m1reader", "rolereader"), []backend.Grant{{Role: "reader", Via: backend.BindClaim("reader")}},
			[]backend.Claim{claim("machines", "get", "*"), claim("machines", "list", "*")}},
		{"a role the writer cannot see is given only by bind", user("rita", "reader"), []backend.Grant{{Role: "m1reader", Via: backend.BindClaim("m1reader")}},
			[]backend.Claim{*backend.BindClaim("m1reader")}},
		{"unknown role needs bind", user("rita", "reader"), []backend.Grant{{Role: "ghost", Via: backend.BindClaim("ghost")}},
			[]backend.Claim{*backend.BindClaim("ghost")}},
		{"delta", user("nobody"), []backend.Grant{{Claims: []backend.Claim{claim("machines", "get", "m1")}, Had: []backend.Claim{claim("machines", "get,list", "*")}}}, []backend.Claim{}},
		{"self", user("alice"), []backend.Grant{{Roles: []string{"superuser"}, Via: backend.ImpersonateClaim("alice"), Subject: &backend.Subject{Kind: "user", Name: "alice"}}}, []backend.Claim{}},
		{"machine tokens grant nothing", ops, []backend.Grant{{Claims: []backend.Claim{claim("params", "get", "p")}}}, []backend.Claim{claim("params", "get", "p")}},
		{"no grants", user("nobody"), []backend.Grant{}, []backend.Claim{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := e.Ungranted(ctx, policies.Input{Principal: tt.p, Grants: tt.grants})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// TestUngrantedFailsClosed: a policy without the grant check refuses every
// grant rather than allowing it.
func TestUngrantedFailsClosed(t *testing.T) {
	e, err := newEngine(context.Background(), Options{}, map[string]string{"p.rego": minimalPolicy})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.Ungranted(context.Background(), policies.Input{Principal: user("root", "superuser"), Grants: []backend.Grant{{Role: "x"}}})
	if !backend.IsCode(err, backend.EFORBIDDEN) {
		t.Fatalf("got %v, want a refusal", err)
	}
}

// BenchmarkUngranted is the grant check of the writes figures 10 time: a
// user create with 5 roles and a role create with 10 claims, by the
// superuser.
func BenchmarkUngranted(b *testing.B) {
	e, err := New(context.Background(), Options{CacheSize: -1})
	if err != nil {
		b.Fatal(err)
	}
	claims10 := []backend.Claim{
		claim("machines", "get,list", "*"), claim("machines", "update:/Params,update:/Description", "*"),
		claim("machines", "action:callbackDo", "*"), claim("profiles", "get,list,update:/Params", "web,db"),
		claim("pools", "action:allocateMachines,action:releaseMachines,get", "p1,p2"), claim("jobs", "get,list,log", "*"),
		claim("params,stages,tasks", "get", "*"), claim("workflows", "get,list", "*"),
		claim("bootenvs,subnets", "get,list", "*"), claim("events", "post", "*"),
	}
	roles := []backend.Role{{Name: "superuser", Claims: []backend.Claim{claim("*", "*", "*")}}}
	var five []backend.Grant
	for i := range 5 {
		name := fmt.Sprintf("g-role-%d", i)
		roles = append(roles, backend.Role{Name: name, Claims: claims10[2*i : 2*i+2]})
		five = append(five, backend.Grant{Role: name, Via: backend.BindClaim(name)})
	}
	if err := e.SetData(context.Background(), policies.NewData(roles, nil, policies.LicenseData{Valid: true, Features: []string{"rbac"}})); err != nil {
		b.Fatal(err)
	}
	root := user("root", "superuser")
	for _, bc := range []struct {
		name   string
		grants []backend.Grant
	}{
		{"user_5_roles", five},
		{"role_10_claims", []backend.Grant{{Claims: claims10, Via: backend.EscalateClaim("new")}}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			in := policies.Input{Principal: root, Grants: bc.grants}
			for b.Loop() {
				if out, err := e.Ungranted(context.Background(), in); err != nil || len(out) != 0 {
					b.Fatal(out, err)
				}
			}
		})
	}
}

// TestUngrantedCache: a repeated grant check is answered from the cache,
// and a data change (a role widened) is seen at once.
func TestUngrantedCache(t *testing.T) {
	e := newTestEngine(t, Options{})
	ctx := context.Background()
	in := policies.Input{Principal: user("rita", "reader", "rolereader"), Grants: []backend.Grant{{Claims: []backend.Claim{claim("machines", "delete", "m1")}}}}
	for range 2 {
		got, err := e.Ungranted(ctx, in)
		if err != nil || !slices.Equal(got, []backend.Claim{claim("machines", "delete", "m1")}) {
			t.Fatalf("got %v, %v", got, err)
		}
	}
	if n := e.grants.len(); n != 1 {
		t.Fatalf("grant cache holds %d answers, want 1", n)
	}
	d := testData()
	d.Roles["reader"] = policies.RoleData{Claims: []backend.Claim{claim("machines", "*", "*")}}
	if err := e.SetData(ctx, d); err != nil {
		t.Fatal(err)
	}
	if got, err := e.Ungranted(ctx, in); err != nil || len(got) != 0 {
		t.Fatalf("after the role was widened: %v, %v", got, err)
	}
}
