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

// plainWorld is the world both one-pass comparisons run over: roles,
// tenants, the principals, wanted claims and objects, and the embedded
// policy compiled with an extension that vetoes.
type plainWorld struct {
	compiler   *ast.Compiler
	roles      []backend.Role
	tenants    []backend.Tenant
	principals []policies.Principal
	wanted     []backend.Claim
	objects    []*policies.Object
}

func newPlainWorld(t *testing.T) plainWorld {
	t.Helper()
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
		for _, rs := range [][]string{{"superuser"}, {"params", "exact"}, {"exact", "actions"}, {"rbac", "users"}, {"empty", "missing"}, {"params", "superuser"}} {
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
	// Direct claims beside roles: the pass can allow through a role
	// while a direct claim covers too.
	direct = user("noel", "params", "exact")
	direct.Claims = []backend.Claim{claim("machines", "get,update", "m1,m3")}
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
	return plainWorld{compiler: c, roles: roles, tenants: tenants, principals: principals, wanted: wanted, objects: objects}
}

// prepare prepares query against the world's data with license lic.
func (w plainWorld) prepare(t *testing.T, lic policies.LicenseData, query string) rego.PreparedEvalQuery {
	t.Helper()
	store := inmem.NewFromObject(map[string]any{"provgate": toAny(policies.NewData(w.roles, w.tenants, lic))})
	pq, err := rego.New(rego.Query(query), rego.Compiler(w.compiler), rego.Store(store)).PrepareForEval(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return pq
}

// each calls fn with every sixth request of the world, as a policy input.
// The sixth is shifted by the principal, so that each claim meets every
// object (each principal has as many requests as a multiple of six).
func (w plainWorld) each(t *testing.T, fn func(in policies.Input, value ast.Value)) {
	t.Helper()
	n := 0
	for pi, p := range w.principals {
		for _, c := range w.wanted {
			for i, obj := range w.objects {
				if n++; (n+pi)%6 != 0 {
					continue
				}
				in := request(p, c)
				in.Object, in.Method = obj, "PATCH"
				if i%2 == 0 {
					in.Method = "GET"
				}
				if c.Action == "get" && c.Specific == "m2" {
					// Two claims: never decided by the pass.
					in.Required = append(in.Required, claim("machines", "get", "m1"))
				}
				value, err := inputValue(in)
				if err != nil {
					t.Fatal(err)
				}
				fn(in, value)
			}
		}
	}
}

// authz.plainly_allowed decides the common request in one pass; outcome
// decides every request step by step. Wherever the pass allows, outcome
// must allow too, so the decision equals outcome for every request that
// is not a list. Compared here over principals (tenants, token roles,
// restrictions, machines, vetoes), objects the tenant lists or hides,
// wanted claims of every form, and both licenses; the pass must also
// actually decide some of them, or the comparison would say nothing.
func TestPlainlyAllowedAgreesWithOutcome(t *testing.T) {
	ctx := context.Background()
	world := newPlainWorld(t)
	for _, lic := range []policies.LicenseData{{Valid: true, Features: []string{"rbac"}}, {}} {
		both := world.prepare(t, lic, "x := [data.provgate.authz.decision, data.provgate.authz.outcome]")
		plain := world.prepare(t, lic, "data.provgate.authz.plainly_allowed")
		passed, other := 0, 0
		world.each(t, func(in policies.Input, value ast.Value) {
			p, obj := in.Principal, in.Object
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
		})
		t.Logf("license %v: %d decided by the one pass, %d by outcome alone", lic.Valid, passed, other)
		if passed < 100 || other < 100 {
			t.Errorf("license %v: %d decided by the one pass, %d by outcome alone: the comparison needs both", lic.Valid, passed, other)
		}
	}
}

// For every request the one pass allows, the explain trail is written
// from its lookups: by the policy's trail (policies/explain.rego) and, from
// the values the explanation hands over, by the server
// (explanationFrom). Both must be the trail the step rules give
// (tenant_step, license_step, claim_step, veto_steps). Compared for every
// allowed request of the world, so that the other written-out trail (an
// allowed request of an unrestricted token) and the explanation that
// carries a whole trail are compared as well. A refused request's trail is
// the step rules' own (explain.rego's last branch), so comparing it would
// compare the steps with themselves: the decision is asked first and only
// allowed requests are compared.
func TestExplainTrailIsTheStepsTrail(t *testing.T) {
	ctx := context.Background()
	world := newPlainWorld(t)
	const query = `x := [data.provgate.explain.trail, {
		"tenant": data.provgate.explain.tenant_step,
		"license": data.provgate.explain.license_step,
		"claims": [data.provgate.explain.claim_step(c) | some c in input.required],
		"vetoes_consulted": data.provgate.explain.vetoes_consulted,
		"vetoes": data.provgate.explain.veto_steps,
	}, {true | data.provgate.authz.plainly_allowed}, data.provgate.explain.explanation]`
	for _, lic := range []policies.LicenseData{{Valid: true, Features: []string{"rbac"}}, {}} {
		pq := world.prepare(t, lic, query)
		allowed := world.prepare(t, lic, "data.provgate.authz.decision.allow")
		passed, compared, covers := 0, 0, map[string]int{}
		world.each(t, func(in policies.Input, value ast.Value) {
			rs, err := allowed.Eval(ctx, rego.EvalParsedInput(value))
			if err != nil || len(rs) != 1 {
				t.Fatalf("%+v: %v %v", in, rs, err)
			}
			if rs[0].Expressions[0].Value != true {
				return
			}
			compared++
			rs, err = pq.Eval(ctx, rego.EvalParsedInput(value), rego.EvalGenerateJSON(asTerm))
			if err != nil || len(rs) != 1 {
				t.Fatalf("%+v: %v %v", in, rs, err)
			}
			got := rs[0].Bindings["x"].(*ast.Term).Value.(*ast.Array)
			if !got.Elem(0).Equal(got.Elem(1)) {
				t.Fatalf("%+v %v %v:\ntrail %v\nsteps %v", in.Principal, in.Required, in.Object, got.Elem(0), got.Elem(1))
			}
			steps, err := trailFrom(got.Elem(1))
			if err != nil {
				t.Fatal(err)
			}
			written, err := explanationFrom(got.Elem(3), in)
			if err != nil {
				t.Fatalf("%+v %v %v: %v", in.Principal, in.Required, in.Object, err)
			}
			if !reflect.DeepEqual(written, steps) {
				t.Fatalf("%+v %v %v:\nexplanation %v\nwritten %+v\nsteps %+v", in.Principal, in.Required, in.Object, got.Elem(3), written, steps)
			}
			if got.Elem(2).Value.(ast.Set).Len() == 1 {
				passed++
				if _, ok := got.Elem(3).Value.(ast.Object).Get(ast.StringTerm("pass")).Value.(ast.Object); !ok {
					t.Fatalf("%+v %v %v: plainly allowed, explained by %v", in.Principal, in.Required, in.Object, got.Elem(3))
				}
				for _, step := range written.Claims {
					for _, c := range step.CoveredBy {
						covers[c.Source]++
					}
				}
			}
		})
		t.Logf("license %v: %d allowed requests compared, %d trails written for the one pass, naming covers %v", lic.Valid, compared, passed, covers)
		if passed < 100 || compared <= passed || covers["role"] <= passed || covers["self"] == 0 || covers["claim"] == 0 {
			t.Errorf("license %v: %d trails written for the one pass, covers %v: the comparison needs them", lic.Valid, passed, covers)
		}
	}
}
