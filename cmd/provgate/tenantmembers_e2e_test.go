package main

import (
	"slices"
	"testing"
)

// TestE2ETenantMembersByName: Members keys may name objects by a unique
// index (Name:m1) and are stored as the objects' keys, so the tenant's
// users see them; a key that names nothing is 422, and for a tenant user an
// object it cannot see is answered exactly as a missing one.
func TestE2ETenantMembersByName(t *testing.T) {
	forEachDB(t, func(t *testing.T, s *tserver) {
		adm := admin()
		m1 := s.AddMachine("mn-m1", nil)
		m2 := s.AddMachine("mn-m2", nil)
		hidden := s.AddMachine("mn-hidden", nil)
		s.Must(201, "POST", "/profiles", map[string]any{"Name": "mn-p"}, adm)
		s.AddRole("mn-role", [3]string{"machines", "get,list", "*"}, [3]string{"tenants", "get,update", "mn-t"},
			[3]string{"profiles", "get,list", "*"})
		s.AddUser("mn-tu", "mn-tu-Pa55", "mn-role")
		tu := basic("mn-tu", "mn-tu-Pa55")

		var tn struct{ Members map[string][]string }
		s.Must(201, "POST", "/tenants", map[string]any{"Name": "mn-t", "Users": []string{"mn-tu"},
			"Members": map[string][]string{"machines": {"Name:mn-m1"}, "profiles": {"Name:mn-p"}}}, adm).JSON(t, &tn)
		if !slices.Equal(tn.Members["machines"], []string{m1}) || !slices.Equal(tn.Members["profiles"], []string{"mn-p"}) {
			t.Fatalf("Members stored as %v, want the objects' keys", tn.Members)
		}
		// The tenant user sees the machine named, and only it.
		var ms []struct{ Uuid string }
		s.Must(200, "GET", "/machines", nil, tu).JSON(t, &ms)
		if len(ms) != 1 || ms[0].Uuid != m1 {
			t.Fatalf("tenant user sees %v, want only %s", ms, m1)
		}

		// Keys that name nothing are refused, whoever writes.
		e := wantDRPError(t, s.Do("POST", "/tenants", map[string]any{"Name": "mn-t2", "Users": []string{},
			"Members": map[string][]string{"machines": {"Name:mn-ghost", "00000000-0000-4000-8000-0000000000ab"}}}, adm),
			422, "ValidationError", "Members machines: Name:mn-ghost does not exist")
		if !slices.Contains(e.Messages, "Members machines: 00000000-0000-4000-8000-0000000000ab does not exist") {
			t.Fatalf("missing key not named: %v", e.Messages)
		}
		wantDRPError(t, s.Do("PATCH", "/tenants/mn-t", jsonPatch("add", "/Members/profiles/-", "Name:mn-nope"), adm),
			422, "ValidationError", "Members profiles: Name:mn-nope does not exist")
		s.Must(404, "GET", "/tenants/mn-t2", nil, adm)

		// The administrator adds m2 by name; the tenant user then sees it.
		s.Must(200, "PATCH", "/tenants/mn-t", jsonPatch("add", "/Members/machines/-", "Name:mn-m2"), adm)
		s.Must(200, "GET", "/machines/"+m2, nil, tu)
		s.Must(404, "GET", "/machines/"+hidden, nil, tu)

		// For the tenant user, a hidden machine named by name or by key is
		// refused exactly as a missing one.
		penSameRefusal(t, s.Do("PATCH", "/tenants/mn-t", jsonPatch("add", "/Members/machines/-", "Name:mn-hidden"), tu),
			s.Do("PATCH", "/tenants/mn-t", jsonPatch("add", "/Members/machines/-", "Name:mn-absent"), tu), "Name:mn-hidden", "Name:mn-absent")
		const missing = "00000000-0000-4000-8000-0000000000ac"
		penSameRefusal(t, s.Do("PATCH", "/tenants/mn-t", jsonPatch("add", "/Members/machines/-", hidden), tu),
			s.Do("PATCH", "/tenants/mn-t", jsonPatch("add", "/Members/machines/-", missing), tu), hidden, missing)
		s.Must(404, "GET", "/machines/"+hidden, nil, tu)
		// Naming a member it sees already, by name, is no change of view.
		s.Must(200, "PATCH", "/tenants/mn-t", jsonPatch("add", "/Members/machines/-", "Name:mn-m1"), tu).JSON(t, &tn)
		if !slices.Equal(tn.Members["machines"], []string{m1, m2}) {
			t.Fatalf("Members after re-adding m1 by name: %v", tn.Members)
		}
	}, licenseArgs(t)...)
}
