package opa

import (
	"context"
	"reflect"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage/inmem"

	"github.com/provgate/provgate/backend"
	"github.com/provgate/provgate/policies"
)

// plainVeto is an extension refusing one user's writes, so that the one
// pass of authz.plainly_allowed meets a veto too.
const plainVeto = `package provgate.ext.plainveto

deny contains "vetoed" if {
	input.principal.name == "vera"
	input.method != "GET"
}
`

// authz.plainly_allowed decides the common request in one pass; outcome
// decides every request step by step. Wherever the pass allows, outcome
// must allow too, so the decision equals outcome for every request that
// is not a list. Compared here over principals (tenants, token roles,
// restrictions, machines, vetoes), objects the tenant lists or hides,
// wanted claims of every form, and both licenses; the pass must also
// actually decide some of them, or the comparison would say nothing.
func TestPlainlyAllowedAgreesWithOutcome(t *testing.T) {
	ctx := context.Background()
	roles := []backend.Role{
		{Name: "superuser", Claims: []backend.Claim{claim("*", "*", "*")}},
		{Name: "params", Claims: []backend.Claim{claim("machines", "get,list,update:/Params", "m1,m2,m3"), claim("pools", "*", "p1")}},
		{Name: "exact", Claims: []backend.Claim{claim("machines", "update:/Params/a", "m2"), claim("machines", "update", "*")}},
		{Name: "actions", Claims: []backend.Claim{claim("machines", "action", "m1"), claim("machines", "action:x", "m2")}},
		{Name: "rbac", Claims: []backend.Claim{claim("roles,tenants", "list,get,update", "*")}},
		{Name: "users", Claims: []backend.Claim{claim("users", "*", "*"), claim("info", "get", "*")}},
		{Name: "empty"},
	}
	tenants := []backend.Tenant{
		{Name: "t1", Members: map[string][]string{"machines": {"m1", "m2"}}, Users: []string{"tina", "vera"}},
		{Name: "t2", Members: map[string][]string{"pools": {"p2"}, "machines": {}}, Users: []string{"tom"}},
		{Name: "t3", Members: map[string][]string{"pools": {"p1"}}, Users: []string{"una"}},
	}
	var principals []policies.Principal
	for _, name := range []string{"tina", "tom", "una", "noel", "vera"} {
		for _, rs := range [][]string{{"superuser"}, {"params", "exact"}, {"exact", "actions"}, {"rbac", "users"}, {"empty", "missing"}} {
			principals = append(principals, user(name, rs...))
		}
	}
	restricted := user("noel", "params", "exact")
	restricted.TokenRoles = []string{"params"}
	principals = append(principals, restricted)
	restricted = user("tina", "superuser")
	restricted.Restrict = []backend.Claim{claim("machines", "get", "*")}
	principals = append(principals, restricted, policies.Principal{Kind: "machine", Name: "m1", MachineToken: "operations"})
	direct := user("noel")
	direct.Claims = []backend.Claim{claim("machines", "get", "m1")}
	principals = append(principals, direct)

	var wanted []backend.Claim
	for _, scope := range []string{"machines", "pools", "roles", "tenants", "users", "info", "bogus"} {
		for _, action := range []string{"get", "list", "update", "update:", "update:/Params", "update:/Params/a",
			"update:/Params/a/b", "update:/Name", "update:Params", "action", "action:x", "password", "bogus"} {
			for _, specific := range []string{"", "m1", "m2", "p1", "noel", "*"} {
				wanted = append(wanted, claim(scope, action, specific))
			}
		}
	}
	objects := []*policies.Object{nil, {Scope: "machines", Key: "m1"}, {Scope: "machines", Key: "m3"}, {Scope: "pools", Key: "p1"}, {Scope: "roles", Key: "params"}}

	mods, err := parse(map[string]string{"plainveto.rego": plainVeto})
	if err != nil {
		t.Fatal(err)
	}
	embedded, err := parse(policies.Policies())
	if err != nil {
		t.Fatal(err)
	}
	for name, m := range embedded {
		mods[name] = m
	}
	c := ast.NewCompiler()
	if c.Compile(mods); c.Failed() {
		t.Fatal(c.Errors)
	}
	for _, lic := range []policies.LicenseData{{Valid: true, Features: []string{"rbac"}}, {}} {
		store := inmem.NewFromObject(map[string]any{"provgate": toAny(policies.NewData(roles, tenants, lic))})
		prepare := func(query string) rego.PreparedEvalQuery {
			pq, err := rego.New(rego.Query(query), rego.Compiler(c), rego.Store(store)).PrepareForEval(ctx)
			if err != nil {
				t.Fatal(err)
			}
			return pq
		}
		both, plain := prepare("x := [data.provgate.authz.decision, data.provgate.authz.outcome]"), prepare("data.provgate.authz.plainly_allowed")
		passed, other, n := 0, 0, 0
		for _, p := range principals {
			for _, w := range wanted {
				for i, obj := range objects {
					// Every sixth combination, so that each principal,
					// claim and object still meets the others.
					if n++; n%6 != 0 {
						continue
					}
					in := request(p, w)
					in.Object, in.Method = obj, "PATCH"
					if i%2 == 0 {
						in.Method = "GET"
					}
					if w.Action == "get" && w.Specific == "m2" {
						// Two claims: never decided by the pass.
						in.Required = append(in.Required, claim("machines", "get", "m1"))
					}
					value, err := inputValue(in)
					if err != nil {
						t.Fatal(err)
					}
					rs, err := both.Eval(ctx, rego.EvalParsedInput(value))
					if err != nil || len(rs) != 1 {
						t.Fatalf("%+v: %v %v", in, rs, err)
					}
					got := rs[0].Bindings["x"].([]any)
					if !reflect.DeepEqual(got[0], got[1]) {
						t.Fatalf("%+v %v %v: decision %v, outcome %v", p, in.Required, obj, got[0], got[1])
					}
					rs, err = plain.Eval(ctx, rego.EvalParsedInput(value))
					if err != nil {
						t.Fatal(err)
					}
					if len(rs) == 1 {
						passed++
						if d, _ := decisionValue(got[1]); !d.Allow {
							t.Fatalf("%+v %v %v: plainly allowed, outcome %v", p, in.Required, obj, got[1])
						}
					} else {
						other++
					}
				}
			}
		}
		t.Logf("license %v: %d decided by the one pass, %d by outcome alone", lic.Valid, passed, other)
		if passed < 100 || other < 100 {
			t.Errorf("license %v: %d decided by the one pass, %d by outcome alone: the comparison needs both", lic.Valid, passed, other)
		}
	}
}
