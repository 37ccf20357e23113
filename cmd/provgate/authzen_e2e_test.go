package main

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// End-to-end proof of the AuthZEN Authorization API 1.0 PDP
// (docs/design.md §9.9) on every database: discovery, evaluation,
// evaluations with defaults, overrides and the three semantics, the three
// searches with page tokens, X-Request-ID echoed, 400 for malformed
// requests, and the explorer's rules on who may ask.

func TestE2EAuthZEN(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, s *tserver) {
		w := explorerSetup(t, s)
		root := strings.TrimSuffix(s.Base, "/api/v3")
		olga, tom, nobody := basic("x-olga", "olga-pw-1"), basic("x-tom", "tom-pw-1"), basic("x-nobody", "nobody-pw-1")
		post := func(t *testing.T, path string, body any, authz string, hdrs ...string) resp {
			t.Helper()
			r, err := s.SendURL("POST", root+"/access/v1"+path, body, authz, hdrs...)
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
		eval := func(subject, action, scope, key string) map[string]any {
			return map[string]any{"subject": map[string]any{"type": "user", "id": subject},
				"action": map[string]any{"name": action}, "resource": map[string]any{"type": scope, "id": key}}
		}
		type decision struct {
			Decision bool
			Context  map[string]any
		}

		t.Run("discovery", func(t *testing.T) {
			r, err := s.SendURL("GET", root+"/.well-known/authzen-configuration", nil, "")
			if err != nil || r.Status != 200 {
				t.Fatalf("%v %s", err, r)
			}
			m := r.Map(t)
			if m["policy_decision_point"] != root || m["access_evaluation_endpoint"] != root+"/access/v1/evaluation" ||
				m["search_action_endpoint"] != root+"/access/v1/search/action" {
				t.Errorf("metadata %v", m)
			}
		})
		t.Run("evaluation", func(t *testing.T) {
			var d decision
			r := post(t, "/evaluation", eval("x-olga", "get", "machines", w.m1), olga, "X-Request-ID", "req-1")
			r.JSON(t, &d)
			if r.Status != 200 || !d.Decision || r.Header.Get("X-Request-ID") != "req-1" {
				t.Errorf("%s %v", r, r.Header)
			}
			d = decision{}
			post(t, "/evaluation", eval("x-olga", "delete", "machines", w.m1), admin()).JSON(t, &d)
			if d.Decision || d.Context["status"] != float64(403) || !strings.Contains(d.Context["reason"].(string), "Requires: machines delete") {
				t.Errorf("refusal %+v", d)
			}
			// x-tina's tenant hides m2: a decision false saying 404.
			d = decision{}
			post(t, "/evaluation", eval("x-tina", "get", "machines", w.m2), admin()).JSON(t, &d)
			if d.Decision || d.Context["status"] != float64(404) {
				t.Errorf("hidden %+v", d)
			}
			// A long request id comes back exactly as sent.
			long := strings.Repeat("r", 100)
			if r := post(t, "/evaluation", eval("x-olga", "get", "machines", w.m1), olga, "X-Request-ID", long); r.Header.Get("X-Request-ID") != long {
				t.Errorf("X-Request-ID %q", r.Header.Get("X-Request-ID"))
			}
		})
		t.Run("malformed is 400", func(t *testing.T) {
			for name, body := range map[string]any{
				"no subject":    map[string]any{"action": map[string]any{"name": "get"}, "resource": map[string]any{"type": "machines", "id": "x"}},
				"not an object": "[1,2]",
				"wrong type":    map[string]any{"subject": "x-olga", "action": map[string]any{"name": "get"}, "resource": map[string]any{"type": "machines", "id": "x"}},
				"no action":     map[string]any{"subject": map[string]any{"type": "user", "id": "x-olga"}, "resource": map[string]any{"type": "machines", "id": "x"}},
			} {
				if r := post(t, "/evaluation", body, olga); r.Status != 400 || len(r.Body) == 0 {
					t.Errorf("%s: %s", name, r)
				}
			}
			bad := map[string]any{"options": map[string]any{"evaluations_semantic": "sometimes"},
				"evaluations": []any{eval("x-olga", "get", "machines", w.m1)}}
			if r := post(t, "/evaluations", bad, olga); r.Status != 400 {
				t.Errorf("bad semantic: %s", r)
			}
			missing := map[string]any{"evaluations": []any{map[string]any{"action": map[string]any{"name": "get"}}}}
			if r := post(t, "/evaluations", missing, olga); r.Status != 400 {
				t.Errorf("item without subject or default: %s", r)
			}
			if r := post(t, "/evaluation", eval("x-olga", "get", "machines", w.m1), ""); r.Status != 401 {
				t.Errorf("anonymous: %s", r)
			}
		})
		t.Run("evaluations defaults overrides semantics", func(t *testing.T) {
			body := func(semantic string) map[string]any {
				return map[string]any{
					"subject":  map[string]any{"type": "user", "id": "x-olga"},
					"action":   map[string]any{"name": "get"},
					"resource": map[string]any{"type": "machines", "id": w.m1},
					"options":  map[string]any{"evaluations_semantic": semantic},
					"evaluations": []any{
						map[string]any{},
						map[string]any{"action": map[string]any{"name": "delete"}},
						map[string]any{"resource": map[string]any{"type": "pools", "id": "x-p1"}, "action": map[string]any{"name": "update:/Description"}},
					},
				}
			}
			got := func(semantic string) []bool {
				var out struct{ Evaluations []decision }
				post(t, "/evaluations", body(semantic), admin()).JSON(t, &out)
				var ds []bool
				for _, d := range out.Evaluations {
					ds = append(ds, d.Decision)
				}
				return ds
			}
			for semantic, want := range map[string][]bool{
				"execute_all":            {true, false, true},
				"deny_on_first_deny":     {true, false},
				"permit_on_first_permit": {true},
			} {
				if g := got(semantic); !reflect.DeepEqual(g, want) {
					t.Errorf("%s: %v, want %v", semantic, g, want)
				}
			}
			var single decision
			one := eval("x-olga", "get", "machines", w.m1)
			post(t, "/evaluations", one, admin()).JSON(t, &single)
			if !single.Decision {
				t.Errorf("evaluations without an array is one evaluation: %+v", single)
			}
		})
		t.Run("who may ask", func(t *testing.T) {
			var d decision
			post(t, "/evaluation", eval("x-olga", "get", "machines", w.m1), nobody).JSON(t, &d)
			if d.Decision || d.Context["error"] == nil {
				t.Errorf("nobody asking about olga: %+v", d)
			}
			// A machine tom's tenant hides, and a missing one: the same.
			const ghost = "00000000-0000-4000-8000-000000000000"
			a := post(t, "/evaluation", eval("x-tom", "get", "machines", w.m1), tom)
			b := post(t, "/evaluation", eval("x-tom", "get", "machines", ghost), tom)
			if string(a.Body) != strings.ReplaceAll(string(b.Body), ghost, w.m1) {
				t.Errorf("hidden %s\nmissing %s", a, b)
			}
		})
		t.Run("search subject pages", func(t *testing.T) {
			req := map[string]any{"subject": map[string]any{"type": "user"}, "action": map[string]any{"name": "get"},
				"resource": map[string]any{"type": "machines", "id": w.m1}, "page": map[string]any{"limit": 1}}
			var all []string
			for i := 0; i < 20; i++ {
				var out struct {
					Page struct {
						NextToken string `json:"next_token"`
					}
					Results []struct{ Type, ID string }
				}
				r := post(t, "/search/subject", req, admin())
				if r.Status != 200 {
					t.Fatalf("%s", r)
				}
				r.JSON(t, &out)
				for _, x := range out.Results {
					all = append(all, x.ID)
				}
				if out.Page.NextToken == "" {
					break
				}
				req["page"] = map[string]any{"limit": 1, "token": out.Page.NextToken}
			}
			if want := []string{"rocketskates", "x-olga", "x-tina"}; !reflect.DeepEqual(all, want) {
				t.Errorf("subjects %v, want %v", all, want)
			}
			// A token is refused with another request.
			req["action"] = map[string]any{"name": "delete"}
			if r := post(t, "/search/subject", req, admin()); r.Status != 400 {
				t.Errorf("token with a changed request: %s", r)
			}
		})
		t.Run("search resource and action", func(t *testing.T) {
			var out struct{ Results []map[string]string }
			post(t, "/search/resource", map[string]any{"subject": map[string]any{"type": "user", "id": "x-tina"},
				"action": map[string]any{"name": "get"}, "resource": map[string]any{"type": "machines"}}, admin()).JSON(t, &out)
			if len(out.Results) != 1 || out.Results[0]["id"] != w.m1 {
				t.Errorf("tina's machines: %v", out.Results)
			}
			out.Results = nil
			post(t, "/search/action", map[string]any{"subject": map[string]any{"type": "user", "id": "x-olga"},
				"resource": map[string]any{"type": "pools", "id": "x-p1"}}, admin()).JSON(t, &out)
			var names []string
			for _, r := range out.Results {
				names = append(names, r["name"])
			}
			b, _ := json.Marshal(names)
			if len(names) != 7 || !strings.Contains(string(b), `"delete"`) {
				t.Errorf("olga's actions on x-p1: %s", b)
			}
		})
	}, licenseArgs(t)...)
}
