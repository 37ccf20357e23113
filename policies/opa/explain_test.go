package opa

import (
	"context"
	"path/filepath"
	"reflect"
	"testing"
	"time"

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
