package opa

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/provgate/provgate/backend"
	"github.com/provgate/provgate/policies"
)

// TestEmbeddedNameReads pins the rules of the embedded policy that read a
// user's name or grantor (or the principal as a whole). Questions groups
// users by everything else (principalNameBlind trusts the embedded
// modules), which is sound because each of these only looks the tenant up
// or compares the name with the input's object key or required specifics
// (groupKey decides such inputs alone): a new rule reading the name must
// be reviewed against that and added here.
func TestEmbeddedNameReads(t *testing.T) {
	c := compileFiles(t, policies.Policies())
	var got []string
	for _, m := range c.Modules {
		for _, r := range m.Rules {
			reads := false
			ast.WalkRefs(r, func(ref ast.Ref) bool {
				if !ref[0].Equal(ast.InputRootDocument) || len(ref) < 2 || !ref[1].Equal(ast.StringTerm("principal")) {
					return false
				}
				if len(ref) == 2 || ref[2].Equal(ast.StringTerm("name")) || ref[2].Equal(ast.StringTerm("grantor")) {
					reads = true
				}
				return false
			})
			if name := m.Package.Path.String() + "." + r.Head.Name.String(); reads && !slices.Contains(got, name) {
				got = append(got, name)
			}
		}
	}
	slices.Sort(got)
	want := []string{
		"data.provgate.authz.own_key",           // restricted_credential: names the principal to compare it with itself
		"data.provgate.authz.shown_to_user",     // user_tenant[name]
		"data.provgate.explain.explanation",     // user_tenant[name]: the tenants of a one-pass trail
		"data.provgate.explain.trail",           // user_tenant[name]: the tenant step of a one-pass trail
		"data.provgate.grants.claim_restricted", // object.get(input.principal, "restrict", [])
		"data.provgate.grants.delegated",        // the grant check's subject (input.grants)
		"data.provgate.grants.job_claims",       // object.get(input.principal, "claims", [])
		"data.provgate.grants.own",              // self claims: the own key, compared with required specifics
		"data.provgate.grants.own_credential",   // compared with a required specific
		"data.provgate.grants.own_specific",     // compared with a required specific
		"data.provgate.grants.restrict",         // object.get(input.principal, "restrict", [])
		"data.provgate.tenancy.other_machine",   // operations tokens (machines) only
		"data.provgate.tenancy.tenant_names",    // user_tenant[name], machine_tenants[name], user_tenant[grantor]
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("embedded rules reading the principal's name:\n got %q\nwant %q", got, want)
	}
}

func TestPrincipalNameBlind(t *testing.T) {
	for _, tc := range []struct {
		ext   string
		blind bool
	}{
		{"package provgate.ext.a\ndeny contains \"x\" if input.method == \"DELETE\"", true},
		{"package provgate.ext.a\ndeny contains \"x\" if input.principal.roles[_] == \"r\"", true},
		{"package provgate.ext.a\ndeny contains \"x\" if input.principal.name == \"bob\"", false},
		{"package provgate.ext.a\ndeny contains \"x\" if startswith(input.principal.grantor, \"b\")", false},
		{"package provgate.ext.a\ndeny contains \"x\" if { p := input.principal; p.name == \"bob\" }", false},
		{"package provgate.ext.a\ndeny contains \"x\" if { walk(input, [_, v]); v == \"bob\" }", false},
		{"package provgate.ext.a\ndeny contains \"x\" if { some k; input[k] == \"bob\" }", false},
		{"package provgate.ext.a\ndeny contains \"x\" if data.provgate.grants.own.keys.bob", false},
		{"package provgate.ext.a\ndeny contains \"x\" if data.provgate.tenancy.hidden", true},
	} {
		sources := policies.Policies()
		sources["ext.rego"] = tc.ext
		mods, err := parse(sources)
		if err != nil {
			t.Fatal(err)
		}
		c := ast.NewCompiler()
		if c.Compile(mods); c.Failed() {
			t.Fatalf("%s: %v", tc.ext, c.Errors)
		}
		if got := principalNameBlind(c, sources); got != tc.blind {
			t.Errorf("%q: name blind %v, want %v", tc.ext, got, tc.blind)
		}
	}
}

// TestQuestionsAgreeWithQuestion: grouped answers equal one decision per
// input, for users of the same roles in and out of tenants, the user the
// question names, and after the data changes.
func TestQuestionsAgreeWithQuestion(t *testing.T) {
	ctx := context.Background()
	e, err := New(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	roles := []backend.Role{
		{Name: "reader", Claims: []backend.Claim{claim("machines", "get", "*"), claim("users", "get", "*")}},
		{Name: "one", Claims: []backend.Claim{claim("machines", "get", "m-1")}},
	}
	data := func(hideFromT1 bool) policies.Data {
		members := map[string][]string{"machines": {"m-1"}}
		if hideFromT1 {
			members["machines"] = []string{}
		}
		return policies.NewData(roles, []backend.Tenant{{Name: "t1", Users: []string{"u-2", "u-3"}, Members: members}},
			policies.LicenseData{Valid: true, Features: []string{"rbac"}})
	}
	var ins []policies.Input
	for i := range 6 {
		role := "reader"
		if i%3 == 2 {
			role = "one"
		}
		for _, q := range []struct{ scope, action, key string }{
			{"machines", "get", "m-1"}, {"machines", "get", "m-2"}, {"users", "get", "u-1"}, {"users", "password", "u-4"},
		} {
			in := request(user(fmt.Sprintf("u-%d", i), role), claim(q.scope, q.action, q.key))
			in.Object = &policies.Object{Scope: q.scope, Key: q.key}
			ins = append(ins, in)
		}
	}
	for _, hide := range []bool{false, true} {
		if err := e.SetData(ctx, data(hide)); err != nil {
			t.Fatal(err)
		}
		// Twice: the second batch reads the groups' cached decisions.
		for range 2 {
			got, err := e.Questions(ctx, ins)
			if err != nil {
				t.Fatal(err)
			}
			for i, in := range ins {
				want, err := e.Question(ctx, in)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got[i], want) {
					t.Errorf("hide %v: %s %v: grouped %+v, alone %+v", hide, in.Principal.Name, in.Required, got[i], want)
				}
			}
		}
	}
}
