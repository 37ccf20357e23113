package main

import (
	"reflect"
	"sort"
	"strings"
	"testing"
)

// The escalation report (docs/design.md §5.9, §9.8) through the real HTTP
// API on every database: it names who can hand out authority and through
// which role, each route being what a real request of that user gets; it
// lists only the users and objects the asker may see, and a hidden role
// looks exactly like a missing one.

type escalation struct {
	Users []struct {
		User   string
		Routes []grantRoute
	}
}

type grantRoute struct {
	Path, Claim, Role, Held, Detail string
	Delegation                      bool
}

func (e escalation) routes(user string) []grantRoute {
	for _, u := range e.Users {
		if u.User == user {
			return u.Routes
		}
	}
	return nil
}

func (e escalation) users() []string {
	var out []string
	for _, u := range e.Users {
		out = append(out, u.User)
	}
	sort.Strings(out)
	return out
}

func findRoute(rs []grantRoute, claim string) *grantRoute {
	for i := range rs {
		if rs[i].Claim == claim {
			return &rs[i]
		}
	}
	return nil
}

// escalationSetup adds, beside explorerSetup's users: x-hd (helpdesk:
// users create,update:/Roles and get,list *, roles bind helpdesk-granted),
// x-pw (pwreset: users password x-nobody,x-olga), x-tw (taskwriter: tasks
// create,update *) and x-binder (binder: roles bind on an existing role
// and on a missing one).
func escalationSetup(t *testing.T, s *tserver) {
	t.Helper()
	s.AddRole("helpdesk-granted", [3]string{"machines", "get", "*"})
	s.AddRole("x-secret-role", [3]string{"pools", "get", "*"})
	s.AddRole("helpdesk", [3]string{"users", "create,update:/Roles,get,list", "*"}, [3]string{"roles", "bind", "helpdesk-granted"})
	s.AddRole("pwreset", [3]string{"users", "password", "x-nobody,x-olga"})
	s.AddRole("taskwriter", [3]string{"tasks", "create,update", "*"})
	s.AddRole("binder", [3]string{"roles", "bind", "x-secret-role,x-missing-role"})
	s.AddUser("x-hd", "hd-pw-1", "helpdesk")
	s.AddUser("x-pw", "pw-pw-1", "pwreset")
	s.AddUser("x-tw", "tw-pw-1", "taskwriter")
	s.AddUser("x-binder", "binder-pw-1", "binder")
}

func TestE2EEscalation(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, s *tserver) {
		explorerSetup(t, s)
		escalationSetup(t, s)
		var all escalation
		s.Must(200, "GET", "/access/escalation", nil, admin()).JSON(t, &all)

		t.Run("names the path, the claim and the role", func(t *testing.T) {
			hd := all.routes("x-hd")
			for _, c := range []string{"users create *", "users update:/Roles *"} {
				r := findRoute(hd, c)
				if r == nil || r.Path != "users' Roles" || r.Role != "helpdesk" || r.Delegation {
					t.Errorf("x-hd %s: %+v in %+v", c, r, hd)
				}
			}
			bind := findRoute(hd, "roles bind helpdesk-granted")
			if bind == nil || !bind.Delegation || bind.Role != "helpdesk" || bind.Held != "roles bind helpdesk-granted" {
				t.Errorf("x-hd's bind: %+v in %+v", bind, hd)
			}
			if r := findRoute(hd, "roles bind *"); r != nil {
				t.Errorf("x-hd binds only helpdesk-granted: %+v", r)
			}
			pw := all.routes("x-pw")
			for _, c := range []string{"users password x-nobody", "users password x-olga"} {
				if r := findRoute(pw, c); r == nil || r.Path != "other users' credentials" || r.Role != "pwreset" {
					t.Errorf("x-pw %s: %+v", c, pw)
				}
			}
			tw := all.routes("x-tw")
			if r := findRoute(tw, "tasks update:/ExtraClaims *"); r == nil || r.Role != "taskwriter" {
				t.Errorf("x-tw: %+v", tw)
			}
			// poolop (pools * x-p1) configures x-p1's action groups.
			if r := findRoute(all.routes("x-olga"), "pools update:/EnterActions x-p1"); r == nil || r.Role != "poolop" {
				t.Errorf("x-olga: %+v", all.routes("x-olga"))
			}
			su := all.routes("rocketskates")
			for _, c := range []string{"roles escalate *", "users impersonate *", "plugins exec *", "tenants update:/Members *", "plugins update:/Params *"} {
				if r := findRoute(su, c); r == nil || r.Role != "superuser" {
					t.Errorf("the superuser's %s: %+v", c, r)
				}
			}
			// Users who hand out nothing are not listed; nor is a user's
			// own password (a self claim).
			for _, u := range []string{"x-tina", "x-nobody", "x-auditor"} {
				if rs := all.routes(u); rs != nil {
					t.Errorf("%s listed: %+v", u, rs)
				}
			}
		})

		t.Run("each route is what the real request gets", func(t *testing.T) {
			hd := basic("x-hd", "hd-pw-1")
			s.Must(201, "POST", "/users", map[string]any{"Name": "x-made", "Roles": []string{"helpdesk-granted"}}, hd)
			wantDRPError(t, s.Do("POST", "/users", map[string]any{"Name": "x-made2", "Roles": []string{"superuser"}}, hd), 403, "AUTH", "cannot grant")
			// x-nobody holds nothing to take over; x-olga's roles are more
			// than x-pw holds, so her password stays hers (§5.9), and x-tina's
			// is no route at all.
			pw := basic("x-pw", "pw-pw-1")
			s.Must(200, "PUT", "/users/x-nobody/password", map[string]any{"Password": "nobody-pw-1"}, pw)
			wantDRPError(t, s.Do("PUT", "/users/x-olga/password", map[string]any{"Password": "olga-pw-2"}, pw), 403, "AUTH", "cannot grant")
			wantDRPError(t, s.Do("PUT", "/users/x-tina/password", map[string]any{"Password": "tina-pw-2"}, pw), 403, "", "")
		})

		t.Run("a user without users get on others sees only itself", func(t *testing.T) {
			var e escalation
			s.Must(200, "GET", "/access/escalation", nil, basic("x-tw", "tw-pw-1")).JSON(t, &e)
			if got := e.users(); !reflect.DeepEqual(got, []string{"x-tw"}) {
				t.Errorf("x-tw sees %v", got)
			}
			s.Must(200, "GET", "/access/escalation", nil, basic("x-nobody", "nobody-pw-1")).JSON(t, &e)
			if len(e.Users) != 0 {
				t.Errorf("x-nobody sees %+v", e.Users)
			}
			wantDRPError(t, s.Do("GET", "/access/escalation", nil, ""), 401, "", "")
		})

		t.Run("no existence oracle", func(t *testing.T) {
			// The admin sees both roles x-binder may bind: one exists, one
			// does not.
			b := all.routes("x-binder")
			if findRoute(b, "roles bind x-secret-role") == nil || findRoute(b, "roles bind x-missing-role") == nil {
				t.Fatalf("x-binder as the admin sees it: %+v", b)
			}
			// x-auditor may get users but no role: neither the existing nor
			// the missing role is named, and no role's claim is shown.
			var e escalation
			s.Must(200, "GET", "/access/escalation", nil, basic("x-auditor", "auditor-pw-1")).JSON(t, &e)
			if rs := e.routes("x-binder"); rs != nil {
				t.Errorf("x-auditor sees x-binder's binds: %+v", rs)
			}
			for _, u := range e.Users {
				for _, r := range u.Routes {
					if r.Held != "" || strings.Contains(r.Claim, "x-secret-role") || strings.Contains(r.Claim, "x-missing-role") {
						t.Errorf("x-auditor sees %s's route %+v", u.User, r)
					}
				}
			}
			if findRoute(e.routes("x-hd"), "users create *") == nil {
				t.Errorf("x-auditor does not see x-hd's users create: %+v", e.Users)
			}
		})
	}, licenseArgs(t)...)
}
