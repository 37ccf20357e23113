package main

import (
	"slices"
	"testing"
	"time"
)

// End-to-end proof of the claim rules (docs/design.md §5, §6): the claim
// forms a role may hold, roles, and tenants, through the real HTTP API on
// every database. TestE2EAccess (access_e2e_test.go) runs them.

func accessClaimForms(t *testing.T, s *tserver) {
	u1 := s.AddMachine("c-m1", map[string]any{"Params": map[string]any{"a": map[string]any{}}})
	u2 := s.AddMachine("c-m2", nil)
	u3 := s.AddMachine("c-m3", nil)
	s.Must(201, "POST", "/pools", map[string]any{"Id": "c-p1"}, admin())
	s.Must(201, "POST", "/pools", map[string]any{"Id": "c-p2"}, admin())
	s.Must(201, "POST", "/profiles", map[string]any{"Name": "c-prof"}, admin())

	// put returns a PUT body: the machine as the admin sees it, changed.
	put := func(uuid string, change func(m map[string]any)) func() any {
		return func() any {
			m := s.Must(200, "GET", "/machines/"+uuid, nil, admin()).Map(t)
			change(m)
			return m
		}
	}
	// desc changes Description to a fresh value on every call, since each
	// case runs twice (Basic, then a token).
	desc := func(m map[string]any) { m["Description"] = time.Now().Format(time.RFC3339Nano) }
	deny := -1 // any status but 401 and 403: the claim was satisfied
	cases := []struct {
		name   string
		claims [][3]string
		method string
		path   string
		body   any // or func() any
		want   int
		msg    string
	}{
		{"star: users list", [][3]string{{"*", "*", "*"}}, "GET", "/users", nil, 200, ""},
		{"star: pool patch", [][3]string{{"*", "*", "*"}}, "PATCH", "/pools/c-p1", jsonPatch("add", "/Description", "s"), 200, ""},
		{"star scope: machine", [][3]string{{"*", "get", "*"}}, "GET", "/machines/" + u1, nil, 200, ""},
		{"star scope: not delete", [][3]string{{"*", "get", "*"}}, "DELETE", "/pools/c-p2", nil, 403, "Requires: pools delete c-p2"},
		{"scope list: pools", [][3]string{{"machines,pools", "get", "*"}}, "GET", "/pools/c-p1", nil, 200, ""},
		{"scope list: machines", [][3]string{{"machines, pools", "get", "*"}}, "GET", "/machines/" + u2, nil, 200, ""},
		{"scope list: not profiles", [][3]string{{"machines,pools", "get", "*"}}, "GET", "/profiles/c-prof", nil, 403, "Requires: profiles get c-prof"},
		{"action list: list", [][3]string{{"machines", "get,list", "*"}}, "GET", "/machines", nil, 200, ""},
		{"action list: not delete", [][3]string{{"machines", "get,list", "*"}}, "DELETE", "/machines/" + u3, nil, 403, "Requires: machines delete " + u3},
		{"specific list: first", [][3]string{{"machines", "get", u1 + "," + u2}}, "GET", "/machines/" + u1, nil, 200, ""},
		{"specific list: second", [][3]string{{"machines", "get", u1 + ", " + u2}}, "GET", "/machines/" + u2, nil, 200, ""},
		{"specific list: third", [][3]string{{"machines", "get", u1 + "," + u2}}, "GET", "/machines/" + u3, nil, 403, "Requires: machines get " + u3},
		{"specific list: by Name index", [][3]string{{"machines", "get", u1}}, "GET", "/machines/Name:c-m1", nil, 200, ""},
		{"specific: other by Name index", [][3]string{{"machines", "get", u1}}, "GET", "/machines/Name:c-m2", nil, 403, "Requires: machines get " + u2},
		{"action covers action:x", [][3]string{{"machines", "action", "*"}}, "POST", "/machines/" + u1 + "/releaseToPool", nil, deny, ""},
		{"action:x", [][3]string{{"machines", "action:releaseToPool", "*"}}, "POST", "/machines/" + u1 + "/releaseToPool", nil, deny, ""},
		{"action:x list", [][3]string{{"machines", "action:other,action:releaseToPool", "*"}}, "POST", "/machines/" + u1 + "/releaseToPool", nil, deny, ""},
		{"action:other not x", [][3]string{{"machines", "action:other", "*"}}, "POST", "/machines/" + u1 + "/releaseToPool", nil, 403, "Requires: machines action:releaseToPool " + u1},
		{"action:x not plugin action y", [][3]string{{"machines", "action:releaseToPool", "*"}}, "POST", "/machines/" + u1 + "/actions/callbackDo", map[string]any{}, 403, "Requires: machines action:callbackDo " + u1},
		{"update:/Description patch", [][3]string{{"machines", "update:/Description", "*"}}, "PATCH", "/machines/" + u1, jsonPatch("replace", "/Description", "d1"), 200, ""},
		{"update:/Description not Params", [][3]string{{"machines", "update:/Description", "*"}}, "PATCH", "/machines/" + u1, jsonPatch("add", "/Params/x", 1), 403, "Requires: machines update:/Params/x " + u1},
		{"update:/Params covers /Params/a/b", [][3]string{{"machines", "update:/Params", "*"}}, "PATCH", "/machines/" + u1, jsonPatch("add", "/Params/a/b", 2), 200, ""},
		{"update:/Params not Description", [][3]string{{"machines", "update:/Params", "*"}}, "PATCH", "/machines/" + u1, jsonPatch("replace", "/Description", "d2"), 403, "Requires: machines update:/Description " + u1},
		{"update:/Params/a/b not /Params/a", [][3]string{{"machines", "update:/Params/a/b", "*"}}, "PATCH", "/machines/" + u1, jsonPatch("replace", "/Params/a", map[string]any{}), 403, "Requires: machines update:/Params/a " + u1},
		{"update covers Params", [][3]string{{"machines", "update", "*"}}, "PATCH", "/machines/" + u1, jsonPatch("add", "/Params/x", 3), 200, ""},
		// A test op reads the value it compares (a failed test answers
		// what get would), so it needs get on the object.
		{"update: test ops need get", [][3]string{{"machines", "update:/Description", "*"}}, "PATCH", "/machines/" + u2,
			[]map[string]any{{"op": "test", "path": "/Name", "value": "c-m2"}, {"op": "replace", "path": "/Description", "value": "t"}}, 403, "Requires: machines get " + u2},
		{"update: test ops with get", [][3]string{{"machines", "get,update:/Description", "*"}}, "PATCH", "/machines/" + u2,
			[]map[string]any{{"op": "test", "path": "/Name", "value": "c-m2"}, {"op": "replace", "path": "/Description", "value": "t"}}, 200, ""},
		{"update:x params route", [][3]string{{"machines", "update:/Params", "*"}}, "POST", "/machines/" + u2 + "/params/y", 5, 200, ""},
		{"update:/Description not params route", [][3]string{{"machines", "update:/Description", "*"}}, "POST", "/machines/" + u2 + "/params/y", 5, 403, "Requires: machines update:/Params/y " + u2},
		{"put: changed field allowed", [][3]string{{"machines", "update:/Description", "*"}}, "PUT", "/machines/" + u3, put(u3, desc), 200, ""},
		{"put: every changed field needed", [][3]string{{"machines", "update:/Description", "*"}}, "PUT", "/machines/" + u3,
			put(u3, func(m map[string]any) { desc(m); m["Params"] = map[string]any{"z": 1} }), 403, "Requires: machines update:/Params/z " + u3},
		// A PUT that changes nothing asks for get (a no-op write reveals
		// no more than a read).
		{"put: unchanged needs get", [][3]string{{"machines", "update:/Description", "*"}}, "PUT", "/machines/" + u3, put(u3, func(map[string]any) {}), 403, "Requires: machines get " + u3},
		{"put: unchanged with get", [][3]string{{"machines", "get", "*"}}, "PUT", "/machines/" + u3, put(u3, func(map[string]any) {}), 200, ""},
		{"no claims", [][3]string{}, "GET", "/machines", nil, 403, "Requires: machines list"},
		{"specific does not leak to list", [][3]string{{"machines", "get", "*"}}, "GET", "/machines", nil, 403, "Requires: machines list"},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := s.On(t)
			role := "c-role-" + string(rune('a'+i%26)) + string(rune('a'+i/26))
			s.AddRole(role, c.claims...)
			user := role + "-u"
			s.AddUser(user, "c-pw-1", role)
			for _, authz := range []string{basic(user, "c-pw-1"), bearer(s.Token(user, basic(user, "c-pw-1"), ""))} {
				body := c.body
				if f, ok := body.(func() any); ok {
					body = f()
				}
				r := s.Do(c.method, c.path, body, authz)
				switch {
				case c.want == deny:
					if r.Status == 401 || r.Status == 403 {
						t.Fatalf("got %s, want the claim satisfied", r)
					}
				case r.Status != c.want:
					t.Fatalf("got %s, want %d", r, c.want)
				}
				if c.msg != "" {
					wantDRPError(t, r, c.want, "", c.msg)
				}
			}
		})
	}
	t.Run("meta of a param with a slash", func(t *testing.T) {
		s := s.On(t)
		s.Must(201, "POST", "/params", map[string]any{"Name": "c/meta", "Schema": map[string]any{"type": "string"}}, admin())
		s.Must(200, "GET", "/meta/params/c/meta", nil, admin())
		s.Must(200, "PATCH", "/meta/params/c/meta", jsonPatch("add", "/color", "blue"), admin())
		s.AddRole("c-params-get", [3]string{"params", "get", "*"})
		s.AddUser("c-params-u", "c-pw-1", "c-params-get")
		s.Must(200, "GET", "/meta/params/c/meta", nil, basic("c-params-u", "c-pw-1"))
		r := s.Do("PATCH", "/meta/params/c/meta", jsonPatch("add", "/icon", "x"), basic("c-params-u", "c-pw-1"))
		wantDRPError(t, r, 403, "", "Requires: params update:/Meta/icon c/meta")
	})
	t.Run("decode needs getSecure", func(t *testing.T) {
		s := s.On(t)
		s.AddRole("c-get-only", [3]string{"machines", "get", "*"})
		s.AddUser("c-get-u", "c-pw-1", "c-get-only")
		s.Must(200, "GET", "/machines/"+u1, nil, basic("c-get-u", "c-pw-1"))
		r := s.Do("GET", "/machines/"+u1+"?decode=true", nil, basic("c-get-u", "c-pw-1"))
		wantDRPError(t, r, 403, "", "Requires: machines getSecure "+u1)
	})
	t.Run("empty claim is refused", func(t *testing.T) {
		s := s.On(t)
		r := s.Do("POST", "/roles", map[string]any{"Name": "c-empty",
			"Claims": []map[string]string{{"scope": "", "action": "", "specific": ""}}}, admin())
		wantDRPError(t, r, 422, "", "No such scope ''")
	})
	t.Run("superuser all", func(t *testing.T) {
		s := s.On(t)
		s.AddUser("c-super", "c-pw-1", "superuser")
		for _, p := range []string{"/users", "/roles", "/tenants", "/machines", "/pools", "/profiles", "/prefs", "/license"} {
			s.Must(200, "GET", p, nil, basic("c-super", "c-pw-1"))
		}
		s.Must(200, "DELETE", "/pools/c-p2", nil, basic("c-super", "c-pw-1"))
	})
}

func accessRoles(t *testing.T, s *tserver) {
	role := func(claims ...map[string]string) map[string]any {
		return map[string]any{"Name": "r-bad", "Claims": claims}
	}
	cl := func(scope, action, specific string) map[string]string {
		return map[string]string{"scope": scope, "action": action, "specific": specific}
	}
	invalid := []struct {
		name string
		body map[string]any
		msg  string
	}{
		{"unknown scope", role(cl("bogus", "get", "*")), "No such scope 'bogus'"},
		{"unknown scope in list", role(cl("machines,bogus2", "get", "*")), "No such scope 'bogus2'"},
		{"unknown action", role(cl("machines", "frob", "*")), "No such action 'frob'"},
		{"action of another scope", role(cl("info", "delete", "*")), "No such action 'delete'"},
		{"pointer without slash", role(cl("machines", "update:Field", "*")), "update:Field"},
		{"bad escape", role(cl("machines", "update:/a~2", "*")), "~2"},
		{"bad name", map[string]any{"Name": "r bad/x", "Claims": []map[string]string{}}, "Invalid Name"},
	}
	for _, c := range invalid {
		t.Run("422 "+c.name, func(t *testing.T) {
			s := s.On(t)
			r := s.Do("POST", "/roles", c.body, admin())
			wantDRPError(t, r, 422, "ValidationError", c.msg)
			s.Must(404, "GET", "/roles/r-bad", nil, admin())
		})
	}
	t.Run("422 on patch too", func(t *testing.T) {
		s := s.On(t)
		s.AddRole("r-ok", [3]string{"machines", "get", "*"})
		r := s.Do("PATCH", "/roles/r-ok", jsonPatch("replace", "/Claims", []map[string]string{cl("nope", "get", "*")}), admin())
		wantDRPError(t, r, 422, "", "No such scope 'nope'")
	})
	t.Run("duplicate", func(t *testing.T) {
		s := s.On(t)
		s.AddRole("r-dup")
		r := s.Do("POST", "/roles", map[string]any{"Name": "r-dup", "Claims": []any{}}, admin())
		wantDRPError(t, r, 409, "", "already exists")
	})
	t.Run("delete in use", func(t *testing.T) {
		s := s.On(t)
		s.AddRole("r-used", [3]string{"pools", "list", "*"})
		s.AddUser("r-user", "r-user-pw", "r-used")
		r := s.Do("DELETE", "/roles/r-used", nil, admin())
		wantDRPError(t, r, 409, "StillInUseError", "r-user")
		s.Must(409, "DELETE", "/roles/superuser", nil, admin())
	})
	t.Run("edits apply to live tokens", func(t *testing.T) {
		s := s.On(t)
		s.AddRole("r-live", [3]string{"machines", "list", "*"})
		s.AddUser("r-live-u", "r-live-pw", "r-live")
		tok := bearer(s.Token("r-live-u", basic("r-live-u", "r-live-pw"), ""))
		restricted := bearer(s.Token("r-live-u", basic("r-live-u", "r-live-pw"), "?roles=r-live"))
		for _, a := range []string{tok, restricted} {
			s.Must(200, "GET", "/machines", nil, a)
			s.Must(403, "GET", "/pools", nil, a)
		}
		s.Must(200, "PATCH", "/roles/r-live", jsonPatch("replace", "/Claims", []map[string]string{cl("pools", "list", "*")}), admin())
		for _, a := range []string{tok, restricted, basic("r-live-u", "r-live-pw")} {
			s.Must(403, "GET", "/machines", nil, a)
			s.Must(200, "GET", "/pools", nil, a)
		}
		s.Must(200, "PUT", "/roles/r-live", map[string]any{"Name": "r-live", "Claims": []map[string]string{cl("machines", "list", "*")}}, admin())
		s.Must(200, "GET", "/machines", nil, tok)
		s.Must(403, "GET", "/pools", nil, tok)
		// A role taken from the user ends at once as well.
		s.Must(200, "PATCH", "/users/r-live-u", jsonPatch("replace", "/Roles", []string{}), admin())
		s.Must(403, "GET", "/machines", nil, tok)
	})
}

func accessTenants(t *testing.T, s *tserver) {
	s.AddRole("n-role", [3]string{"machines", "*", "*"}, [3]string{"profiles", "get,list", "*"})
	s.AddUser("n-in", "n-in-pw", "n-role")
	s.AddUser("n-free", "n-free-pw", "n-role")
	s.AddUser("n-in2", "n-in2-pw", "n-role")
	u1 := s.AddMachine("n-m1", nil)
	u2 := s.AddMachine("n-m2", nil)
	s.Must(201, "POST", "/profiles", map[string]any{"Name": "n-prof"}, admin())
	s.Must(201, "POST", "/tenants", map[string]any{"Name": "n-t1", "Users": []string{"n-in"},
		"Members": map[string][]string{"machines": {u1}}}, admin())
	in := basic("n-in", "n-in-pw")
	inTok := bearer(s.Token("n-in", in, ""))
	free := basic("n-free", "n-free-pw")

	t.Run("visibility", func(t *testing.T) {
		s := s.On(t)
		for _, who := range []struct{ name, authz string }{{"basic", in}, {"token", inTok}} {
			t.Run(who.name, func(t *testing.T) {
				s := s.On(t)
				keys := fieldOf(t, s.Must(200, "GET", "/machines", nil, who.authz), "Uuid")
				if !slices.Contains(keys, u1) || slices.Contains(keys, u2) {
					t.Fatalf("tenant user sees %v, want %s and not %s", keys, u1, u2)
				}
				r := s.Must(200, "HEAD", "/machines", nil, who.authz)
				if got, want := r.Header.Get("X-DRP-LIST-FILTER-COUNT"), "1"; got != want {
					t.Fatalf("X-DRP-LIST-FILTER-COUNT %q, want %q (headers %v)", got, want, r.Header)
				}
				r = s.Must(200, "HEAD", "/machines?Name=n-m2", nil, who.authz)
				if got := r.Header.Get("X-DRP-LIST-FILTER-COUNT"); got != "0" {
					t.Fatalf("filtered count of hidden %q", got)
				}
				s.Must(200, "GET", "/machines/"+u1, nil, who.authz)
				for _, c := range []struct {
					method, path string
					body         any
				}{
					{"GET", "/machines/" + u2, nil},
					{"GET", "/machines/Name:n-m2", nil},
					{"HEAD", "/machines/" + u2, nil},
					{"PATCH", "/machines/" + u2, jsonPatch("replace", "/Description", "x")},
					{"PUT", "/machines/" + u2, map[string]any{"Name": "n-m2", "Uuid": u2}},
					{"DELETE", "/machines/" + u2, nil},
					{"GET", "/machines/" + u2 + "/params", nil},
				} {
					if r := s.Do(c.method, c.path, c.body, who.authz); r.Status != 404 {
						t.Fatalf("%s %s hidden: got %s, want 404", c.method, c.path, r)
					}
				}
				// Profiles are absent from Members: unrestricted.
				s.Must(200, "GET", "/profiles/n-prof", nil, who.authz)
				if keys := fieldOf(t, s.Must(200, "GET", "/profiles", nil, who.authz), "Name"); !slices.Contains(keys, "n-prof") {
					t.Fatalf("profiles %v", keys)
				}
			})
		}
	})
	t.Run("user in no tenant", func(t *testing.T) {
		s := s.On(t)
		keys := fieldOf(t, s.Must(200, "GET", "/machines", nil, free), "Uuid")
		if !slices.Contains(keys, u1) || !slices.Contains(keys, u2) {
			t.Fatalf("free user sees %v", keys)
		}
		s.Must(200, "GET", "/machines/"+u2, nil, free)
	})
	t.Run("user in two tenants", func(t *testing.T) {
		s := s.On(t)
		r := s.Do("POST", "/tenants", map[string]any{"Name": "n-t2", "Users": []string{"n-in"}, "Members": map[string][]string{}}, admin())
		wantDRPError(t, r, 422, "", "n-in")
		s.Must(201, "POST", "/tenants", map[string]any{"Name": "n-t3", "Users": []string{}, "Members": map[string][]string{}}, admin())
		s.Must(422, "PATCH", "/tenants/n-t3", jsonPatch("replace", "/Users", []string{"n-in"}), admin())
	})
	t.Run("missing user", func(t *testing.T) {
		s := s.On(t)
		r := s.Do("POST", "/tenants", map[string]any{"Name": "n-t4", "Users": []string{"n-ghost"}, "Members": map[string][]string{}}, admin())
		wantDRPError(t, r, 422, "", "n-ghost")
	})
	t.Run("unknown scope in Members", func(t *testing.T) {
		s := s.On(t)
		s.Must(422, "POST", "/tenants", map[string]any{"Name": "n-t5", "Users": []string{}, "Members": map[string][]string{"bogus": {}}}, admin())
	})
	t.Run("created objects join the tenant", func(t *testing.T) {
		s := s.On(t)
		var m struct{ Uuid string }
		s.Must(201, "POST", "/machines", map[string]any{"Name": "n-m3"}, in).JSON(t, &m)
		s.Must(200, "GET", "/machines/"+m.Uuid, nil, in)
		s.Must(200, "PATCH", "/machines/"+m.Uuid, jsonPatch("replace", "/Description", "mine"), inTok)
		keys := fieldOf(t, s.Must(200, "GET", "/machines", nil, inTok), "Uuid")
		if len(keys) != 2 || !slices.Contains(keys, m.Uuid) {
			t.Fatalf("after create the tenant user sees %v", keys)
		}
		var tn struct{ Members map[string][]string }
		s.Must(200, "GET", "/tenants/n-t1", nil, admin()).JSON(t, &tn)
		if !slices.Contains(tn.Members["machines"], m.Uuid) {
			t.Fatalf("tenant members %v", tn.Members)
		}
	})
	t.Run("membership change applies at once", func(t *testing.T) {
		s := s.On(t)
		s.Must(200, "PATCH", "/tenants/n-t1", jsonPatch("add", "/Members/machines/-", u2), admin())
		s.Must(200, "GET", "/machines/"+u2, nil, inTok)
		s.Must(201, "POST", "/tenants", map[string]any{"Name": "n-t6", "Users": []string{"n-in2"},
			"Members": map[string][]string{"machines": {}}}, admin())
		if keys := fieldOf(t, s.Must(200, "GET", "/machines", nil, basic("n-in2", "n-in2-pw")), "Uuid"); len(keys) != 0 {
			t.Fatalf("empty Members list still shows %v", keys)
		}
	})
	t.Run("deleted key leaves the tenant", func(t *testing.T) {
		s := s.On(t)
		var m struct{ Uuid string }
		s.Must(201, "POST", "/machines", map[string]any{"Name": "n-m4"}, in).JSON(t, &m)
		s.Must(200, "DELETE", "/machines/"+m.Uuid, nil, in)
		// The same key made again by someone else is not the tenant's.
		s.Must(201, "POST", "/machines", map[string]any{"Name": "n-m4b", "Uuid": m.Uuid}, admin())
		s.Must(404, "GET", "/machines/"+m.Uuid, nil, inTok)
	})
	t.Run("jobs follow their machine", func(t *testing.T) {
		s := s.On(t)
		s.Must(201, "POST", "/tasks", map[string]any{"Name": "n-task"}, admin())
		s.Must(201, "POST", "/stages", map[string]any{"Name": "n-stage", "Tasks": []string{"n-task"}}, admin())
		s.Must(201, "POST", "/workflows", map[string]any{"Name": "n-wf", "Stages": []string{"n-stage"}}, admin())
		hidden := s.AddMachine("n-m5", map[string]any{"Workflow": "n-wf"})
		var job struct{ Uuid string }
		for i := 0; i < 5 && job.Uuid == ""; i++ {
			if r := s.Do("POST", "/jobs", map[string]any{"Machine": hidden}, admin()); r.Status == 201 {
				r.JSON(t, &job)
			}
		}
		if job.Uuid == "" {
			t.Fatal("no job")
		}
		// Tenant visibility comes before roles: 404 with or without a jobs role.
		s.Must(404, "GET", "/jobs/"+job.Uuid, nil, inTok)
		s.AddRole("n-jobs", [3]string{"jobs", "*", "*"})
		s.Must(200, "PATCH", "/users/n-in", jsonPatch("replace", "/Roles", []string{"n-role", "n-jobs"}), admin())
		s.Must(404, "GET", "/jobs/"+job.Uuid, nil, inTok)
		s.Must(404, "GET", "/jobs/"+job.Uuid+"/log", nil, inTok)
		s.Must(404, "PATCH", "/jobs/"+job.Uuid, jsonPatch("replace", "/State", "failed"), inTok)
		s.Must(422, "POST", "/jobs", map[string]any{"Machine": hidden}, inTok)
		if keys := fieldOf(t, s.Must(200, "GET", "/jobs", nil, inTok), "Uuid"); slices.Contains(keys, job.Uuid) {
			t.Fatalf("tenant user lists the job of a hidden machine: %v", keys)
		}
		if got := s.Must(200, "HEAD", "/jobs", nil, inTok).Header.Get("X-DRP-LIST-TOTAL-COUNT"); got != "0" {
			t.Fatalf("tenant user counts %s jobs", got)
		}
		s.Must(200, "PATCH", "/users/n-free", jsonPatch("replace", "/Roles", []string{"n-role", "n-jobs"}), admin())
		s.Must(200, "GET", "/jobs/"+job.Uuid, nil, free)
		// A job of the tenant's own machine is visible.
		s.Must(200, "PATCH", "/tenants/n-t1", jsonPatch("add", "/Members/machines/-", hidden), admin())
		s.Must(200, "GET", "/jobs/"+job.Uuid, nil, inTok)
		if keys := fieldOf(t, s.Must(200, "GET", "/jobs", nil, inTok), "Uuid"); !slices.Contains(keys, job.Uuid) {
			t.Fatalf("tenant user does not list the job of its machine: %v", keys)
		}
	})
	t.Run("delete tenant with users", func(t *testing.T) {
		s := s.On(t)
		r := s.Do("DELETE", "/tenants/n-t1", nil, admin())
		wantDRPError(t, r, 409, "StillInUseError", "n-in")
		s.Must(200, "DELETE", "/tenants/n-t3", nil, admin())
	})
}
