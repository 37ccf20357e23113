package main

import (
	"testing"
)

// End-to-end proof of the authentication and authorization rules
// (docs/design.md §4.8, §5-§8) through the real HTTP API on every database.
// This file holds users and the self claim; the other concerns live in
// tokens_e2e_test.go (tokens, authentication, machine tokens, Secret
// rotation, login limits), claims_e2e_test.go (claim forms, roles,
// tenants) and license_e2e_test.go.

// TestE2EAccess runs the access checks that can share one server per
// database: each works on objects of its own (named by a prefix) and
// changes nothing the others rely on.
func TestE2EAccess(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, s *tserver) {
		t.Run("users", func(t *testing.T) { accessUsers(t, s.On(t)) })
		t.Run("tokens", func(t *testing.T) { accessTokens(t, s.On(t)) })
		t.Run("authentication", func(t *testing.T) { accessAuthentication(t, s.On(t)) })
		t.Run("self claim", func(t *testing.T) { accessSelf(t, s.On(t)) })
		t.Run("claim forms", func(t *testing.T) { accessClaimForms(t, s.On(t)) })
		t.Run("roles", func(t *testing.T) { accessRoles(t, s.On(t)) })
		t.Run("tenants", func(t *testing.T) { accessTenants(t, s.On(t)) })
		t.Run("machine tokens", func(t *testing.T) { accessMachineTokens(t, s.On(t)) })
	}, licenseArgs(t)...)
}

func accessUsers(t *testing.T, s *tserver) {
	created := s.Must(201, "POST", "/users", map[string]any{"Name": "u-pw", "Password": "u-pw-secret", "Roles": []string{}}, admin())
	createdNoPw := s.Must(201, "POST", "/users", map[string]any{"Name": "u-nopw", "Roles": []string{}}, admin())
	cases := []struct {
		name string
		r    func() resp
	}{
		{"create with password", func() resp { return created }},
		{"create without password", func() resp { return createdNoPw }},
		{"get", func() resp { return s.Must(200, "GET", "/users/u-pw", nil, admin()) }},
		{"get by Name index", func() resp { return s.Must(200, "GET", "/users/Name:u-pw", nil, admin()) }},
		{"list", func() resp { return s.Must(200, "GET", "/users", nil, admin()) }},
		{"list filtered", func() resp { return s.Must(200, "GET", "/users?Name=u-pw", nil, admin()) }},
		{"self get", func() resp { return s.Must(200, "GET", "/users/u-pw", nil, basic("u-pw", "u-pw-secret")) }},
		{"patch", func() resp {
			return s.Must(200, "PATCH", "/users/u-pw", jsonPatch("replace", "/Description", "patched"), admin())
		}},
		{"put", func() resp {
			return s.Must(200, "PUT", "/users/u-nopw", map[string]any{"Name": "u-nopw", "Description": "put", "Roles": []string{}}, admin())
		}},
		{"password change", func() resp {
			return s.Must(200, "PUT", "/users/u-nopw/password", map[string]any{"Password": "now-set-1"}, admin())
		}},
		{"delete", func() resp {
			s.Must(201, "POST", "/users", map[string]any{"Name": "u-del", "Password": "x-y-z-1", "Roles": []string{}}, admin())
			return s.Must(200, "DELETE", "/users/u-del", nil, admin())
		}},
	}
	for _, c := range cases {
		t.Run("no secrets in "+c.name, func(t *testing.T) { wantNoSecrets(t, c.name, c.r().Body) })
	}
	t.Run("user without password cannot log in", func(t *testing.T) {
		s := s.On(t)
		s.Must(403, "GET", "/users/u-x", nil, basic("u-x-none", ""))
		s.Must(201, "POST", "/users", map[string]any{"Name": "u-x", "Roles": []string{}}, admin())
		s.Must(403, "GET", "/users/u-x", nil, basic("u-x", ""))
		s.Must(403, "GET", "/users/u-x", nil, basic("u-x", "anything"))
	})
	t.Run("password change", func(t *testing.T) {
		s := s.On(t)
		s.AddUser("u-chg", "old-pass-1")
		tok := s.Token("u-chg", basic("u-chg", "old-pass-1"), "")
		other := s.Token("u-pw", basic("u-pw", "u-pw-secret"), "")
		s.Must(200, "GET", "/users/u-chg", nil, bearer(tok))
		r := s.Must(200, "PUT", "/users/u-chg/password", map[string]any{"Password": "new-pass-2"}, basic("u-chg", "old-pass-1"))
		wantNoSecrets(t, "password reply", r.Body)
		s.Must(403, "GET", "/users/u-chg", nil, basic("u-chg", "old-pass-1"))
		s.Must(200, "GET", "/users/u-chg", nil, basic("u-chg", "new-pass-2"))
		s.Must(403, "GET", "/users/u-chg", nil, bearer(tok))
		s.Must(200, "GET", "/users/u-pw", nil, bearer(other))
		s.Must(400, "PUT", "/users/u-chg/password", map[string]any{"Password": ""}, admin())
		s.Must(404, "PUT", "/users/nobody/password", map[string]any{"Password": "x-y-z-1"}, admin())
	})
}

func accessSelf(t *testing.T, s *tserver) {
	s.AddUser("s-loner", "s-loner-pw")
	s.AddUser("s-other", "s-other-pw")
	cases := []struct {
		name, method, path string
		body               any
		want               int
		msg                string
	}{
		{"get itself", "GET", "/users/s-loner", nil, 200, ""},
		{"token for itself", "GET", "/users/s-loner/token", nil, 200, ""},
		{"info", "GET", "/info", nil, 200, ""},
		{"list users", "GET", "/users", nil, 403, "Requires: users list"},
		{"get another user", "GET", "/users/s-other", nil, 403, "Requires: users get s-other"},
		{"token for another user", "GET", "/users/s-other/token", nil, 403, "Requires: users token s-other"},
		{"other's password", "PUT", "/users/s-other/password", map[string]any{"Password": "hijack-1"}, 403, "Requires: users password s-other"},
		{"patch itself", "PATCH", "/users/s-loner", jsonPatch("replace", "/Roles", []string{"superuser"}), 403, "Requires: users update:/Roles s-loner"},
		{"list machines", "GET", "/machines", nil, 403, "Requires: machines list"},
		{"delete itself", "DELETE", "/users/s-loner", nil, 403, "Requires: users delete s-loner"},
	}
	for _, authKind := range []string{"basic", "token"} {
		t.Run(authKind, func(t *testing.T) {
			s := s.On(t)
			authz := basic("s-loner", "s-loner-pw")
			if authKind == "token" {
				authz = bearer(s.Token("s-loner", authz, ""))
			}
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					s := s.On(t)
					r := s.Do(c.method, c.path, c.body, authz)
					if r.Status != c.want {
						t.Fatalf("got %s, want %d", r, c.want)
					}
					if c.msg != "" {
						wantDRPError(t, r, c.want, "", c.msg)
					}
				})
			}
		})
	}
	t.Run("change own password", func(t *testing.T) {
		s := s.On(t)
		s.Must(200, "PUT", "/users/s-loner/password", map[string]any{"Password": "s-loner-pw2"}, basic("s-loner", "s-loner-pw"))
		s.Must(200, "GET", "/users/s-loner", nil, basic("s-loner", "s-loner-pw2"))
		tok := s.Token("s-loner", basic("s-loner", "s-loner-pw2"), "")
		s.Must(200, "PUT", "/users/s-loner/password", map[string]any{"Password": "s-loner-pw3"}, bearer(tok))
		s.Must(200, "GET", "/info", nil, basic("s-loner", "s-loner-pw3"))
	})
}
