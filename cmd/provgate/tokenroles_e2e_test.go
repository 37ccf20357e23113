package main

import (
	"slices"
	"strings"
	"testing"
)

// TestE2ETokenRolesAnswered: a token request with roles= answers which
// roles the token carries and which were dropped (DRP's reply otherwise
// unchanged), and a 403 caused by a token's restriction says so.
func TestE2ETokenRolesAnswered(t *testing.T) {
	forEachDB(t, func(t *testing.T, s *tserver) {
		s.AddRole("tr-ops", [3]string{"machines", "get,list", "*"})
		s.AddRole("tr-prof", [3]string{"profiles", "get,list", "*"})
		s.AddUser("tr-bob", "tr-bob-Pa55", "tr-ops", "tr-prof")
		bob := basic("tr-bob", "tr-bob-Pa55")

		type reply struct {
			Token        string
			Info         map[string]any
			Roles        []string
			DroppedRoles []string
		}
		var r reply
		raw := s.Must(200, "GET", "/users/tr-bob/token?roles=tr-ops,superuser,tr-nope,tr-ops", nil, bob)
		raw.JSON(t, &r)
		if r.Token == "" || r.Info["version"] == nil {
			t.Fatalf("not DRP's token reply: %s", raw.Body)
		}
		if !slices.Equal(r.Roles, []string{"tr-ops"}) || !slices.Equal(r.DroppedRoles, []string{"superuser", "tr-nope"}) {
			t.Fatalf("kept %q, dropped %q; want [tr-ops], [superuser tr-nope]", r.Roles, r.DroppedRoles)
		}
		restricted := bearer(r.Token)

		// Without roles= the reply is DRP's, member for member.
		m := s.Must(200, "GET", "/users/tr-bob/token", nil, bob).Map(t)
		if len(m) != 2 || m["Token"] == nil || m["Info"] == nil {
			t.Fatalf("plain token reply %v, want exactly Token and Info", m)
		}
		// A restricted token refreshing itself says what it passes on.
		var again reply
		s.Must(200, "GET", "/users/tr-bob/token", nil, restricted).JSON(t, &again)
		if !slices.Equal(again.Roles, []string{"tr-ops"}) || again.DroppedRoles != nil {
			t.Fatalf("refresh kept %q, dropped %q", again.Roles, again.DroppedRoles)
		}
		var none reply
		s.Must(200, "GET", "/users/tr-bob/token?roles=tr-prof", nil, restricted).JSON(t, &none)
		if none.Roles == nil || len(none.Roles) != 0 || !slices.Equal(none.DroppedRoles, []string{"tr-prof"}) {
			t.Fatalf("a role outside the asking token's: kept %q, dropped %q", none.Roles, none.DroppedRoles)
		}

		// The restriction refuses what bob's roles allow, and says so.
		s.Must(200, "GET", "/machines", nil, restricted)
		e := wantDRPError(t, s.Do("GET", "/profiles", nil, restricted), 403, "AUTH", "Requires: profiles list")
		if !strings.Contains(e.messages(), "refused by this token's restriction (roles [tr-ops])") {
			t.Fatalf("403 does not name the token's restriction: %s", e.messages())
		}
		var scoped reply
		s.Must(200, "GET", "/users/tr-bob/token?scope=machines&action=list", nil, bob).JSON(t, &scoped)
		m1 := s.AddMachine("tr-m1", nil)
		s.Must(200, "GET", "/machines/"+m1, nil, bob)
		e = wantDRPError(t, s.Do("GET", "/machines/"+m1, nil, bearer(scoped.Token)), 403, "AUTH", "Requires: machines get "+m1)
		if !strings.Contains(e.messages(), "refused by this token's restriction (claim machines list *)") {
			t.Fatalf("403 does not name the token's claim restriction: %s", e.messages())
		}
		// A refusal bob's own roles give too is not blamed on the token, and
		// Basic has no restriction to blame.
		for _, authz := range []string{restricted, bob} {
			e = wantDRPError(t, s.Do("GET", "/users", nil, authz), 403, "AUTH", "Requires: users list")
			if strings.Contains(e.messages(), "restriction") {
				t.Fatalf("refusal blamed on a restriction: %s", e.messages())
			}
		}
	}, licenseArgs(t)...)
}
