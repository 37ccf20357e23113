package main

import (
	"reflect"
	"strings"
	"testing"
)

// The explorer's answers are never stale (docs/design.md §9.8): an answer
// read through a cache (the read cache of users and objects, the decision
// cache) or decided once for a group of users changes with the next write
// that changes it, on every database.
func TestE2EExplorerNeverStale(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, s *tserver) {
		m := s.AddMachine("f-m1", nil)
		s.AddRole("f-reader", [3]string{"machines", "get", "*"})
		s.AddRole("f-other", [3]string{"machines", "list", "*"})
		for _, u := range []string{"f-a", "f-b", "f-c"} {
			s.AddUser(u, u+"-pw-1", "f-reader")
		}
		root := strings.TrimSuffix(s.Base, "/api/v3")
		eval := func() (bool, any) {
			t.Helper()
			r, err := s.SendURL("POST", root+"/access/v1/evaluation", map[string]any{"subject": map[string]any{"type": "user", "id": "f-b"},
				"action": map[string]any{"name": "get"}, "resource": map[string]any{"type": "machines", "id": m}}, admin())
			if err != nil || r.Status != 200 {
				t.Fatalf("%v %s", err, r)
			}
			var d struct {
				Decision bool
				Context  map[string]any
			}
			r.JSON(t, &d)
			return d.Decision, d.Context["error"]
		}
		who := func() []string {
			t.Helper()
			var w struct{ Users []string }
			s.Must(200, "GET", "/access/who?scope=machines&action=get&key="+m, nil, admin()).JSON(t, &w)
			var out []string
			for _, u := range w.Users {
				if strings.HasPrefix(u, "f-") {
					out = append(out, u)
				}
			}
			return out
		}
		if ok, _ := eval(); !ok {
			t.Fatal("f-b may get the machine")
		}
		if got := who(); !reflect.DeepEqual(got, []string{"f-a", "f-b", "f-c"}) {
			t.Fatalf("who can: %v", got)
		}
		// f-b loses the role: one member of the group changes.
		s.Must(200, "PATCH", "/users/f-b", jsonPatch("replace", "/Roles", []string{"f-other"}), admin())
		if ok, _ := eval(); ok {
			t.Error("f-b still may get the machine after losing f-reader")
		}
		if got := who(); !reflect.DeepEqual(got, []string{"f-a", "f-c"}) {
			t.Errorf("who can after f-b's change: %v", got)
		}
		// The role itself narrows: the whole group changes.
		s.Must(200, "PATCH", "/roles/f-reader", jsonPatch("replace", "/Claims", []map[string]string{{"scope": "machines", "action": "list", "specific": "*"}}), admin())
		if got := who(); len(got) != 0 {
			t.Errorf("who can after f-reader narrowed: %v", got)
		}
		// A tenant now hides the machine from f-c, who gets the role back.
		s.Must(200, "PATCH", "/roles/f-reader", jsonPatch("replace", "/Claims", []map[string]string{{"scope": "machines", "action": "get", "specific": "*"}}), admin())
		s.Must(201, "POST", "/tenants", map[string]any{"Name": "f-t", "Users": []string{"f-c"}, "Members": map[string][]string{"machines": {}}}, admin())
		if got := who(); !reflect.DeepEqual(got, []string{"f-a"}) {
			t.Errorf("who can with f-c's tenant hiding the machine: %v", got)
		}
		// The machine goes: the evaluation answers what a missing one gets.
		s.Must(200, "PATCH", "/users/f-b", jsonPatch("replace", "/Roles", []string{"f-reader"}), admin())
		if ok, _ := eval(); !ok {
			t.Error("f-b may get the machine again")
		}
		s.Must(200, "DELETE", "/machines/"+m, nil, admin())
		if ok, e := eval(); ok || e == nil {
			t.Errorf("evaluation on a deleted machine: %v %v", ok, e)
		}
	}, licenseArgs(t)...)
}
