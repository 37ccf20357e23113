package main

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/provgate/provgate/backend"
	"github.com/provgate/provgate/backend/store"
	"github.com/provgate/provgate/gateway/auth"
)

// TestE2EPenTokens replays, through the real server on every database, the
// requests a penetration test used against tokens, the self claim, machine
// tokens and the login limits, and expects each to be refused. Every
// finding runs on servers of its own.
func TestE2EPenTokens(t *testing.T) {
	t.Parallel()
	t.Run("1 restricted token follows the user's roles", func(t *testing.T) {
		forEachDB(t, func(t *testing.T, s *tserver) { penRestrictedRoles(t, s) }, licenseArgs(t)...)
	})
	t.Run("7 machine token stays on its machine and in its tenant", func(t *testing.T) {
		forEachDB(t, func(t *testing.T, s *tserver) { penMachineToken(t, s) }, licenseArgs(t)...)
	})
	t.Run("9 names and the self claim are compared exactly", func(t *testing.T) {
		forEachDB(t, func(t *testing.T, s *tserver) { penExactNames(t, s) }, licenseArgs(t)...)
	})
	t.Run("11 restricted token cannot change its user's credentials", func(t *testing.T) {
		forEachDB(t, func(t *testing.T, s *tserver) { penRestrictedCredentials(t, s) }, licenseArgs(t)...)
	})
	t.Run("15 failed logins count on every replica", func(t *testing.T) {
		for _, db := range databases(t) {
			t.Run(db.Name, func(t *testing.T) {
				t.Parallel()
				penSharedLoginLimit(t, db)
			})
		}
	})
}

// penRestrictedRoles: bob holds mdesc; a token restricted to mget (which
// mdesc contains, so it is kept at mint time) must never do more than bob's
// current roles allow, nor more than mget allows.
func penRestrictedRoles(t *testing.T, s *tserver) {
	s.AddRole("mdesc", [3]string{"machines", "get,list,update:/Description", "*"})
	s.AddRole("mget", [3]string{"machines", "get,list", "*"})
	s.AddUser("bob", "bob-pen-pw-1", "mdesc")
	m1 := s.AddMachine("pen-m1", nil)
	m2 := s.AddMachine("pen-m2", nil)
	victim := s.AddMachine("pen-victim", nil)
	bobBasic := basic("bob", "bob-pen-pw-1")
	tok := bearer(s.Token("bob", bobBasic, "?roles=mget"))
	narrow := bearer(s.Token("bob", bobBasic, "?scope=machines&action=get,list&specific="+m1))

	// The token works as far as both mget and mdesc allow.
	s.Must(200, "GET", "/machines/"+m1, nil, tok)
	if keys := fieldOf(t, s.Must(200, "GET", "/machines", nil, tok), "Uuid"); !slices.Contains(keys, m1) || !slices.Contains(keys, m2) {
		t.Fatalf("restricted token lists %v", keys)
	}
	// mget lacks update:/Description: the restriction holds.
	r := s.Do("PATCH", "/machines/"+m1, jsonPatch("replace", "/Description", "x"), tok)
	wantDRPError(t, r, 403, "", "Requires: machines update:/Description "+m1)
	s.Must(200, "GET", "/machines/"+m1, nil, narrow)
	s.Must(403, "GET", "/machines/"+m2, nil, narrow)

	t.Run("widening the token's role grants nothing bob lacks", func(t *testing.T) {
		s := s.On(t)
		s.Must(200, "PATCH", "/roles/mget", jsonPatch("replace", "/Claims", []map[string]string{
			{"scope": "machines", "action": "*", "specific": "*"}}),
			admin())
		r := s.Do("DELETE", "/machines/"+victim, nil, tok)
		wantDRPError(t, r, 403, "", "Requires: machines delete "+victim)
		s.Must(403, "PATCH", "/machines/"+m1, jsonPatch("add", "/Params/pen-x", 1), tok)
		s.Must(200, "GET", "/machines/"+victim, nil, admin())
		// What both roles hold now works: mget covers update:/Description.
		s.Must(200, "PATCH", "/machines/"+m1, jsonPatch("replace", "/Description", "both hold it"), tok)
	})
	t.Run("narrowing the user's role narrows the token at once", func(t *testing.T) {
		s := s.On(t)
		s.Must(200, "PATCH", "/roles/mdesc", jsonPatch("replace", "/Claims", []map[string]string{
			{"scope": "machines", "action": "get,list", "specific": m1}}),
			admin())
		s.Must(200, "GET", "/machines/"+m1, nil, tok)
		r := s.Do("GET", "/machines/"+m2, nil, tok)
		wantDRPError(t, r, 403, "", "Requires: machines get "+m2)
		keys := fieldOf(t, s.Must(200, "GET", "/machines", nil, tok), "Uuid")
		if len(keys) != 1 || keys[0] != m1 {
			t.Fatalf("after narrowing mdesc the token lists %v, want only %s", keys, m1)
		}
		if got := s.Must(200, "HEAD", "/machines", nil, tok).Header.Get("X-DRP-LIST-FILTER-COUNT"); got != "1" {
			t.Fatalf("after narrowing mdesc the token counts %q machines, want 1", got)
		}
	})
	t.Run("removing the role from the user ends the token's rights", func(t *testing.T) {
		s := s.On(t)
		s.Must(200, "PATCH", "/users/bob", jsonPatch("replace", "/Roles", []string{}), admin())
		for _, a := range []string{tok, narrow} {
			r := s.Do("GET", "/machines/"+m1, nil, a)
			wantDRPError(t, r, 403, "", "Requires: machines get "+m1)
			s.Must(403, "GET", "/machines", nil, a)
		}
		// The self claims stay.
		s.Must(200, "GET", "/users/bob", nil, tok)
		// Given back, the role works again for the same token.
		s.Must(200, "PATCH", "/users/bob", jsonPatch("replace", "/Roles", []string{"mdesc"}), admin())
		s.Must(200, "GET", "/machines/"+m1, nil, tok)
		s.Must(200, "GET", "/machines/"+m1, nil, narrow)
	})
	t.Run("a refreshed token keeps the restriction", func(t *testing.T) {
		s := s.On(t)
		s.Must(200, "PATCH", "/users/bob", jsonPatch("replace", "/Roles", []string{"superuser"}), admin())
		again := bearer(s.Token("bob", tok, ""))
		s.Must(403, "GET", "/users", nil, again)
		s.Must(403, "GET", "/users", nil, tok)
		s.Must(200, "GET", "/users", nil, bobBasic)
		s.Must(200, "GET", "/machines/"+m2, nil, again)
	})
}

// penJob creates a job for machine (rolling over stage entries) as authz.
func penJob(t testing.TB, s *tserver, machine, authz string) string {
	t.Helper()
	for i := 0; i < 6; i++ {
		r := s.Do("POST", "/jobs", map[string]any{"Machine": machine}, authz)
		switch r.Status {
		case 201:
			var job struct{ Uuid string }
			r.JSON(t, &job)
			return job.Uuid
		case 204:
		default:
			t.Fatalf("POST /jobs for %s: %s", machine, r)
		}
	}
	t.Fatalf("no job for %s", machine)
	return ""
}

// penMachineToken: an operations token may run its machine's agent loop
// but not pull other objects' params or tasks into it, and a token of a
// tenant's machine sees no more than that tenant.
func penMachineToken(t *testing.T, s *tserver) {
	const sekrit = "pen-profile-sekrit-5e1f"
	adm := admin()
	s.Must(201, "POST", "/params", map[string]any{"Name": "pen/secret", "Secure": true, "Schema": map[string]any{"type": "string"}}, adm)
	s.Must(201, "POST", "/profiles", map[string]any{"Name": "pen-secret"}, adm)
	s.Must(200, "PUT", "/profiles/pen-secret/params/pen/secret", `"`+sekrit+`"`, adm)
	s.Must(201, "POST", "/tasks", map[string]any{"Name": "pen-task", "Templates": []map[string]any{
		{"Name": "tokens", "Path": "", "Contents": "op={{.GenerateToken}}\ninf={{.GenerateInfiniteToken}}\n"}}}, adm)
	s.Must(201, "POST", "/stages", map[string]any{"Name": "pen-stage", "Tasks": []string{"pen-task"}}, adm)
	s.Must(201, "POST", "/workflows", map[string]any{"Name": "pen-wf", "Stages": []string{"pen-stage"}}, adm)
	s.Must(201, "POST", "/workflows", map[string]any{"Name": "pen-other-wf", "Stages": []string{"callback-complete"}}, adm)
	s.Must(201, "POST", "/pools", map[string]any{"Id": "pen-pool", "EnterActions": map[string]any{"AddProfiles": []string{"pen-secret"}}}, adm)
	own := s.AddMachine("pen-own", map[string]any{"Workflow": "pen-wf"})
	op, inf := renderTokens(t, s, penJob(t, s, own, adm), admin())

	t.Run("fields that pull in other objects are refused", func(t *testing.T) {
		cases := []struct {
			path  string
			value any
		}{
			{"/Profiles", []string{"pen-secret"}},
			{"/Profiles/0", "pen-secret"},
			{"/Workflow", "pen-other-wf"},
			{"/Stage", "callback-complete"},
			{"/BootEnv", "local"},
			{"/Tasks", []string{"callback-task"}},
			{"/Pool", "pen-pool"},
			{"/PoolAllocated", true},
			{"/PoolStatus", "InUse"},
			{"/Secret", "chosen-by-the-machine"},
			{"/Locked", true},
			{"/CurrentJob", ""},
			{"/CurrentTask", 0},
			{"/WorkflowComplete", true},
			{"/Name", "pen-renamed"},
		}
		for _, tk := range []struct{ name, tok string }{{"GenerateToken", op}, {"GenerateInfiniteToken", inf}} {
			for _, c := range cases {
				t.Run(tk.name+" "+c.path, func(t *testing.T) {
					s := s.On(t)
					r := s.Do("PATCH", "/machines/"+own, jsonPatch("add", c.path, c.value), bearer(tk.tok))
					wantDRPError(t, r, 403, "", "Requires: machines update:"+c.path+" "+own)
				})
			}
		}
		t.Run("releaseToPool", func(t *testing.T) {
			s := s.On(t)
			r := s.Do("POST", "/machines/"+own+"/releaseToPool", map[string]any{}, bearer(op))
			wantDRPError(t, r, 403, "", "Requires: machines action:releaseToPool "+own)
		})
		t.Run("PUT with new Profiles", func(t *testing.T) {
			s := s.On(t)
			m := s.Must(200, "GET", "/machines/"+own, nil, bearer(op)).Map(t)
			m["Profiles"] = []string{"pen-secret"}
			s.Must(403, "PUT", "/machines/"+own, m, bearer(op))
		})
		t.Run("the secret stays sealed", func(t *testing.T) {
			s := s.On(t)
			r := s.Must(200, "GET", "/machines/"+own+"/params?aggregate=true&decode=true", nil, bearer(op))
			if strings.Contains(string(r.Body), sekrit) {
				t.Fatalf("the machine token decoded the profile's secret: %s", r.Body)
			}
			var m struct{ Profiles []string }
			s.Must(200, "GET", "/machines/"+own, nil, adm).JSON(t, &m)
			if len(m.Profiles) != 0 {
				t.Fatalf("machine profiles %v after the refused patches", m.Profiles)
			}
			// The check above can see a leak: a profile an admin attaches is
			// the machine's own, and its token reads it decoded.
			s.Must(200, "PATCH", "/machines/"+own, jsonPatch("add", "/Profiles", []string{"pen-secret"}), adm)
			r = s.Must(200, "GET", "/machines/"+own+"/params?aggregate=true&decode=true", nil, bearer(op))
			if !strings.Contains(string(r.Body), sekrit) {
				t.Fatalf("an admin-attached profile's secret is not in the machine's decoded params: %s", r.Body)
			}
			s.Must(200, "PATCH", "/machines/"+own, jsonPatch("replace", "/Profiles", []string{}), adm)
		})
	})
	t.Run("what the agent and task scripts change is allowed", func(t *testing.T) {
		s := s.On(t)
		cur := s.Must(200, "GET", "/machines/"+own, nil, adm).Map(t)
		for _, f := range []string{"Runnable", "Context", "Description", "Address", "HardwareAddrs", "OS", "Arch",
			"Fingerprint", "TaskErrorStacks", "RetryTaskAttempt"} {
			if r := s.Do("PATCH", "/machines/"+own, jsonPatch("add", "/"+f, cur[f]), bearer(op)); r.Status != 200 {
				t.Errorf("PATCH /%s: got %s, want 200", f, r)
			}
		}
		s.Must(200, "PATCH", "/machines/"+own, jsonPatch("replace", "/Description", "by its token"), bearer(inf))
		s.Must(200, "PATCH", "/machines/"+own, jsonPatch("add", "/Params/pen-x", 1), bearer(op))
		s.Must(200, "POST", "/machines/"+own+"/params/pen-y", 2, bearer(op))
		s.Must(200, "PATCH", "/machines/"+own, jsonPatch("add", "/Meta/pen", "m"), bearer(op))
		s.Must(200, "PATCH", "/meta/machines/"+own, jsonPatch("add", "/pen2", "m"), bearer(op))
		s.Must(200, "GET", "/machines/"+own+"/params?aggregate=true", nil, bearer(op))
		s.Must(200, "GET", "/stages/pen-stage", nil, bearer(op))
		s.Must(200, "GET", "/tasks/pen-task", nil, bearer(op))
		s.Must(200, "GET", "/info", nil, bearer(op))
		// callbackDo is the machine's own plugin action: the claim holds,
		// whatever the plugin then answers.
		if r := s.Do("POST", "/machines/"+own+"/actions/callbackDo", map[string]any{"callback/action": "x"}, bearer(op)); r.Status == 401 || r.Status == 403 {
			t.Fatalf("callbackDo refused: %s", r)
		}
	})

	t.Run("another machine is missing to the token, by UUID and by Name", func(t *testing.T) {
		s := s.On(t)
		other := s.AddMachine("pen-other", map[string]any{"Workflow": "pen-wf"})
		otherJob := penJob(t, s, other, adm)
		for _, tk := range []string{bearer(op), bearer(inf)} {
			for _, c := range []struct{ method, path string }{
				{"GET", "/machines/" + other},
				{"GET", "/machines/Name:pen-other"},
				{"GET", "/machines/Name:pen-nowhere"},
				{"GET", "/machines/" + other + "/params"},
				{"GET", "/machines/Name:pen-other/params?aggregate=true"},
				{"PATCH", "/machines/Name:pen-other"},
				{"DELETE", "/machines/Name:pen-other"},
				{"GET", "/machines/Name:pen-other/token"},
				{"GET", "/jobs/" + otherJob},
				{"GET", "/jobs/" + otherJob + "/log"},
				{"PATCH", "/jobs/" + otherJob},
			} {
				var body any
				if c.method == "PATCH" {
					body = jsonPatch("replace", "/Description", "x")
				}
				r := s.Do(c.method, c.path, body, tk)
				if r.Status != 404 {
					t.Errorf("%s %s with the machine token of %s: got %s, want 404", c.method, c.path, own, r)
				}
				if !strings.Contains(c.path, other) && strings.Contains(string(r.Body), other) {
					t.Errorf("%s %s: the reply names the other machine's UUID: %s", c.method, c.path, r)
				}
			}
		}
	})

	t.Run("a tenant's machine token sees no more than its tenant", func(t *testing.T) {
		s := s.On(t)
		s.Must(201, "POST", "/stages", map[string]any{"Name": "pen-hidden-stage"}, adm)
		s.Must(201, "POST", "/tasks", map[string]any{"Name": "pen-hidden-task"}, adm)
		s.Must(201, "POST", "/stages", map[string]any{"Name": "pen-t-stage", "Tasks": []string{"pen-task"}}, adm)
		s.Must(201, "POST", "/workflows", map[string]any{"Name": "pen-t-wf", "Stages": []string{"pen-t-stage"}}, adm)
		// Carol holds everything her machine's operations token holds, so
		// its rendered tokens are hers to read (docs/design.md §10.4).
		s.AddRole("pen-carol", [3]string{"machines", "*", "*"}, [3]string{"jobs", "*", "*"},
			[3]string{"stages,tasks,workflows,profiles", "get,list", "*"}, [3]string{"params", "get", "*"},
			[3]string{"events", "post", "*"}, [3]string{"reservations", "create", "*"})
		s.AddUser("carol", "carol-pen-pw-1", "pen-carol")
		tm := s.AddMachine("pen-tenant-m", map[string]any{"Workflow": "pen-t-wf"})
		s.Must(201, "POST", "/tenants", map[string]any{"Name": "pen-t", "Users": []string{"carol"}, "Members": map[string][]string{
			"machines": {tm}, "stages": {"pen-t-stage"}, "tasks": {"pen-task"}, "profiles": {}}}, adm)
		carol := basic("carol", "carol-pen-pw-1")
		s.Must(404, "GET", "/stages/pen-hidden-stage", nil, carol)
		// Carol runs her machine's workflow and reads the machine token
		// its task renders.
		tmOp, tmInf := renderTokens(t, s, penJob(t, s, tm, carol), carol)
		for _, tok := range []string{bearer(tmOp), bearer(tmInf)} {
			s.Must(200, "GET", "/machines/"+tm, nil, tok)
			s.Must(200, "GET", "/stages/pen-t-stage", nil, tok)
			s.Must(200, "GET", "/tasks/pen-task", nil, tok)
			s.Must(200, "GET", "/params/pen/secret", nil, tok)
			for _, p := range []string{"/stages/pen-hidden-stage", "/stages/pen-stage", "/stages/callback-complete", "/tasks/pen-hidden-task", "/tasks/callback-task"} {
				if r := s.Do("GET", p, nil, tok); r.Status != 404 {
					t.Errorf("GET %s with the tenant machine's token: got %s, want 404", p, r)
				}
			}
		}
		tok := bearer(tmOp)
		// A machine in no tenant is not restricted by tenants.
		s.Must(200, "GET", "/stages/pen-hidden-stage", nil, bearer(op))
		s.Must(200, "GET", "/tasks/pen-hidden-task", nil, bearer(op))
		// Taken out of the tenant, the machine sees what any machine sees.
		s.Must(200, "PATCH", "/tenants/pen-t", jsonPatch("replace", "/Members/machines", []string{}), adm)
		s.Must(200, "GET", "/stages/pen-hidden-stage", nil, tok)
	})
}

// penExactNames: a name with leading or trailing whitespace is refused, and
// a request naming "alice " is never taken for alice.
func penExactNames(t *testing.T, s *tserver) {
	adm := admin()
	t.Run("names with surrounding whitespace are refused at create", func(t *testing.T) {
		cases := []struct {
			prefix string
			body   map[string]any
		}{
			{"users", map[string]any{"Name": "alice ", "Roles": []string{}}},
			{"users", map[string]any{"Name": "alice\t", "Roles": []string{}}},
			{"users", map[string]any{"Name": " alice", "Roles": []string{}}},
			{"roles", map[string]any{"Name": "pen-role ", "Claims": []any{}}},
			{"tenants", map[string]any{"Name": "pen-tenant ", "Users": []string{}, "Members": map[string]any{}}},
			{"profiles", map[string]any{"Name": "pen-prof "}},
			{"stages", map[string]any{"Name": "pen-stage "}},
			{"tasks", map[string]any{"Name": "pen-task "}},
			{"workflows", map[string]any{"Name": "pen-wf ", "Stages": []string{}}},
			{"pools", map[string]any{"Id": "pen-pool "}},
			{"params", map[string]any{"Name": "pen/param ", "Schema": map[string]any{}}},
			{"machines", map[string]any{"Name": "pen-m "}},
		}
		for _, c := range cases {
			t.Run(fmt.Sprintf("%s %q", c.prefix, c.body), func(t *testing.T) {
				s := s.On(t)
				r := s.Do("POST", "/"+c.prefix, c.body, adm)
				wantDRPError(t, r, 422, "", "Invalid")
			})
		}
		s.Must(404, "GET", "/users/alice%20", nil, adm)
	})

	s.AddUser("alice", "alice-pen-pw-1")
	alice := basic("alice", "alice-pen-pw-1")
	aliceTok := bearer(s.Token("alice", alice, ""))
	// Each request names a user that is not alice; the self claim must not
	// answer for it, whether or not that user exists.
	attacks := func(t *testing.T, s *tserver) {
		for _, a := range []string{alice, aliceTok} {
			for _, c := range []struct {
				method, path string
				body         any
				claim        string
			}{
				{"PUT", "/users/alice%20/password", map[string]any{"Password": "taken-over-1"}, "users password alice "},
				{"GET", "/users/alice%20/token", nil, "users token alice "},
				{"GET", "/users/alice%20", nil, "users get alice "},
				{"GET", "/users/%20alice", nil, "users get  alice"},
				{"GET", "/users/alice%09", nil, "users get alice\t"},
			} {
				r := s.Do(c.method, c.path, c.body, a)
				if r.Status != 403 {
					t.Fatalf("%s %s as alice: got %s, want 403", c.method, c.path, r)
				}
				wantDRPError(t, r, r.Status, "", "Requires: "+c.claim)
			}
		}
	}
	t.Run("alice is not alice-space", func(t *testing.T) { attacks(t, s.On(t)) })

	t.Run("a stored alice-space superuser stays out of alice's reach", func(t *testing.T) {
		// Written straight to the store, as data from before names were
		// checked would be.
		s.Stop()
		dsn := s.DSN
		if dsn == "" {
			dsn = s.DataDir + "/provgate.db"
		}
		st, err := store.Open(t.Context(), dsn, store.Options{Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		hash, err := auth.HashPassword("legacy-admin-pw-1")
		if err != nil {
			t.Fatal(err)
		}
		u, _ := json.Marshal(backend.User{Name: "alice ", Secret: auth.NewSecret(), PasswordHash: hash, Roles: []string{"superuser"}})
		if _, err := st.Create(t.Context(), "users", "alice ", u); err != nil {
			t.Fatal(err)
		}
		_ = st.Close()
		s2 := startE2EIn(t, dbCase{Name: s.Name, DSN: s.DSN}, s.DataDir, licenseArgs(t)...).On(t)
		s2.Must(200, "GET", "/users", nil, basic("alice ", "legacy-admin-pw-1"))
		aliceTok = bearer(s2.Token("alice", alice, ""))
		attacks(t, s2)
		s2.Must(200, "GET", "/users", nil, basic("alice ", "legacy-admin-pw-1"))
		s2.Must(403, "GET", "/users", nil, basic("alice ", "taken-over-1"))
	})
}

// penRestrictedCredentials: a restricted token keeps get and token on its
// own user and info get, but never changes the user's password or Secret,
// however wide its roles or restriction.
func penRestrictedCredentials(t *testing.T, s *tserver) {
	s.AddRole("pen-mget", [3]string{"machines", "get,list", "*"})
	s.AddRole("pen-selfadmin", [3]string{"users", "*", "dave"})
	s.AddUser("dave", "dave-pen-pw-1", "pen-mget", "pen-selfadmin")
	s.AddUser("erin", "erin-pen-pw-1", "superuser")
	m1 := s.AddMachine("pen-m1", nil)
	dave, erin := basic("dave", "dave-pen-pw-1"), basic("erin", "erin-pen-pw-1")

	restricted := []struct{ name, user, authz, query string }{
		{"machines get M1", "dave", dave, "?scope=machines&action=get&specific=" + m1},
		{"roles=pen-mget", "dave", dave, "?roles=pen-mget"},
		{"roles=pen-selfadmin", "dave", dave, "?roles=pen-selfadmin"},
		{"scope users on itself", "erin", erin, "?scope=users&action=*&specific=erin"},
		{"roles=superuser", "erin", erin, "?roles=superuser"},
		{"everything", "erin", erin, "?scope=*&action=*&specific=*"},
	}
	for _, c := range restricted {
		t.Run(c.name, func(t *testing.T) {
			s := s.On(t)
			tok := bearer(s.Token(c.user, c.authz, c.query))
			refreshed := bearer(s.Token(c.user, tok, ""))
			for _, a := range []string{tok, refreshed} {
				s.Must(200, "GET", "/users/"+c.user, nil, a)
				s.Must(200, "GET", "/info", nil, a)
				s.Must(200, "GET", "/users/"+c.user+"/token", nil, a)
				r := s.Do("PUT", "/users/"+c.user+"/password", map[string]any{"Password": "taken-over-1"}, a)
				wantDRPError(t, r, 403, "", "Requires: users password "+c.user)
				r = s.Do("POST", "/users/"+c.user+"/secret", nil, a)
				wantDRPError(t, r, 403, "", "Requires: users update:/Secret "+c.user)
				s.Must(403, "PATCH", "/users/"+c.user, jsonPatch("replace", "/Secret", "chosen"), a)
				s.Must(403, "PATCH", "/users/"+c.user, jsonPatch("replace", "/PasswordHash", "MTYzODQkOCQxJGFiJGNk"), a)
			}
			// The password and Secret are unchanged: Basic and the token work.
			s.Must(200, "GET", "/users/"+c.user, nil, c.authz)
			s.Must(200, "GET", "/users/"+c.user, nil, tok)
		})
	}
	t.Run("the machines get M1 token still reads M1", func(t *testing.T) {
		s := s.On(t)
		tok := bearer(s.Token("dave", dave, "?scope=machines&action=get&specific="+m1))
		s.Must(200, "GET", "/machines/"+m1, nil, tok)
	})
	t.Run("unrestricted tokens and Basic change their own password", func(t *testing.T) {
		s := s.On(t)
		tok := bearer(s.Token("dave", dave, ""))
		s.Must(200, "PUT", "/users/dave/password", map[string]any{"Password": "dave-pen-pw-2"}, tok)
		s.Must(200, "PUT", "/users/dave/password", map[string]any{"Password": "dave-pen-pw-3"}, basic("dave", "dave-pen-pw-2"))
		s.Must(200, "POST", "/users/erin/secret", nil, erin)
	})
}

// penSharedLoginLimit: failed logins through one server count on the other
// (two servers on one PostgreSQL schema), or across a restart (SQLite,
// where one server owns the file). The limit is 10 failures per user name
// per minute.
func penSharedLoginLimit(t *testing.T, db dbCase) {
	a := startE2E(t, db)
	a.AddUser("pen-victim", "pen-victim-pw-1")
	var b *tserver
	if db.DSN != "" {
		b = startE2E(t, db)
	}
	for i := 0; i < 10; i++ {
		srv := a
		if b != nil && i%2 == 1 {
			srv = b
		}
		if db.DSN == "" && i == 5 {
			// Half the failures, then a restart.
			a.Stop()
			a = startE2EIn(t, db, a.DataDir)
			srv = a
		}
		srv.Must(403, "GET", "/users/pen-victim", nil, basic("pen-victim", fmt.Sprintf("wrong-%d", i)))
	}
	for _, srv := range []*tserver{a, b} {
		if srv == nil {
			continue
		}
		// Even the right password waits: the name is over its limit.
		r := srv.Do("GET", "/users/pen-victim", nil, basic("pen-victim", "pen-victim-pw-1"))
		wantDRPError(t, r, 429, "", "too many failed logins")
		if r.Header.Get("Retry-After") == "" {
			t.Fatalf("429 without Retry-After: %v", r.Header)
		}
	}
	// Another name is not limited.
	a.AddUser("pen-bystander", "pen-bystander-pw-1")
	a.Must(200, "GET", "/users/pen-bystander", nil, basic("pen-bystander", "pen-bystander-pw-1"))
}
