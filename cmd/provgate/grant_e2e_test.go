package main

import "testing"

// TestE2ENoGrantBeyondOwn: a caller gives a user a role, or a role a claim,
// only when it holds what that grants (docs/design.md §5.9). The requests
// are an attacker's with `users create,update` or `roles update`: make a
// superuser account, add superuser to an account, import one, widen one's
// own role; each is refused with 403 and writes nothing, on SQLite and
// PostgreSQL.
func TestE2ENoGrantBeyondOwn(t *testing.T) {
	forEachDB(t, func(t *testing.T, s *tserver) {
		s.AddRole("g-umgr", [3]string{"users", "create,get,update", "*"}, [3]string{"roles", "get", "*"})
		s.AddRole("g-view", [3]string{"machines", "get", "*"})
		s.AddRole("g-self", [3]string{"roles", "get,update", "g-self"}, [3]string{"machines", "list", "*"})
		s.AddUser("g-mgr", "g-mgr-pw-123456", "g-umgr", "g-view")
		s.AddUser("g-rm", "g-rm-pw-123456", "g-self")
		s.AddUser("g-target", "g-target-pw-123456")
		mgr := basic("g-mgr", "g-mgr-pw-123456")

		// A new superuser account.
		wantDRPError(t, s.Do("POST", "/users", map[string]any{"Name": "g-evil", "Password": "g-evil-pw-123456",
			"Roles": []string{"superuser"}}, mgr), 403, "AUTH", "Cannot grant role superuser")
		s.Must(404, "GET", "/users/g-evil", nil, admin())
		// Superuser added to an existing account, by PATCH and by PUT.
		wantDRPError(t, s.Do("PATCH", "/users/g-target", jsonPatch("add", "/Roles/-", "superuser"), mgr),
			403, "AUTH", "Cannot grant role superuser")
		wantDRPError(t, s.Do("PUT", "/users/g-target", map[string]any{"Name": "g-target", "Roles": []string{"superuser"}}, mgr),
			403, "AUTH", "Cannot grant role superuser")
		if r := s.Must(200, "GET", "/users/g-target", nil, admin()); len(r.Map(t)["Roles"].([]any)) != 0 {
			t.Fatalf("a refused grant changed the user: %s", r)
		}
		// The same through bulk import: the whole batch is refused.
		wantDRPError(t, s.Do("POST", "/users/import", []map[string]any{
			{"Name": "g-ok", "Password": "g-ok-pw-123456"},
			{"Name": "g-evil2", "Password": "g-evil-pw-123456", "Roles": []string{"superuser"}},
		}, mgr), 403, "AUTH", "Cannot grant role superuser")
		s.Must(404, "GET", "/users/g-ok", nil, admin())
		s.Must(404, "GET", "/users/g-evil2", nil, admin())

		// Roles the caller holds may be given, and a user keeps roles it
		// already had when a narrower caller edits it.
		s.Must(201, "POST", "/users", map[string]any{"Name": "g-viewer", "Password": "g-viewer-pw-1", "Roles": []string{"g-view"}}, mgr)
		s.Must(200, "PATCH", "/users/g-rm", jsonPatch("add", "/Roles/-", "g-view"), mgr)
		s.Must(200, "PATCH", "/users/rocketskates", jsonPatch("add", "/Meta", map[string]string{"note": "x"}), mgr)

		// A role's holder with roles update on it cannot widen it.
		rm := basic("g-rm", "g-rm-pw-123456")
		wantDRPError(t, s.Do("PATCH", "/roles/g-self", jsonPatch("add", "/Claims/-",
			map[string]string{"scope": "*", "action": "*", "specific": "*"}), rm), 403, "AUTH", "Cannot grant these claims")
		s.Must(403, "GET", "/users", nil, rm)
		// A claim it holds already may be added.
		s.Must(200, "PATCH", "/roles/g-self", jsonPatch("add", "/Claims/-",
			map[string]string{"scope": "machines", "action": "list", "specific": "m1"}), rm)
	}, licenseArgs(t)...)
}
