package opa

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage/inmem"

	"github.com/provgate/provgate/backend"
	"github.com/provgate/provgate/policies"
)

// policies.ActionFallback (Go, used for the input) and claims.fallback_keys
// (Rego, used for plain claims) must agree.
func TestActionFallbackMatchesRego(t *testing.T) {
	for _, key := range []string{"get", "list", "", "action", "action:", "action:callbackDo", "update", "update:",
		"update:/", "update:/Params", "update:/Params/foo", "update:/a/b/c/d", "update:/a/", "update:Params",
		"update:Params/x", "get:x", "actions"} {
		got := evalTest(t, fmt.Sprintf("data.provgate.claims.fallback_keys(%q)", key))
		gj, _ := json.Marshal(got)
		want := policies.ActionFallback(key)
		if want == nil {
			want = []string{}
		}
		wj, _ := json.Marshal(want)
		if string(gj) != string(wj) {
			t.Errorf("%q: rego %s, go %s", key, gj, wj)
		}
	}
}

// TestMachineShardMatchesRego: Go writes a machine's tenants into the shard
// the policy reads them from.
func TestMachineShardMatchesRego(t *testing.T) {
	for _, key := range []string{"", "m", "00000000-0000-4000-8000-000000000042", "3f2c1b7e-9a4d-4c2e-8f1a-6b5d4c3b2a19",
		"Grüße", "a,b", " spaced "} {
		got := evalTest(t, fmt.Sprintf("data.provgate.tenancy.shard(%q)", key))
		if want := policies.MachineShard(key); got != want {
			t.Errorf("%q: rego %v, go %s", key, got, want)
		}
	}
}

// plainData is d without the forms policies.NewData derives for roles, so
// that the policy walks each role's claims one by one.
func plainData(d policies.Data) map[string]any {
	for name, r := range d.Roles {
		d.Roles[name] = policies.RoleData{Claims: r.Claims}
	}
	raw, _ := json.Marshal(d)
	var v map[string]any
	_ = json.Unmarshal(raw, &v)
	return v
}

// The role index and the input's wanted form are shortcuts: a decision
// with them (normalized data, input from inputValue) must equal the one
// the policy makes on plain roles and plain required claims. The roles
// hold runs of 1 to 3 claims of every form; each principal holds one of
// them and the one 7 places on. Each run asks, for both licenses, with
// one principal of each three neighbouring roles (drawn from the logged
// seed, so that roles of every length and claim are held each run) every
// scope and action, one specific per pair: the 16 actions of one
// principal and scope take the 5 specifics of one random permutation in
// turn, so that each principal meets every specific in each scope. Runs
// with other seeds cover the other principals and pairings.
func TestIndexedDecisionsMatchPlain(t *testing.T) {
	claims := []backend.Claim{
		claim("machines", "get,list,action:callbackDo", "*"),
		claim("machines", "update:/Params", "m1"),
		claim("machines", "update", "*"),
		claim("machines", "update:/Params/a", "m2"),
		claim("machines", "update:", "m3"),
		claim("machines", "action", "m1"),
		claim("machines", "action:x", "m2"),
		claim("pools,roles", "*", "p1,p2"),
		claim("*", "get", "m1"),
		claim("tenants", "list,get,update:/Users", "t1"),
		claim("", "", ""),
	}
	var roles []backend.Role
	var names []string
	for i := range claims {
		for j := i; j < len(claims) && j < i+3; j++ {
			name := fmt.Sprintf("r%d-%d", i, j)
			roles = append(roles, backend.Role{Name: name, Claims: claims[i : j+1]})
			names = append(names, name)
		}
	}
	roles = append(roles, backend.Role{Name: "superuser", Claims: []backend.Claim{claim("*", "*", "*")}})
	names = append(names, "superuser", "missing")
	scopes := []string{"machines", "pools", "roles", "tenants", "users", "info", "bogus"}
	actions := []string{"get", "list", "create", "delete", "update", "update:", "update:/Params",
		"update:/Params/a", "update:/Params/a/b", "update:/Name", "update:Params", "action", "action:x",
		"action:callbackDo", "token", "bogus"}
	specifics := []string{"", "m1", "m2", "bob", "*"}
	rng, _ := sampleRand(t, t.Name())
	var principals []policies.Principal
	for i := 0; i < len(names); i += 3 {
		j := i + rng.IntN(min(3, len(names)-i))
		principals = append(principals, user("bob", names[j], names[(j+7)%len(names)]))
	}
	var wanted [][]backend.Claim // per principal
	for range principals {
		var ws []backend.Claim
		for _, scope := range scopes {
			strata(rng, len(actions), perCell(len(actions), len(specifics)), len(specifics), func(a, s int) {
				ws = append(ws, claim(scope, actions[a], specifics[s]))
			})
		}
		wanted = append(wanted, ws)
	}
	c := compileFiles(t, policies.Policies())
	for _, lic := range []policies.LicenseData{{Valid: true, Features: []string{"rbac"}}, {}} {
		d := policies.NewData(roles, nil, lic)
		ctx := context.Background()
		indexed, err := rego.New(rego.Query(DecisionPath), rego.Compiler(c),
			rego.Store(inmem.NewFromObject(map[string]any{"provgate": toAny(d)}))).PrepareForEval(ctx)
		if err != nil {
			t.Fatal(err)
		}
		plain, err := rego.New(rego.Query(DecisionPath), rego.Compiler(c),
			rego.Store(inmem.NewFromObject(map[string]any{"provgate": plainData(d)}))).PrepareForEval(ctx)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for i, p := range principals {
			for _, w := range wanted[i] {
				in := request(p, w)
				value, err := inputValue(in)
				if err != nil {
					t.Fatal(err)
				}
				a, err := indexed.Eval(ctx, rego.EvalParsedInput(value))
				if err != nil {
					t.Fatal(err)
				}
				raw, _ := json.Marshal(in)
				var v any
				_ = json.Unmarshal(raw, &v)
				b, err := plain.Eval(ctx, rego.EvalInput(v))
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(a[0].Expressions[0].Value, b[0].Expressions[0].Value) {
					t.Fatalf("%v %v: indexed %v, plain %v", p.Roles, w, a[0].Expressions[0].Value, b[0].Expressions[0].Value)
				}
				n++
			}
		}
		t.Logf("%d decisions compared", n)
	}
}

func toAny(d policies.Data) map[string]any {
	raw, _ := json.Marshal(d.Normalized())
	var v map[string]any
	_ = json.Unmarshal(raw, &v)
	return v
}
