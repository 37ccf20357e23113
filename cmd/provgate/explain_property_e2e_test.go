package main

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"testing"
)

// Explain answers from the same evaluation as a real request
// (docs/design.md §9.8): random requests of users with different roles and
// tenants are explained and then sent, one after the other, and each real
// request gets what its explanation said: the same 403 (with the same
// messages), 404 or 400, or, when explain allows it, a reply from the
// handler (2xx, or the handler's own 409 or 422).
func TestE2EExplainMatchesGateway(t *testing.T) {
	t.Parallel()
	ext := filepath.Join("..", "..", "testdata", "policy", "extensions", "protected")
	forEachDB(t, func(t *testing.T, s *tserver) {
		w := explorerSetup(t, s)
		prot := s.AddMachine("x-protected", map[string]any{"Meta": map[string]string{"protected": "true"}})
		s.AddRole("patcher", [3]string{"machines", "update:/Description,update:/Params", "*"}, [3]string{"profiles", "create,get", "*"})
		s.AddUser("x-pat", "pat-pw-1", "patcher", "mreader")
		users := map[string]string{
			"rocketskates": admin(), "x-olga": basic("x-olga", "olga-pw-1"), "x-tina": basic("x-tina", "tina-pw-1"),
			"x-tom": basic("x-tom", "tom-pw-1"), "x-nobody": basic("x-nobody", "nobody-pw-1"), "x-pat": basic("x-pat", "pat-pw-1"),
		}
		names := []string{"rocketskates", "x-olga", "x-tina", "x-tom", "x-nobody", "x-pat"}
		machines := []string{w.m1, w.m2, prot, "00000000-0000-4000-8000-000000000000", "Name:x-m1", "Name:nosuch"}
		seed := uint64(20261126)
		rng := rand.New(rand.NewPCG(seed, 7))
		pick := func(xs []string) string { return xs[rng.IntN(len(xs))] }
		type request struct {
			method, path string
			body         any
		}
		gen := func(i int) request {
			switch rng.IntN(9) {
			case 0:
				return request{"GET", "/machines/" + pick(machines), nil}
			case 1:
				return request{"GET", "/machines?limit=5", nil}
			case 2:
				return request{"PATCH", "/machines/" + pick(machines), []map[string]any{{"op": "replace", "path": pick([]string{"/Description", "/Params/x", "/Name"}), "value": fmt.Sprint("v", i)}}}
			case 3:
				return request{"PATCH", "/pools/" + pick([]string{"x-p1", "x-p2"}), []map[string]any{{"op": "replace", "path": "/Description", "value": "d"}}}
			case 4:
				return request{"GET", "/pools/" + pick([]string{"x-p1", "x-p2", "x-p3"}), nil}
			case 5:
				return request{"POST", "/profiles", map[string]any{"Name": fmt.Sprint("x-prof-", i)}}
			case 6:
				return request{"DELETE", "/machines/" + pick([]string{prot, "00000000-0000-4000-8000-000000000000"}), nil}
			case 7:
				return request{"GET", "/users/" + pick(names), nil}
			default:
				return request{"PATCH", "/machines/" + pick(machines), "not json"}
			}
		}
		const n = 250
		seen := map[int]int{}
		for i := 0; i < n; i++ {
			who := pick(names)
			r := gen(i)
			q := map[string]any{"Method": r.method, "Path": r.path}
			if r.body != nil {
				q["Body"] = r.body
				if str, ok := r.body.(string); ok {
					q["Body"] = []byte(str) // sent as a JSON string: not a patch
				}
			}
			var x explanation
			s.Must(200, "POST", "/access/explain", q, users[who]).JSON(t, &x)
			real := s.Do(r.method, r.path, r.body, users[who])
			seen[x.Status/100*100+min(x.Status%100, 4)]++
			ok := real.Status == x.Status
			if x.Status/100 == 2 && (real.Status/100 == 2 || real.Status == 409 || real.Status == 422) {
				ok = true
			}
			if !ok {
				t.Errorf("seed %d #%d %s %s %s as %s: explain %d %v, real %s", seed, i, r.method, r.path, r.body, who, x.Status, x.Messages, real)
				continue
			}
			if real.Status == 403 || real.Status == 404 {
				var e drpError
				real.JSON(t, &e)
				if !reflect.DeepEqual(e.Messages, x.Messages) {
					t.Errorf("seed %d #%d %s %s as %s: explain messages %q, real %q", seed, i, r.method, r.path, who, x.Messages, e.Messages)
				}
			}
		}
		// The random requests reach every kind of outcome.
		for _, class := range []int{200, 403, 404, 400} {
			if seen[class] == 0 {
				t.Errorf("no request explained as %d (outcomes %v)", class, seen)
			}
		}
		t.Logf("outcomes by status class: %v", seen)
	}, append(licenseArgs(t), "--policy-dir", ext)...)
}
