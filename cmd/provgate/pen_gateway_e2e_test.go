package main

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/provgate/provgate/gateway"
	"github.com/provgate/provgate/gateway/claims"
)

// TestE2EPenGateway replays the penetration-test findings against the
// gateway through the real server, one subtest per finding: each sends the
// attacker's request and expects the refusal.
func TestE2EPenGateway(t *testing.T) {
	t.Parallel()
	for _, db := range databases(t) {
		t.Run(db.Name, func(t *testing.T) {
			t.Parallel()
			decisions := filepath.Join(t.TempDir(), "decisions.jsonl")
			s := startE2E(t, db, append(licenseArgs(t), "--decision-log", decisions)...)
			t.Run("3 key canonicalisation", func(t *testing.T) { penKeys(t, s.On(t)) })
			t.Run("8 patch size", func(t *testing.T) { penPatchSize(t, s.On(t), decisions) })
			t.Run("13 metrics labels", func(t *testing.T) { penMetrics(t, s.On(t)) })
			t.Run("14 create specific", func(t *testing.T) { penCreate(t, s.On(t)) })
			t.Run("16 hidden objects", func(t *testing.T) { penHidden(t, s.On(t)) })
			t.Run("17 long poll reauthorized", func(t *testing.T) { penLongPoll(t, s.On(t)) })
			t.Run("19 write replies", func(t *testing.T) { penReplies(t, s.On(t)) })
			t.Run("21 pool operations", func(t *testing.T) { penPools(t, s.On(t)) })
			t.Run("22 evaluations bounded", func(t *testing.T) { penEvaluations(t, s.On(t)) })
		})
	}
}

// penGet returns the admin's view of an object.
func penGet(t testing.TB, s *tserver, path string) map[string]any {
	t.Helper()
	return s.Must(200, "GET", path, nil, admin()).Map(t)
}

// penTenantUser makes a user holding claims in a tenant whose Members are
// members, and returns its Basic credentials.
func penTenantUser(t testing.TB, s *tserver, name string, members map[string][]string, claims ...[3]string) string {
	t.Helper()
	s.AddRole(name+"-role", claims...)
	s.AddUser(name, name+"-Pa55", name+"-role")
	s.Must(201, "POST", "/tenants", map[string]any{"Name": name + "-tenant", "Users": []string{name}, "Members": members}, admin())
	return basic(name, name+"-Pa55")
}

// penUser makes a user holding claims (no tenant) and returns its Basic
// credentials.
func penUser(t testing.TB, s *tserver, name string, claims ...[3]string) string {
	t.Helper()
	s.AddRole(name+"-role", claims...)
	s.AddUser(name, name+"-Pa55", name+"-role")
	return basic(name, name+"-Pa55")
}

// Finding 3: the key a request is authorized for is the key its handler
// uses. "sec/pw%2F" names the param "sec/pw/" to the claims; the handler
// must not read, patch or delete "sec/pw" through it.
func penKeys(t *testing.T, s *tserver) {
	s.Must(201, "POST", "/params", map[string]any{"Name": "sec/pw", "Description": "hidden-desc",
		"Schema": map[string]any{"type": "string"}}, admin())
	tu := penTenantUser(t, s, "pen3-u", map[string][]string{"params": {}},
		[3]string{"params", "*", "*"}, [3]string{"machines", "get", "*"}, [3]string{"machines", "update:/Params/pub~1", "*"})
	s.Must(201, "POST", "/params", map[string]any{"Name": "sec/pw/", "Description": "mine",
		"Schema": map[string]any{"type": "string"}}, tu)
	s.Must(404, "GET", "/params/sec/pw", nil, tu)

	t.Run("get", func(t *testing.T) {
		s := s.On(t)
		r := s.Must(200, "GET", "/params/sec/pw%2F", nil, tu)
		if m := r.Map(t); m["Name"] != "sec/pw/" || bytes.Contains(r.Body, []byte("hidden-desc")) {
			t.Fatalf("GET params/sec/pw%%2F answered another param: %s", r.Body)
		}
	})
	t.Run("patch", func(t *testing.T) {
		s := s.On(t)
		s.Must(200, "PATCH", "/params/sec/pw%2F", jsonPatch("replace", "/Description", "patched"), tu)
		if d := penGet(t, s, "/params/sec/pw")["Description"]; d != "hidden-desc" {
			t.Fatalf("hidden param patched: Description %v", d)
		}
		if d := penGet(t, s, "/params/sec/pw%2F")["Description"]; d != "patched" {
			t.Fatalf("own param Description %v", d)
		}
	})
	t.Run("meta", func(t *testing.T) {
		s := s.On(t)
		s.Must(200, "PATCH", "/meta/params/sec/pw%2F", jsonPatch("add", "/color", "red"), tu)
		if m := s.Must(200, "GET", "/meta/params/sec/pw", nil, admin()).Map(t); m["color"] != nil {
			t.Fatalf("hidden param's meta patched: %v", m)
		}
		if m := s.Must(200, "GET", "/meta/params/sec/pw%2F", nil, tu).Map(t); m["color"] != "red" {
			t.Fatalf("own meta %v", m)
		}
	})
	t.Run("machine params", func(t *testing.T) {
		s := s.On(t)
		u := s.AddMachine("pen3-m", map[string]any{"Params": map[string]any{"pub": "keep-me"}})
		s.Must(200, "POST", "/machines/"+u+"/params/pub%2F", `"new"`, tu)
		r := s.Do("DELETE", "/machines/"+u+"/params/pub%2F", nil, tu)
		if r.Status != 200 {
			t.Fatalf("DELETE own param: %s", r)
		}
		params := penGet(t, s, "/machines/"+u)["Params"].(map[string]any)
		if params["pub"] != "keep-me" {
			t.Fatalf("param pub changed through pub%%2F: %v", params)
		}
		if _, ok := params["pub/"]; ok {
			t.Fatalf("param pub/ still set after its delete: %v", params)
		}
		// Without the claim on "pub", "pub" itself stays out of reach.
		s.Must(403, "DELETE", "/machines/"+u+"/params/pub", nil, tu)
	})
	t.Run("delete", func(t *testing.T) {
		s := s.On(t)
		s.Must(200, "DELETE", "/params/sec/pw%2F", nil, tu)
		penGet(t, s, "/params/sec/pw")
		s.Must(404, "GET", "/params/sec/pw%2F", nil, admin())
	})
}

// penPatchOps is a patch of n replace ops on distinct params.
func penPatchOps(n int) []byte {
	var b bytes.Buffer
	b.WriteByte('[')
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"op":"add","path":"/Params/p%d","value":%d}`, i, i)
	}
	b.WriteByte(']')
	return b.Bytes()
}

// Finding 8: a patch's size is bounded (413 naming the limit), a large one
// is refused at once, and one decision log line stays small.
func penPatchSize(t *testing.T, s *tserver, decisions string) {
	u := s.AddMachine("pen8-m", nil)
	t.Run("limit", func(t *testing.T) {
		s := s.On(t)
		r := s.Do("PATCH", "/machines/"+u, penPatchOps(1001), admin())
		wantDRPError(t, r, 413, "", "at most 1000")
		if p := penGet(t, s, "/machines/"+u)["Params"].(map[string]any); len(p) != 0 {
			t.Fatalf("refused patch changed params: %d set", len(p))
		}
		s.Must(200, "PATCH", "/machines/"+u, penPatchOps(1000), admin())
	})
	t.Run("large patch refused quickly", func(t *testing.T) {
		s := s.On(t)
		start := time.Now()
		r := s.Do("PATCH", "/machines/"+u, penPatchOps(20000), admin())
		wantDRPError(t, r, 413, "", "at most 1000")
		if d := time.Since(start); d > 10*time.Second {
			t.Fatalf("refusing a 20000-op patch took %v", d)
		}
	})
	t.Run("decision log line bounded", func(t *testing.T) {
		// The 1000-op patch above was decided with 1000 claims; its log
		// line holds a bounded part of them and says how many it left out.
		want := "/api/v3/machines/" + u
		deadline := time.Now().Add(10 * time.Second)
		for {
			line := penDecisionLine(t, decisions, "PATCH", want, 1000)
			if line != nil {
				if len(line) > 32<<10 {
					t.Fatalf("decision log line of %d bytes", len(line))
				}
				var entry struct {
					Input struct {
						Required []any `json:"required"`
					} `json:"input"`
					Truncated map[string]int `json:"truncated"`
				}
				if err := json.Unmarshal(line, &entry); err != nil {
					t.Fatal(err)
				}
				kept := len(entry.Input.Required)
				if kept == 0 || kept+entry.Truncated["/input/required"] != 1000 {
					t.Fatalf("line keeps %d claims and says %v were left out, want 1000 in all", kept, entry.Truncated)
				}
				return
			}
			if time.Now().After(deadline) {
				t.Fatal("no decision log line for the 1000-op patch")
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
}

// penDecisionLine finds the decision-log line of a request by method and
// path whose claims number n in all (kept plus left out).
func penDecisionLine(t *testing.T, file, method, path string, n int) []byte {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		if os.IsNotExist(err) {
			return nil
		}
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	for sc.Scan() {
		var entry struct {
			Input struct {
				Method   string `json:"method"`
				Path     string `json:"path"`
				Required []any  `json:"required"`
			} `json:"input"`
			Truncated map[string]int `json:"truncated"`
		}
		if json.Unmarshal(sc.Bytes(), &entry) != nil {
			continue
		}
		if entry.Input.Method == method && entry.Input.Path == path &&
			len(entry.Input.Required)+entry.Truncated["/input/required"] == n {
			return append([]byte(nil), sc.Bytes()...)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return nil
}

// Finding 13: requests of mixed methods and routes on one keep-alive
// connection leave /metrics answering 200 with only real label values.
func penMetrics(t *testing.T, s *tserver) {
	root := strings.TrimSuffix(s.Base, "/api/v3")
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // self-signed test server
		MaxConnsPerHost: 1, MaxIdleConnsPerHost: 1,
	}}
	defer client.CloseIdleConnections()
	send := func(method, path string, body string, authz string) int {
		t.Helper()
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		req, err := http.NewRequest(method, root+path, rd)
		if err != nil {
			t.Fatal(err)
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		if authz != "" {
			req.Header.Set("Authorization", authz)
		}
		res, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		_ = res.Body.Close()
		return res.StatusCode
	}
	s.Must(201, "POST", "/profiles", map[string]any{"Name": "pen13-p"}, admin())
	reqs := []struct{ method, path, body, authz string }{
		{"GET", "/healthz", "", ""},
		{"PATCH", "/api/v3/profiles/pen13-p", `[{"op":"replace","path":"/Description","value":"x"}]`, admin()},
		{"HEAD", "/api/v3/machines", "", admin()},
		{"DELETE", "/api/v3/profiles/pen13-nope", "", admin()},
		{"GET", "/api/v3/info", "", admin()},
		{"POST", "/api/v3/nothing/here/at/all", `{}`, admin()},
		{"PUT", "/api/v3/profiles/pen13-p", `{"Name":"pen13-p","Description":"y"}`, admin()},
		{"GET", "/no-such-route/" + strings.Repeat("x", 40), "", ""},
		{"OPTIONS", "/api/v3/machines", "", admin()},
		{"GET", "/api/v3/params/a/b/c", "", admin()},
		{"POST", "/api/v3/pools/p/addMachines", `{}`, ""},
		{"PATCH", "/api/v3/meta/profiles/pen13-p", `[{"op":"add","path":"/icon","value":"x"}]`, admin()},
	}
	for i := 0; i < 10; i++ {
		for _, r := range reqs {
			send(r.method, r.path, r.body, r.authz)
		}
	}
	req, _ := http.NewRequest("GET", root+"/metrics", nil)
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("/metrics: %d %s", res.StatusCode, body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	routes := map[string]bool{"unmatched": true}
	for _, r := range gateway.New(gateway.Options{}).App().GetRoutes() {
		routes[r.Path] = true
	}
	// The /api/v3 routes are the rows of the route table, registered for
	// the services a server has.
	for _, rt := range claims.Routes() {
		routes[rt.FiberPath()] = true
	}
	methods := map[string]bool{"GET": true, "HEAD": true, "POST": true, "PUT": true, "PATCH": true, "DELETE": true, "OPTIONS": true}
	seen := map[string]bool{}
	for _, name := range []string{"provgate_http_requests_total", "provgate_http_request_duration_seconds"} {
		fam := fams[name]
		if fam == nil {
			t.Fatalf("no %s in /metrics", name)
		}
		for _, m := range fam.GetMetric() {
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "method":
					if !methods[l.GetValue()] {
						t.Errorf("%s: method label %q", name, l.GetValue())
					}
					seen[l.GetValue()] = true
				case "route":
					if !routes[l.GetValue()] {
						t.Errorf("%s: route label %q is no route", name, l.GetValue())
					}
				case "status":
					if len(l.GetValue()) != 3 || strings.Trim(l.GetValue(), "0123456789") != "" {
						t.Errorf("%s: status label %q", name, l.GetValue())
					}
				}
			}
		}
	}
	for _, m := range []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"} {
		if !seen[m] {
			t.Errorf("no requests counted for %s", m)
		}
	}
}

// Finding 14: a create claim with a specific creates exactly that object.
func penCreate(t *testing.T, s *tserver) {
	one := penUser(t, s, "pen14-u", [3]string{"profiles", "create", "pen14-a1"}, [3]string{"profiles", "get", "*"})
	cases := []struct {
		name string
		body string
		msg  string
	}{
		{"other name", `{"Name":"pen14-b2"}`, "Requires: profiles create pen14-b2"},
		{"lower-case field", `{"name":"pen14-b3"}`, "Requires: profiles create pen14-b3"},
		{"second spelling wins", `{"Name":"pen14-a1","name":"pen14-b4"}`, "Requires: profiles create pen14-b4"},
		{"no name", `{"Description":"x"}`, "Requires: profiles create *"},
		{"list as a name", `{"Name":"pen14-a1,pen14-b5"}`, "Requires: profiles create *"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := s.On(t)
			r := s.Do("POST", "/profiles", c.body, one)
			wantDRPError(t, r, 403, "", c.msg)
		})
	}
	for _, n := range []string{"pen14-b2", "pen14-b3", "pen14-b4", "pen14-b5"} {
		s.Must(404, "GET", "/profiles/"+n, nil, admin())
	}
	s.Must(201, "POST", "/profiles", `{"Name":"pen14-a1"}`, one)

	t.Run("machines", func(t *testing.T) {
		s := s.On(t)
		const mine = "0d9c3f52-8a43-4b8e-9a7e-6f0b7c1d2e3f"
		mu := penUser(t, s, "pen14-mu", [3]string{"machines", "create", mine})
		wantDRPError(t, s.Do("POST", "/machines", map[string]any{"Name": "pen14-m1"}, mu), 403, "", "Requires: machines create *")
		wantDRPError(t, s.Do("POST", "/machines", map[string]any{"Name": "pen14-m2", "Uuid": "6a1e0c44-1b0f-4d55-8c52-3c1c7e0f9a11"}, mu), 403, "",
			"Requires: machines create 6a1e0c44-1b0f-4d55-8c52-3c1c7e0f9a11")

		s.Must(201, "POST", "/machines", map[string]any{"Name": "pen14-m3", "Uuid": mine}, mu)
		// machines create * still creates machines without a Uuid.
		all := penUser(t, s, "pen14-all", [3]string{"machines", "create", "*"})
		s.Must(201, "POST", "/machines", map[string]any{"Name": "pen14-m4"}, all)
	})
	t.Run("tenant user creates into its tenant", func(t *testing.T) {
		s := s.On(t)
		tu := penTenantUser(t, s, "pen14-tu", map[string][]string{"profiles": {}},
			[3]string{"profiles", "create", "pen14-t1"}, [3]string{"profiles", "get", "*"})
		s.Must(201, "POST", "/profiles", map[string]any{"Name": "pen14-t1"}, tu)
		s.Must(200, "GET", "/profiles/pen14-t1", nil, tu)
		wantDRPError(t, s.Do("POST", "/profiles", map[string]any{"Name": "pen14-t2"}, tu), 403, "", "Requires: profiles create pen14-t2")
	})
}

// Finding 16: a hidden object answers exactly as a missing one, whatever
// key form names it and whatever the body holds.
func penHidden(t *testing.T, s *tserver) {
	seen := s.AddMachine("pen16-m1", nil)
	hidden := s.AddMachine("pen16-m2", nil)
	tu := penTenantUser(t, s, "pen16-u", map[string][]string{"machines": {seen}}, [3]string{"machines", "*", "*"})
	const missing = "4f7e9a10-5c2b-4d3e-8f1a-2b3c4d5e6f70"
	cases := []struct {
		method, key string
		body        any
	}{
		{"GET", "Name:%s", nil},
		{"HEAD", "Name:%s", nil},
		{"DELETE", "Name:%s", nil},
		{"PUT", "%s", "[]"},
		{"PUT", "Name:%s", `"x"`},
		{"PUT", "Name:%s", `{"Name":5}`},
		{"PATCH", "%s", "{"},
		{"PATCH", "Name:%s", `[{"op":"bogus","path":"/a"}]`},
		{"PATCH", "Name:%s", `[{"op":"replace","path":"/Name","value":5}]`},
		{"PATCH", "Name:%s", penPatchOps(1001)},
		{"GET", "Name:%s/params", nil},
		{"PATCH", "Name:%s/params", "nope"},
	}
	for _, c := range cases {
		hiddenKey, missingKey := fmt.Sprintf(c.key, "pen16-m2"), fmt.Sprintf(c.key, "pen16-none")
		if !strings.HasPrefix(c.key, "Name:") {
			hiddenKey, missingKey = fmt.Sprintf(c.key, hidden), fmt.Sprintf(c.key, missing)
		}
		t.Run(c.method+" "+hiddenKey, func(t *testing.T) {
			s := s.On(t)
			h := s.Do(c.method, "/machines/"+hiddenKey, c.body, tu)
			m := s.Do(c.method, "/machines/"+missingKey, c.body, tu)
			if h.Status != 404 || m.Status != 404 {
				t.Fatalf("hidden: %s; missing: %s; want 404 for both", h, m)
			}
			if c.method == "HEAD" {
				return
			}
			if bytes.Contains(h.Body, []byte(hidden)) && !strings.Contains(hiddenKey, hidden) {
				t.Fatalf("404 names the hidden machine's Uuid: %s", h.Body)
			}
			he, me := wantDRPError(t, h, h.Status, "", ""), wantDRPError(t, m, m.Status, "", "")
			// The key is the one the caller gave (the object part of it);
			// everything else is the same as for a missing machine.
			wantKey := strings.TrimSuffix(hiddenKey, "/params")
			if he.Key != wantKey {
				t.Fatalf("hidden 404 Key %q, want %q", he.Key, wantKey)
			}
			me.Key = strings.ReplaceAll(strings.ReplaceAll(me.Key, "pen16-none", "pen16-m2"), missing, hidden)
			for i := range me.Messages {
				me.Messages[i] = strings.ReplaceAll(strings.ReplaceAll(me.Messages[i], "pen16-none", "pen16-m2"), missing, hidden)
			}
			hj, _ := json.Marshal(he)
			mj, _ := json.Marshal(me)
			if string(hj) != string(mj) {
				t.Fatalf("hidden answers %s, missing answers %s", hj, mj)
			}
		})
	}
}

// penStartPoll starts a long poll of path with the etag and returns the
// channel that receives its reply (await it).
func penStartPoll(t *testing.T, s *tserver, path, etag, authz string) <-chan reply {
	t.Helper()
	ch := s.Go("GET", path, nil, authz, "If-None-Match", etag, "Prefer", "wait=20s")
	// The poll must be waiting (not answered) before access is taken away.
	select {
	case r := <-ch:
		t.Fatalf("long poll answered at once: %s %v", r.resp, r.Err)
	case <-time.After(time.Second):
	}
	return ch
}

// Finding 17: a long poll answers only if the caller still has access when
// it wakes; otherwise exactly as for a missing object.
func penLongPoll(t *testing.T, s *tserver) {
	t.Run("removed from the tenant", func(t *testing.T) {
		s := s.On(t)
		u := s.AddMachine("pen17-m1", nil)
		tu := penTenantUser(t, s, "pen17-u", map[string][]string{"machines": {u}}, [3]string{"machines", "get", "*"})
		etag := s.Must(200, "HEAD", "/machines/"+u, nil, tu).Header.Get("ETag")
		ch := penStartPoll(t, s, "/machines/"+u, etag, tu)
		s.Must(200, "PATCH", "/tenants/pen17-u-tenant", jsonPatch("replace", "/Members/machines", []string{}), admin())
		s.Must(200, "PATCH", "/machines/"+u, jsonPatch("replace", "/Description", "after"), admin())
		r := await(t, ch, 30*time.Second, "long poll").resp
		if r.Status != 404 || bytes.Contains(r.Body, []byte("after")) {
			t.Fatalf("long poll after losing the tenant: %s, want 404", r)
		}
		if e := wantDRPError(t, r, r.Status, "", ""); e.Key != u || e.Model != "machines" {
			t.Fatalf("404 %+v", e)
		}
	})
	t.Run("role taken away", func(t *testing.T) {
		s := s.On(t)
		u := s.AddMachine("pen17-m2", nil)
		ru := penUser(t, s, "pen17-r", [3]string{"machines", "get", "*"})
		etag := s.Must(200, "HEAD", "/machines/Name:pen17-m2", nil, ru).Header.Get("ETag")
		ch := penStartPoll(t, s, "/machines/Name:pen17-m2", etag, ru)
		s.Must(200, "PATCH", "/users/pen17-r", jsonPatch("replace", "/Roles", []string{}), admin())
		s.Must(200, "PATCH", "/machines/"+u, jsonPatch("replace", "/Description", "after"), admin())
		r := await(t, ch, 30*time.Second, "long poll").resp
		if r.Status != 404 || bytes.Contains(r.Body, []byte("after")) {
			t.Fatalf("long poll after losing the role: %s, want 404", r)
		}
		if e := wantDRPError(t, r, r.Status, "", ""); e.Key != "Name:pen17-m2" {
			t.Fatalf("404 Key %q, want the key as given", e.Key)
		}
	})
	t.Run("still allowed", func(t *testing.T) {
		s := s.On(t)
		u := s.AddMachine("pen17-m3", nil)
		ru := penUser(t, s, "pen17-ok", [3]string{"machines", "get", "*"})
		etag := s.Must(200, "HEAD", "/machines/"+u, nil, ru).Header.Get("ETag")
		ch := penStartPoll(t, s, "/machines/"+u, etag, ru)
		s.Must(200, "PATCH", "/machines/"+u, jsonPatch("replace", "/Description", "after"), admin())
		if r := await(t, ch, 30*time.Second, "long poll").resp; r.Status != 200 || r.Map(t)["Description"] != "after" {
			t.Fatalf("long poll: %s", r)
		}
	})
}

// penKeysOf returns the sorted member names of a JSON object reply.
func penKeysOf(t *testing.T, r resp) []string {
	t.Helper()
	var out []string
	for k := range r.Map(t) {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Finding 19: a write reply shows only what the caller may get; test ops
// (and copy, which reads too) need get.
func penReplies(t *testing.T, s *tserver) {
	u := s.AddMachine("pen19-m", map[string]any{"Description": "old", "Params": map[string]any{"secret": "s3cr3t-value", "pub": 1},
		"Meta": map[string]any{"owner": "alice"}})
	w := penUser(t, s, "pen19-w", [3]string{"machines", "update:/Description,update:/Params/pub,update:/Meta/color", "*"})
	t.Run("patch reply", func(t *testing.T) {
		s := s.On(t)
		r := s.Must(200, "PATCH", "/machines/"+u, jsonPatch("replace", "/Description", "new"), w)
		if got := penKeysOf(t, r); strings.Join(got, ",") != "Description,Uuid" {
			t.Fatalf("PATCH reply without get has %v: %s", got, r.Body)
		}
		if m := r.Map(t); m["Description"] != "new" || m["Uuid"] != u {
			t.Fatalf("PATCH reply %s", r.Body)
		}
	})
	t.Run("test op needs get", func(t *testing.T) {
		s := s.On(t)
		r := s.Must(403, "PATCH", "/machines/"+u, []map[string]any{
			{"op": "test", "path": "/Params/secret", "value": "guess"},
			{"op": "replace", "path": "/Description", "value": "x"}}, w)
		wantDRPError(t, r, r.Status, "", "Requires: machines get "+u)
		r = s.Do("PATCH", "/machines/"+u, []map[string]any{{"op": "copy", "from": "/Params/secret", "path": "/Description"}}, w)
		wantDRPError(t, r, 403, "", "Requires: machines get "+u)
		r = s.Must(403, "PATCH", "/machines/"+u+"/params", []map[string]any{
			{"op": "test", "path": "/secret", "value": "guess"}, {"op": "add", "path": "/pub", "value": 2}}, w)
		wantDRPError(t, r, r.Status, "", "Requires: machines get "+u)
	})
	t.Run("put reply", func(t *testing.T) {
		s := s.On(t)
		body := penGet(t, s, "/machines/"+u)
		body["Description"] = "put"
		r := s.Must(200, "PUT", "/machines/"+u, body, w)
		if got := penKeysOf(t, r); strings.Join(got, ",") != "Description,Uuid" {
			t.Fatalf("PUT reply without get has %v: %s", got, r.Body)
		}
	})
	t.Run("params replies", func(t *testing.T) {
		s := s.On(t)
		r := s.Must(200, "PATCH", "/machines/"+u+"/params", jsonPatch("replace", "/pub", 2), w)
		if got := penKeysOf(t, r); strings.Join(got, ",") != "pub" || bytes.Contains(r.Body, []byte("s3cr3t")) {
			t.Fatalf("params PATCH reply without get: %s", r.Body)
		}
		if r := s.Must(200, "POST", "/machines/"+u+"/params/pub", 3, w); string(r.Body) != "3" {
			t.Fatalf("param POST reply %s", r.Body)
		}
		if r := s.Must(200, "DELETE", "/machines/"+u+"/params/pub", nil, w); string(r.Body) != "null" {
			t.Fatalf("param DELETE reply without get: %s, want null", r.Body)
		}
	})
	t.Run("meta reply", func(t *testing.T) {
		s := s.On(t)
		r := s.Must(200, "PATCH", "/meta/machines/"+u, jsonPatch("add", "/color", "red"), w)
		if got := penKeysOf(t, r); strings.Join(got, ",") != "color" {
			t.Fatalf("meta PATCH reply without get: %s", r.Body)
		}
	})
	t.Run("with get the whole object", func(t *testing.T) {
		s := s.On(t)
		g := penUser(t, s, "pen19-g", [3]string{"machines", "get,update:/Description", "*"})
		r := s.Must(200, "PATCH", "/machines/"+u, jsonPatch("replace", "/Description", "seen"), g)
		if m := r.Map(t); m["Name"] != "pen19-m" || m["Params"] == nil {
			t.Fatalf("PATCH reply with get %s", r.Body)
		}
	})
	t.Run("delete reply", func(t *testing.T) {
		s := s.On(t)
		d := s.AddMachine("pen19-d", map[string]any{"Description": "gone"})
		del := penUser(t, s, "pen19-del", [3]string{"machines", "delete", "*"})
		r := s.Must(200, "DELETE", "/machines/"+d, nil, del)
		if got := penKeysOf(t, r); strings.Join(got, ",") != "Uuid" {
			t.Fatalf("DELETE reply without get: %s", r.Body)
		}
	})
}

// Finding 21: a pool operation's own body changes machines only with the
// machines claims a PATCH of the same fields needs, and names only
// profiles and workflows the caller can see.
func penPools(t *testing.T, s *tserver) {
	m1 := s.AddMachine("pen21-m1", map[string]any{"Pool": "pen21-p"})
	m2 := s.AddMachine("pen21-m2", map[string]any{"Pool": "pen21-p"})
	s.Must(201, "POST", "/pools", map[string]any{"Id": "pen21-p"}, admin())
	s.Must(201, "POST", "/profiles", map[string]any{"Name": "pen21-prof"}, admin())
	mkWorkflow(t, s, "pen21-wf", "pen21-task")
	op := penUser(t, s, "pen21-op", [3]string{"pools", "*", "*"}, [3]string{"machines", "get,list,update:/Params/ok", "*"},
		[3]string{"profiles,workflows", "get", "*"})
	list := map[string]any{"pool/machine-list": []string{"Name:pen21-m1", "Name:pen21-m2"}}
	snapshot := func() string {
		return string(s.Must(200, "GET", "/machines?Pool=pen21-p&sort=Name", nil, admin()).Body)
	}

	refused := []struct {
		name  string
		extra map[string]any
		claim string
	}{
		{"add-parameters", map[string]any{"pool/add-parameters": map[string]any{"ok": 1, "pwned": true}}, "update:/Params/pwned"},
		{"remove-parameters", map[string]any{"pool/remove-parameters": []string{"a/b"}}, "update:/Params/a~1b"},
		{"add-profiles", map[string]any{"pool/add-profiles": []string{"pen21-prof"}}, "update:/Profiles"},
		{"remove-profiles", map[string]any{"pool/remove-profiles": []string{"pen21-prof"}}, "update:/Profiles"},
		{"workflow", map[string]any{"pool/workflow": "pen21-wf"}, "update:/Workflow"},
	}
	for _, c := range refused {
		t.Run(c.name, func(t *testing.T) {
			s := s.On(t)
			body := map[string]any{}
			for k, v := range list {
				body[k] = v
			}
			for k, v := range c.extra {
				body[k] = v
			}
			before := snapshot()
			r := s.Must(403, "POST", "/pools/pen21-p/allocateMachines", body, op)
			first := m1
			if m2 < m1 {
				first = m2
			}
			wantDRPError(t, r, r.Status, "", "Requires: machines "+c.claim+" "+first)
			if snapshot() != before {
				t.Fatal("machines changed by a refused pool operation")
			}
		})
	}
	t.Run("allowed with the claims", func(t *testing.T) {
		s := s.On(t)
		body := map[string]any{"pool/add-parameters": map[string]any{"ok": 1}, "pool/machine-list": []string{"Name:pen21-m1"}}
		s.Must(200, "POST", "/pools/pen21-p/allocateMachines", body, op)
		if m := getMachine(t, s, m1); !m.PoolAllocated || m.Params["ok"] != float64(1) {
			t.Fatalf("allocated machine %+v", m)
		}
		// The pool's own groups need the same claims from the caller of
		// the operation (TestE2EPenGuards/pool_action_groups_need_the_callers_claims):
		// op holds update:/Params/ok only.
		s.Must(200, "PATCH", "/pools/pen21-p", jsonPatch("add", "/ReleaseActions", map[string]any{"AddParameters": map[string]any{"released": true}}), admin())
		before := snapshot()
		r := s.Must(403, "POST", "/pools/pen21-p/releaseMachines", map[string]any{"pool/machine-list": []string{"Name:pen21-m1"}}, op)
		wantDRPError(t, r, r.Status, "AUTH", "Requires: machines update:/Params/released "+m1)
		if snapshot() != before {
			t.Fatal("machines changed by a refused release")
		}
		s.Must(200, "POST", "/pools/pen21-p/releaseMachines", map[string]any{"pool/machine-list": []string{"Name:pen21-m1"}}, admin())
		if m := getMachine(t, s, m1); m.PoolAllocated || m.Params["released"] != true {
			t.Fatalf("released machine %+v", m)
		}
	})
	t.Run("hidden profiles and workflows", func(t *testing.T) {
		s := s.On(t)
		tu := penTenantUser(t, s, "pen21-tu", map[string][]string{"machines": {m1, m2}, "profiles": {}, "workflows": {}},
			[3]string{"pools", "*", "*"}, [3]string{"machines", "*", "*"}, [3]string{"profiles,workflows", "get", "*"})
		for _, c := range []struct{ key, hidden, missing string }{
			{"pool/add-profiles", "pen21-prof", "pen21-noprof"},
			{"pool/workflow", "pen21-wf", "pen21-nowf"},
		} {
			t.Run(c.key, func(t *testing.T) {
				s := s.On(t)
				val := func(n string) any {
					if c.key == "pool/workflow" {
						return n
					}
					return []string{n}
				}
				before := snapshot()
				h := s.Do("POST", "/pools/pen21-p/allocateMachines", map[string]any{c.key: val(c.hidden), "pool/machine-list": []string{"Name:pen21-m2"}}, tu)
				m := s.Do("POST", "/pools/pen21-p/allocateMachines", map[string]any{c.key: val(c.missing), "pool/machine-list": []string{"Name:pen21-m2"}}, tu)
				if h.Status != 422 || m.Status != 422 {
					t.Fatalf("hidden: %s; missing: %s; want 422 for both", h, m)
				}
				if got, want := strings.ReplaceAll(string(h.Body), c.hidden, "X"), strings.ReplaceAll(string(m.Body), c.missing, "X"); got != want {
					t.Fatalf("hidden answers %s, missing answers %s", got, want)
				}
				if snapshot() != before {
					t.Fatal("machines changed by a refused pool operation")
				}
			})
		}
	})
}

// Finding 22: one AuthZEN evaluations request is at most 1000 decisions. A
// user holding one read claim sent a 4 MiB body of 1.3 million
// empty items taking the top-level defaults: 10 s of CPU and a 23 MB
// reply for one request. More than 1000 items are refused (400, naming the
// bound) before any is decided, however many there are.
func penEvaluations(t *testing.T, s *tserver) {
	u := penUser(t, s, "pen22-u", [3]string{"machines", "get", "*"})
	m := s.AddMachine("pen22-m", nil)
	root := strings.TrimSuffix(s.Base, "/api/v3")
	batch := func(n int) []byte {
		var b bytes.Buffer
		fmt.Fprintf(&b, `{"subject":{"type":"user","id":"pen22-u"},"action":{"name":"get"},"resource":{"type":"machines","id":%q},"evaluations":[`, m)
		for i := 0; i < n; i++ {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString("{}")
		}
		b.WriteString("]}")
		return b.Bytes()
	}
	send := func(t *testing.T, n int) resp {
		t.Helper()
		r, err := s.SendURL("POST", root+"/access/v1/evaluations", batch(n), u)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	// refused checks the status before the message, so that an answer of
	// a million decisions is not printed whole.
	refused := func(t *testing.T, n int) {
		t.Helper()
		r := send(t, n)
		if r.Status != 400 {
			t.Fatalf("%d evaluations: status %d with %d bytes, want 400", n, r.Status, len(r.Body))
		}
		// AuthZEN's malformed requests answer a message string
		// (docs/design.md §9.9).
		if want := fmt.Sprintf("at most 1000 evaluations in one request, not %d", n); !strings.Contains(string(r.Body), want) {
			t.Fatalf("%d evaluations refused with %s, want %q", n, r.Body, want)
		}
	}
	// decided is how many decisions the policy engine has made, answered
	// from its cache or evaluated (every evaluation of an AuthZEN batch is
	// one).
	decided := func(t *testing.T) (n float64) {
		t.Helper()
		for _, line := range strings.Split(string(s.DoURL(t, "GET", root+"/metrics", nil, "").Body), "\n") {
			if strings.HasPrefix(line, "provgate_authz_decision_cache_total{") {
				v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
				if err != nil {
					t.Fatalf("%s: %v", line, err)
				}
				n += v
			}
		}
		return n
	}
	t.Run("limit", func(t *testing.T) {
		before := decided(t)
		r := send(t, 1000)
		if r.Status != 200 {
			t.Fatalf("1000 evaluations: %s", r)
		}
		var out struct{ Evaluations []struct{ Decision bool } }
		r.JSON(t, &out)
		if len(out.Evaluations) != 1000 || !out.Evaluations[999].Decision {
			t.Fatalf("1000 evaluations answered with %d decisions, or the last refused", len(out.Evaluations))
		}
		if n := decided(t) - before; n < 1000 {
			t.Fatalf("1000 evaluations counted as %v decisions: the count below would prove nothing", n)
		}
		refused(t, 1001)
	})
	// However many items there are, none is decided: the bound is checked
	// before the first evaluation, so the refusal costs reading the body.
	t.Run("large batch refused before any decision", func(t *testing.T) {
		before := decided(t)
		refused(t, 1_000_000)
		if n := decided(t) - before; n > 1 {
			t.Fatalf("refusing 1,000,000 evaluations made %v decisions, want none but the caller's own", n)
		}
	})
}
