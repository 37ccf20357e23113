package main

import (
	"strings"
	"testing"
)

// TestE2ESuperuserRoleReadOnly: an administrator's mistaken
// "drpcli roles update superuser" (a patch emptying its claims) or a PUT is
// refused with 400 readonly, a delete with 409 in use, and the
// administrator keeps every right, on SQLite and PostgreSQL.
func TestE2ESuperuserRoleReadOnly(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, s *tserver) {
		r := s.Must(200, "GET", "/roles/superuser", nil, admin())
		if m := r.Map(t); m["ReadOnly"] != true {
			t.Fatalf("superuser role not read-only: %s", r)
		}
		for _, c := range []struct {
			method string
			body   any
		}{
			{"PATCH", `[{"op":"replace","path":"/Claims","from":"","value":[]}]`},
			{"PUT", map[string]any{"Name": "superuser", "Claims": []any{}}},
		} {
			r := s.Must(400, c.method, "/roles/superuser", c.body, admin())
			if !strings.Contains(r.String(), "readonly: superuser") {
				t.Fatalf("%s refusal %s", c.method, r)
			}
		}
		// Deleting it reports its users first, as DRP does.
		if r := s.Must(409, "DELETE", "/roles/superuser", nil, admin()); !strings.Contains(r.String(), "In use by User rocketskates") {
			t.Fatalf("DELETE refusal %s", r)
		}
		s.Must(200, "GET", "/users", nil, admin())
		s.Must(201, "POST", "/roles", map[string]any{"Name": "still-admin", "Claims": []any{}}, admin())
	}, licenseArgs(t)...)
}
