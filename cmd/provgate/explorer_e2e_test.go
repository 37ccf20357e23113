package main

import (
	"encoding/json"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// End-to-end proof of the access explorer (docs/design.md §9.8) through
// the real HTTP API on every database: answers come from the gateway's own
// authorization, questions about others need get on them, and an object or
// user the asker may not see looks exactly like a missing one.

type explanation struct {
	User, Method, Path string
	Allowed            bool
	Status             int
	Messages           []string
	Required           []struct{ Scope, Action, Specific string }
	Steps              []struct {
		Step, Outcome, Detail, Role, Held, Package, Message string
		GrantedBy                                           []string
		Claim                                               *struct{ Scope, Action, Specific string }
	}
	Missing    []struct{ Scope, Action, Specific string }
	GrantedBy  []string
	DecisionID string
	Revision   string
}

func explainAs(t *testing.T, s *tserver, authz string, q map[string]any) explanation {
	t.Helper()
	var x explanation
	s.Must(200, "POST", "/access/explain", q, authz).JSON(t, &x)
	return x
}

func (x explanation) step(kind string) []int {
	var out []int
	for i, st := range x.Steps {
		if st.Step == kind {
			out = append(out, i)
		}
	}
	return out
}

type explorerWorld struct {
	m1, m2 string
}

// explorerSetup: roles mreader (machines get,list *), poolop (pools * p1),
// useradmin (users get,list *); tenant x-t1 shows machine m1 only and holds
// x-tina; tenant x-t2 shows no machine and holds x-tom.
func explorerSetup(t *testing.T, s *tserver) explorerWorld {
	t.Helper()
	w := explorerWorld{m1: s.AddMachine("x-m1", nil), m2: s.AddMachine("x-m2", nil)}
	s.AddRole("mreader", [3]string{"machines", "get,list", "*"})
	s.AddRole("poolop", [3]string{"pools", "*", "x-p1"})
	s.AddRole("useradmin", [3]string{"users", "get,list", "*"})
	s.Must(201, "POST", "/pools", map[string]any{"Id": "x-p1"}, admin())
	s.Must(201, "POST", "/pools", map[string]any{"Id": "x-p2"}, admin())
	s.AddUser("x-olga", "olga-pw-1", "mreader", "poolop")
	s.AddUser("x-tina", "tina-pw-1", "mreader")
	s.AddUser("x-tom", "tom-pw-1", "mreader", "useradmin")
	s.AddUser("x-auditor", "auditor-pw-1", "useradmin")
	s.AddUser("x-nobody", "nobody-pw-1")
	s.Must(201, "POST", "/tenants", map[string]any{"Name": "x-t1", "Users": []string{"x-tina"},
		"Members": map[string][]string{"machines": {w.m1}}}, admin())
	s.Must(201, "POST", "/tenants", map[string]any{"Name": "x-t2", "Users": []string{"x-tom"},
		"Members": map[string][]string{"machines": {}}}, admin())
	return w
}

func TestE2EExplorer(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, s *tserver) {
		w := explorerSetup(t, s)
		olga, tina, tom := basic("x-olga", "olga-pw-1"), basic("x-tina", "tina-pw-1"), basic("x-tom", "tom-pw-1")
		auditor, nobody := basic("x-auditor", "auditor-pw-1"), basic("x-nobody", "nobody-pw-1")

		t.Run("explain allowed names the covering role", func(t *testing.T) {
			x := explainAs(t, s.On(t), olga, map[string]any{"Method": "GET", "Path": "/machines/" + w.m1})
			if !x.Allowed || x.Status != 200 || x.User != "x-olga" || x.DecisionID == "" || x.Revision == "" {
				t.Fatalf("explanation %+v", x)
			}
			claims := x.step("claim")
			if len(claims) != 1 || x.Steps[claims[0]].Role != "mreader" || x.Steps[claims[0]].Outcome != "pass" {
				t.Errorf("claim steps %+v", x.Steps)
			}
			var kinds []string
			for _, st := range x.Steps {
				kinds = append(kinds, st.Step)
			}
			if want := []string{"route", "tenant", "license", "claim", "veto", "decision"}; !reflect.DeepEqual(kinds, want) {
				t.Errorf("steps %v, want %v", kinds, want)
			}
		})
		t.Run("explain refusal names what is missing", func(t *testing.T) {
			q := map[string]any{"User": "x-olga", "Method": "PATCH", "Path": "/pools/x-p2",
				"Body": []map[string]any{{"op": "replace", "path": "/Description", "value": "d"}}}
			x := explainAs(t, s.On(t), admin(), q)
			if x.Allowed || x.Status != 403 {
				t.Fatalf("explanation %+v", x)
			}
			if len(x.Missing) != 1 || x.Missing[0].Action != "update:/Description" || x.Missing[0].Specific != "x-p2" {
				t.Errorf("missing %+v", x.Missing)
			}
			if !strings.Contains(strings.Join(x.GrantedBy, ","), "superuser") {
				t.Errorf("granted by %v, want superuser among them", x.GrantedBy)
			}
			// The real request gets what explain said.
			r := s.Do("PATCH", "/pools/x-p2", q["Body"], olga)
			if r.Status != x.Status {
				t.Errorf("real request %d, explain %d", r.Status, x.Status)
			}
			// The asker lists only the roles it may see: olga may get none.
			self := explainAs(t, s.On(t), olga, q)
			if self.Status != 403 || len(self.GrantedBy) != 0 {
				t.Errorf("olga's own explanation %+v", self)
			}
		})
		t.Run("explain tenant hiding is a 404 before any role", func(t *testing.T) {
			x := explainAs(t, s.On(t), admin(), map[string]any{"User": "x-tina", "Method": "GET", "Path": "/machines/" + w.m2})
			if x.Allowed || x.Status != 404 {
				t.Fatalf("explanation %+v", x)
			}
			ten := x.Steps[x.step("tenant")[0]]
			if ten.Outcome != "fail" || !strings.Contains(ten.Detail, "x-t1") {
				t.Errorf("tenant step %+v", ten)
			}
			if c := x.Steps[x.step("claim")[0]]; c.Outcome != "not reached" {
				t.Errorf("claim step %+v, want not reached", c)
			}
			if r := s.Do("GET", "/machines/"+w.m2, nil, tina); r.Status != 404 {
				t.Errorf("real request %s", r)
			}
		})
		t.Run("questions about others need users get", func(t *testing.T) {
			q := func(user string) map[string]any {
				return map[string]any{"User": user, "Method": "GET", "Path": "/machines"}
			}
			// A user that exists and one that does not: the same refusal.
			a := wantDRPError(t, s.Do("POST", "/access/explain", q("x-olga"), nobody), 403, "", "Requires: users get x-olga")
			b := wantDRPError(t, s.Do("POST", "/access/explain", q("x-ghost"), nobody), 403, "", "Requires: users get x-ghost")
			if strings.ReplaceAll(a.messages(), "x-olga", "X") != strings.ReplaceAll(b.messages(), "x-ghost", "X") {
				t.Errorf("existing %q, missing %q", a.messages(), b.messages())
			}
			s.Must(200, "POST", "/access/explain", q("x-olga"), auditor)
			s.Must(403, "GET", "/access/users/x-olga", nil, nobody)
			s.Must(200, "GET", "/access/users/x-nobody", nil, nobody)
			s.Must(200, "GET", "/access/users/x-olga", nil, auditor)
			wantDRPError(t, s.Do("GET", "/access/users/x-ghost", nil, auditor), 404, "", "")
		})
		t.Run("hidden objects look exactly like missing ones", func(t *testing.T) {
			// x-tom's tenant shows no machine: m1 is hidden from him.
			const ghost = "00000000-0000-4000-8000-000000000000"
			hidden := s.Do("GET", "/access/who?scope=machines&action=get&key="+w.m1, nil, tom)
			missing := s.Do("GET", "/access/who?scope=machines&action=get&key="+ghost, nil, tom)
			if hidden.Status != 404 || missing.Status != 404 ||
				strings.ReplaceAll(string(hidden.Body), w.m1, "X") != strings.ReplaceAll(string(missing.Body), ghost, "X") {
				t.Errorf("hidden %s\nmissing %s", hidden, missing)
			}
			// Explaining another user's request on the hidden machine: the
			// same answer as on a missing one.
			xh := explainAs(t, s.On(t), tom, map[string]any{"User": "x-olga", "Method": "GET", "Path": "/machines/" + w.m1})
			xm := explainAs(t, s.On(t), tom, map[string]any{"User": "x-olga", "Method": "GET", "Path": "/machines/" + ghost})
			if xh.Status != 404 || xm.Status != 404 {
				t.Fatalf("hidden %+v\nmissing %+v", xh, xm)
			}
			norm := func(x explanation, key string) string {
				x.DecisionID = ""
				b, _ := json.Marshal(x)
				return strings.ReplaceAll(string(b), key, "X")
			}
			if norm(xh, w.m1) != norm(xm, ghost) {
				t.Errorf("hidden %s\nmissing %s", norm(xh, w.m1), norm(xm, ghost))
			}
			// Who lists only users the asker may see: olga sees no user but
			// herself.
			var who struct{ Users []string }
			s.Must(200, "GET", "/access/who?scope=machines&action=get&key="+w.m1, nil, olga).JSON(t, &who)
			if !reflect.DeepEqual(who.Users, []string{"x-olga"}) {
				t.Errorf("olga's who: %v", who.Users)
			}
		})
		t.Run("who can", func(t *testing.T) {
			var who struct {
				Users  []string
				Tokens []struct {
					Kind    string
					Allowed bool
				}
			}
			s.Must(200, "GET", "/access/who?scope=machines&action=get&key="+w.m1, nil, admin()).JSON(t, &who)
			got := strings.Join(who.Users, ",")
			for _, u := range []string{"rocketskates", "x-olga", "x-tina"} {
				if !strings.Contains(got, u) {
					t.Errorf("who can get m1: %v lacks %s", who.Users, u)
				}
			}
			for _, u := range []string{"x-tom", "x-nobody", "x-auditor"} {
				if strings.Contains(got, u) {
					t.Errorf("who can get m1: %v has %s", who.Users, u)
				}
			}
			ops := false
			for _, tk := range who.Tokens {
				ops = ops || (tk.Kind == "operations" && tk.Allowed)
			}
			if !ops {
				t.Errorf("m1's operations token may get m1: %+v", who.Tokens)
			}
			s.Must(200, "GET", "/access/who?scope=machines&action=get&key="+w.m2, nil, admin()).JSON(t, &who)
			if strings.Contains(strings.Join(who.Users, ","), "x-tina") {
				t.Errorf("who can get m2: %v has x-tina, whose tenant hides it", who.Users)
			}
			wantDRPError(t, s.Do("GET", "/access/who?scope=nosuch&action=get", nil, admin()), 400, "", "scope")
		})
		t.Run("user matrix", func(t *testing.T) {
			var m struct {
				User   string
				Scopes []struct {
					Scope   string
					Actions []struct {
						Action, Access string
						Specifics      []string
					}
				}
			}
			s.Must(200, "GET", "/access/users/x-olga", nil, admin()).JSON(t, &m)
			cell := func(scope, action string) (string, []string) {
				for _, sc := range m.Scopes {
					for _, a := range sc.Actions {
						if sc.Scope == scope && a.Action == action {
							return a.Access, a.Specifics
						}
					}
				}
				return "", nil
			}
			if a, _ := cell("machines", "get"); a != "all" {
				t.Errorf("machines get: %s", a)
			}
			if a, sp := cell("pools", "delete"); a != "some" || !reflect.DeepEqual(sp, []string{"x-p1"}) {
				t.Errorf("pools delete: %s %v", a, sp)
			}
			if a, _ := cell("machines", "delete"); a != "none" {
				t.Errorf("machines delete: %s", a)
			}
			if a, sp := cell("users", "get"); a != "some" || !reflect.DeepEqual(sp, []string{"x-olga"}) {
				t.Errorf("users get: %s %v", a, sp)
			}
		})
		t.Run("tenant view", func(t *testing.T) {
			var v struct {
				Users  []string
				Scopes []struct {
					Scope, Visibility string
					Keys              []string
				}
			}
			s.Must(200, "GET", "/access/tenants/x-t1", nil, admin()).JSON(t, &v)
			for _, sc := range v.Scopes {
				switch sc.Scope {
				case "machines":
					if sc.Visibility != "listed" || !reflect.DeepEqual(sc.Keys, []string{w.m1}) {
						t.Errorf("machines %+v", sc)
					}
				case "pools":
					if sc.Visibility != "unrestricted" {
						t.Errorf("pools %+v", sc)
					}
				}
			}
			if !reflect.DeepEqual(v.Users, []string{"x-tina"}) {
				t.Errorf("users %v", v.Users)
			}
			s.Must(403, "GET", "/access/tenants/x-t1", nil, nobody)
		})
		t.Run("role diff", func(t *testing.T) {
			var d struct{ OnlyA, OnlyB []string }
			s.Must(200, "GET", "/access/roles/diff?a=mreader&b=poolop", nil, admin()).JSON(t, &d)
			if !reflect.DeepEqual(d.OnlyA, []string{"machines get *", "machines list *"}) || len(d.OnlyB) != 7 {
				t.Errorf("diff %+v", d)
			}
			s.Must(403, "GET", "/access/roles/diff?a=mreader&b=poolop", nil, nobody)
			wantDRPError(t, s.Do("GET", "/access/roles/diff?a=mreader&b=nosuch", nil, admin()), 404, "", "")
		})
	}, licenseArgs(t)...)
}

// provgate access explain|who|what|diff asks a running server with the
// credentials provgate import reads.
func TestE2EAccessCommand(t *testing.T) {
	t.Parallel()
	s := startE2E(t, dbCase{Name: "sqlite"}, licenseArgs(t)...)
	w := explorerSetup(t, s)
	root := strings.TrimSuffix(s.Base, "/api/v3")
	cli := func(t *testing.T, env map[string]string, args ...string) (string, error) {
		t.Helper()
		var out, errb strings.Builder
		err := run(t.Context(), append([]string{"access"}, args...), func(k string) string { return env[k] }, &out, &errb)
		return out.String() + errb.String(), err
	}
	env := map[string]string{"RS_ENDPOINT": root, "RS_KEY": "x-olga:olga-pw-1"}
	out, err := cli(t, env, "explain", "--insecure", "GET", "/machines/"+w.m1)
	if err != nil || !strings.Contains(out, "ALLOWED (200)") || !strings.Contains(out, "held by role mreader") {
		t.Errorf("explain: %v\n%s", err, out)
	}
	out, err = cli(t, env, "explain", "--insecure", "PATCH", "/pools/x-p2", `[{"op":"replace","path":"/Description","value":"x"}]`)
	if err != nil || !strings.Contains(out, "REFUSED (403)") || !strings.Contains(out, "claim pools update:/Description x-p2") {
		t.Errorf("explain refusal: %v\n%s", err, out)
	}
	adminEnv := map[string]string{"RS_ENDPOINT": root, "RS_KEY": "rocketskates:" + e2eAdminPassword}
	out, err = cli(t, adminEnv, "who", "--insecure", "--scope", "machines", "--action", "get", "--object", w.m1)
	if err != nil || !regexp.MustCompile(`user +x-tina`).MatchString(out) || strings.Contains(out, "x-nobody") {
		t.Errorf("who: %v\n%s", err, out)
	}
	out, err = cli(t, adminEnv, "what", "--insecure", "x-olga")
	if err != nil || !strings.Contains(out, "x-p1") || !strings.Contains(out, "machines") {
		t.Errorf("what: %v\n%s", err, out)
	}
	escalationSetup(t, s)
	out, err = cli(t, adminEnv, "escalation", "--insecure")
	if err != nil || !regexp.MustCompile(`x-hd +explicit delegation \[delegation\] +roles bind helpdesk-granted +helpdesk \(roles bind helpdesk-granted\)`).MatchString(out) ||
		regexp.MustCompile(`(?m)^ +x-nobody `).MatchString(out) {
		t.Errorf("escalation: %v\n%s", err, out)
	}
	out, err = cli(t, adminEnv, "diff", "--insecure", "mreader", "poolop")
	if err != nil || !strings.Contains(out, "only in mreader:\n  machines get *") {
		t.Errorf("diff: %v\n%s", err, out)
	}
	// A question the caller may not ask fails with the server's reason.
	nobody := map[string]string{"RS_ENDPOINT": root, "RS_KEY": "x-nobody:nobody-pw-1"}
	if out, err := cli(t, nobody, "what", "--insecure", "x-olga"); err == nil || !strings.Contains(err.Error(), "Requires: users get x-olga") {
		t.Errorf("what as nobody: %v\n%s", err, out)
	}
	if _, err := cli(t, env, "explain", "--insecure"); err == nil || report(err, &strings.Builder{}) != 2 {
		t.Errorf("explain without a request: %v", err)
	}
}
