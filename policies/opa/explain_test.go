package opa

import (
	"context"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/provgate/provgate/backend"
	"github.com/provgate/provgate/policies"
)

// Explain gives the decision Decide gives for the same input, and a trail
// whose per-claim verdicts are that decision's (docs/design.md §9.8).
func TestExplainAgreesWithDecide(t *testing.T) {
	e := newTestEngine(t, Options{CacheSize: -1})
	ctx := context.Background()
	tokenRoles := user("u", "reader", "operator")
	tokenRoles.TokenRoles = []string{"operator"}
	restricted := user("olga", "operator")
	restricted.Restrict = []backend.Claim{claim("pools", "get", "*")}
	hidden := request(user("tina", "superuser"), claim("machines", "get", "m3"))
	hidden.Object = &policies.Object{Scope: "machines", Key: "m3"}
	list := request(user("tina", "reader"), claim("machines", "list", ""))
	list.List = &policies.ListRequest{Scope: "machines"}
	for name, in := range map[string]policies.Input{
		"role allows":       request(user("olga", "operator"), claim("machines", "get", "m1")),
		"missing claim":     request(user("olga", "operator"), claim("pools", "update:/Description", "p3"), claim("machines", "get", "m1")),
		"self":              request(user("nobody"), claim("users", "password", "nobody")),
		"token roles":       request(tokenRoles, claim("machines", "get", "m1")),
		"restricted":        request(restricted, claim("pools", "get", "p1"), claim("machines", "get", "m1")),
		"tenant hides":      hidden,
		"list":              list,
		"no claim":          request(user("olga", "operator")),
		"malformed claim":   request(user("olga", "operator"), claim("machines", "get,list", "m1")),
		"superuser license": request(user("root", "superuser"), claim("roles", "create", "r")),
	} {
		t.Run(name, func(t *testing.T) {
			d, err := e.Decide(ctx, in)
			if err != nil {
				t.Fatal(err)
			}
			x, err := e.Explain(ctx, in)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(x.Decision, d) {
				t.Fatalf("Explain decision %+v, Decide %+v", x.Decision, d)
			}
			if x.Trail == nil || len(x.Trail.Claims) != len(in.Required) {
				t.Fatalf("trail %+v for %d claims", x.Trail, len(in.Required))
			}
			if x.DecisionID == "" || x.Revision != e.Revision() {
				t.Errorf("id %q revision %q, want %q", x.DecisionID, x.Revision, e.Revision())
			}
			all := len(in.Required) > 0
			for _, s := range x.Trail.Claims {
				all = all && s.Held && s.Licensed
			}
			if x.Trail.Tenant.Hidden != d.NotFound {
				t.Errorf("trail hidden %v, decision not_found %v", x.Trail.Tenant.Hidden, d.NotFound)
			}
			if !d.NotFound && all != (d.Allow || len(x.Trail.Vetoes) > 0) {
				t.Errorf("claims all held %v, decision allow %v", all, d.Allow)
			}
		})
	}
}

func TestExplainNamesCoveringRoleAndHidingTenant(t *testing.T) {
	e := newTestEngine(t, Options{CacheSize: -1})
	ctx := context.Background()
	x, err := e.Explain(ctx, request(user("olga", "operator"), claim("pools", "update:/Description", "p3"), claim("machines", "get", "m1")))
	if err != nil {
		t.Fatal(err)
	}
	s0, s1 := x.Trail.Claims[0], x.Trail.Claims[1]
	if s0.Held || len(s0.CoveredBy) != 0 || !reflect.DeepEqual(s0.GrantedBy, []string{"superuser"}) {
		t.Errorf("first step %+v", s0)
	}
	want := []policies.Cover{{Source: "role", Role: "operator", Claim: "machines get,list,action:callbackDo *"}}
	if !s1.Held || !reflect.DeepEqual(s1.CoveredBy, want) {
		t.Errorf("second step %+v, want covered by %+v", s1, want)
	}
	in := request(user("tina", "superuser"), claim("machines", "get", "m3"))
	in.Object = &policies.Object{Scope: "machines", Key: "m3"}
	if x, err = e.Explain(ctx, in); err != nil {
		t.Fatal(err)
	}
	if !x.Decision.NotFound || !reflect.DeepEqual(x.Trail.Tenant.HiddenBy, []string{"t1"}) {
		t.Errorf("decision %+v tenant step %+v", x.Decision, x.Trail.Tenant)
	}
}

// A replayed explanation sees the logged time: the fresh_token example
// refuses an old token at the logged time and allows it an hour earlier.
func TestExplainReplayUsesLoggedTime(t *testing.T) {
	e := extEngine(t, filepath.Join(examples, "fresh_token"), Options{CacheSize: -1})
	ctx := context.Background()
	issued := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	p := user("alice", "superuser")
	p.Auth = &policies.Auth{Method: policies.AuthBearer, Kind: policies.TokenUser, IssuedAt: issued.Unix(), ExpiresAt: issued.Add(time.Hour).Unix()}
	in := request(p, claim("users", "update:/Roles", "bob"))
	in.Method = "PATCH"
	late, err := e.ExplainReplay(ctx, in, policies.Replay{At: issued.Add(11 * time.Minute).UnixNano()})
	if err != nil {
		t.Fatal(err)
	}
	early, err := e.ExplainReplay(ctx, in, policies.Replay{At: issued.Add(time.Minute).UnixNano()})
	if err != nil {
		t.Fatal(err)
	}
	if late.Decision.Allow || len(late.Trail.Vetoes) != 1 || late.Trail.Vetoes[0].Package != "fresh_token" {
		t.Errorf("11 minutes after issue: %+v %+v", late.Decision, late.Trail.Vetoes)
	}
	if !early.Decision.Allow || len(early.Trail.Vetoes) != 0 {
		t.Errorf("1 minute after issue: %+v %+v", early.Decision, early.Trail.Vetoes)
	}
}

// The license step of a trail written from the explanation's pass values
// is the policy's license check, answered once per license: it follows
// every change of the license (docs/design.md §9.8).
func TestExplainLicenseStepFollowsTheLicense(t *testing.T) {
	ctx := context.Background()
	e, err := New(ctx, Options{CacheSize: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if p := e.policy.Load(); !p.explainPass || !p.licensedByLicense {
		t.Fatalf("the embedded policy: explanation %v, license check by the license alone %v", p.explainPass, p.licensedByLicense)
	}
	in := benchInput()
	for i, lic := range []policies.LicenseData{
		{Valid: true, Features: []string{"rbac"}},
		{Valid: false, Features: []string{"rbac"}},
		{Valid: true, Features: []string{"rbac"}},
		{Valid: true, Features: []string{}},
		{},
		{Valid: true, Features: []string{"rbac"}},
	} {
		data := benchData(10)
		data.License = lic
		if err := e.SetData(ctx, data); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			x, err := e.Explain(ctx, in)
			if err != nil || !x.Decision.Allow || x.Trail == nil {
				t.Fatalf("license %d %+v: %+v %v", i, lic, x, err)
			}
			want := lic.Valid && len(lic.Features) == 1
			if x.Trail.License.Licensed != want || len(x.Trail.License.Failures) != 0 {
				t.Errorf("license %d %+v: license step %+v, want licensed %v", i, lic, x.Trail.License, want)
			}
		}
	}
}

// A license check that reads the input is evaluated with each request's
// input (and gives the same license step).
func TestExplainLicenseStepReadingInput(t *testing.T) {
	ctx := context.Background()
	modules := policies.Policies()
	const check = "licensed if {\n\tdata.provgate.license.valid == true\n"
	if !strings.Contains(modules["authz.rego"], check) {
		t.Fatalf("authz.rego has no %q", check)
	}
	modules["authz.rego"] = strings.Replace(modules["authz.rego"], check, check+"\tinput.principal.kind == \"user\"\n", 1)
	e, err := newEngine(ctx, Options{CacheSize: -1}, modules)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if p := e.policy.Load(); !p.explainPass || p.licensedByLicense {
		t.Fatalf("explanation %v, license check by the license alone %v", p.explainPass, p.licensedByLicense)
	}
	for _, valid := range []bool{true, false, true} {
		data := benchData(10)
		data.License.Valid = valid
		if err := e.SetData(ctx, data); err != nil {
			t.Fatal(err)
		}
		x, err := e.Explain(ctx, benchInput())
		if err != nil || !x.Decision.Allow || x.Trail == nil {
			t.Fatalf("%+v %v", x, err)
		}
		if x.Trail.License.Licensed != valid {
			t.Errorf("license valid %v: license step %+v", valid, x.Trail.License)
		}
	}
}

// licenseOnly holds for rules reading data.provgate.license alone.
func TestLicenseOnly(t *testing.T) {
	for src, want := range map[string]bool{
		"licensed if {\n\tdata.provgate.license.valid == true\n\t\"rbac\" in data.provgate.license.features\n}": true,
		"licensed if data.provgate.license.valid == true\n\nlicensed if input.principal.name == \"root\"":       false,
		"licensed if input.licensed":                                         false,
		"licensed if data.provgate.roles.admin":                              false,
		"licensed if other\n\nother if data.provgate.license.valid":          false,
		"licensed if f(1)\n\nf(x) := x":                                      false,
		"licensed if time.now_ns() < data.provgate.license.expires":          false,
		"licensed if time.parse_rfc3339_ns(data.provgate.license.until) > 0": true,
	} {
		c, err := ast.CompileModules(map[string]string{"authz.rego": "package provgate.authz\n\n" + src + "\n"})
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		if got := licenseOnly(c.GetRulesExact(ast.MustParseRef(LicensedPath))); got != want {
			t.Errorf("%s: licenseOnly %v, want %v", src, got, want)
		}
	}
}
