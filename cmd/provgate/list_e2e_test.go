package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// End-to-end tests of DRP lists and long polls (docs/design.md §3.5, §3.6):
// filters, sorting, paging, counts and ETag waits, on SQLite and
// PostgreSQL. TestE2EObjects (objects_e2e_test.go) runs them.

// testList covers filters, paging, shaping and the count headers (§3.4).
func testList(t *testing.T, s *tserver) {
	obMust(t, s, 201, "POST", "/params", `{"Name":"lst/p","Schema":{"type":"integer"}}`)
	obMust(t, s, 201, "POST", "/profiles", `{"Name":"lst-p1","Params":{"lst/p":1,"lst/q":"from-profile"}}`)
	obMust(t, s, 201, "POST", "/profiles", `{"Name":"lst-p2","Params":{"lst/p":2}}`)
	for _, b := range []string{
		`{"Name":"lst1","Description":"lst","Runnable":true,"Profiles":["lst-p1"],"Meta":{"color":"red"},"Params":{"lst/p":5,"other":"a"}}`,
		`{"Name":"lst2","Description":"lst","Profiles":["lst-p1","lst-p2"],"Meta":{"color":"blue"},"Params":{"lst/p":7,"other":"b"}}`,
		`{"Name":"lst3","Description":"lst","Profiles":[],"Meta":{"color":"green"},"Params":{"lst/p":9}}`,
	} {
		obMust(t, s, 201, "POST", "/machines", b)
	}
	// Runnable and CurrentTask as a running system would have them. The
	// task list names tasks that exist: DRP refuses a missing one (422).
	for _, task := range []string{"a1", "a2", "a3"} {
		obMust(t, s, 201, "POST", "/tasks", `{"Name":"`+task+`"}`)
	}
	obMust(t, s, 200, "PATCH", "/machines/Name:lst2", `[{"op":"replace","path":"/Runnable","from":"","value":false}]`)
	for i, n := range []string{"lst1", "lst2", "lst3"} {
		obMust(t, s, 200, "PATCH", "/machines/Name:"+n,
			fmt.Sprintf(`[{"op":"replace","path":"/Tasks","from":"","value":["a1","a2","a3"]},{"op":"replace","path":"/CurrentTask","from":"","value":%d}]`, i-1))
	}
	base := "/machines?Description=lst&sort=Name"
	cases := []struct {
		name, query string
		want        []string
	}{
		{"bare", "&Name=lst2", []string{"lst2"}},
		{"eq", "&Name=Eq(lst2)", []string{"lst2"}},
		{"ne", "&Name=Ne(lst2)", []string{"lst1", "lst3"}},
		{"lt-string", "&Name=Lt(lst2)", []string{"lst1"}},
		{"gte-string", "&Name=Gte(lst2)", []string{"lst2", "lst3"}},
		{"in", "&Name=In(lst1,lst3)", []string{"lst1", "lst3"}},
		{"nin", "&Name=Nin(lst1,lst3)", []string{"lst2"}},
		{"re", "&Name=Re(^lst[12]$)", []string{"lst1", "lst2"}},
		{"between-string", "&Name=Between(lst2,lst3)", []string{"lst2", "lst3"}},
		{"except-string", "&Name=Except(lst2,lst3)", []string{"lst1"}},
		{"int-bare", "&CurrentTask=0", []string{"lst2"}},
		{"int-eq-negative", "&CurrentTask=Eq(-1)", []string{"lst1"}},
		{"int-ne", "&CurrentTask=Ne(0)", []string{"lst1", "lst3"}},
		{"int-lt", "&CurrentTask=Lt(0)", []string{"lst1"}},
		{"int-lte", "&CurrentTask=Lte(0)", []string{"lst1", "lst2"}},
		{"int-gt", "&CurrentTask=Gt(0)", []string{"lst3"}},
		{"int-gte", "&CurrentTask=Gte(0)", []string{"lst2", "lst3"}},
		{"int-in", "&CurrentTask=In(-1,1)", []string{"lst1", "lst3"}},
		{"int-nin", "&CurrentTask=Nin(-1,1)", []string{"lst2"}},
		{"int-between", "&CurrentTask=Between(-1,0)", []string{"lst1", "lst2"}},
		{"int-except", "&CurrentTask=Except(-1,0)", []string{"lst3"}},
		// Integers compare as numbers, not strings: "10" > "9".
		{"int-gt-numeric", "&CurrentTask=Gt(-10)", []string{"lst1", "lst2", "lst3"}},
		{"bool-true", "&Runnable=true", []string{"lst1", "lst3"}},
		{"bool-eq-false", "&Runnable=Eq(false)", []string{"lst2"}},
		{"bool-ne", "&Runnable=Ne(true)", []string{"lst2"}},
		{"list-contains", "&Profiles=lst-p2", []string{"lst2"}},
		{"list-eq", "&Profiles=Eq(lst-p1)", []string{"lst1", "lst2"}},
		{"list-ne", "&Profiles=Ne(lst-p1)", []string{"lst3"}},
		{"list-in", "&Profiles=In(lst-p2,nothing)", []string{"lst2"}},
		{"list-nin", "&Profiles=Nin(lst-p2)", []string{"lst1", "lst3"}},
		{"list-re", "&Profiles=Re(p2$)", []string{"lst2"}},
		{"meta-eq", "&Meta.color=red", []string{"lst1"}},
		{"meta-in", "&Meta.color=In(red,green)", []string{"lst1", "lst3"}},
		{"meta-ne", "&Meta.color=Ne(red)", []string{"lst2", "lst3"}},
		{"meta-re", "&Meta.color=Re(^(b|g))", []string{"lst2", "lst3"}},
		{"param-eq", "&lst/p=7", []string{"lst2"}},
		{"param-gt", "&lst/p=Gt(6)", []string{"lst2", "lst3"}},
		{"param-between", "&lst/p=Between(5,7)", []string{"lst1", "lst2"}},
		{"param-in", "&lst/p=In(5,9)", []string{"lst1", "lst3"}},
		{"param-ne", "&lst/p=Ne(5)", []string{"lst2", "lst3"}},
		{"offset-limit", "&offset=1&limit=1", []string{"lst2"}},
		{"limit-zero", "&limit=0", []string{}},
		{"huge-offset", "&offset=1000000000", []string{}},
		{"reverse", "&reverse=true", []string{"lst3", "lst2", "lst1"}},
		{"reverse-offset", "&reverse=true&offset=1&limit=1", []string{"lst2"}},
		{"sort-int-reverse", "&sort=CurrentTask&reverse=true", []string{"lst3", "lst2", "lst1"}},
		{"and", "&Runnable=true&CurrentTask=Gte(0)", []string{"lst3"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			q := base + c.query
			if strings.Contains(c.query, "sort=") {
				q = "/machines?Description=lst" + c.query
			}
			got := obNames(obList(t, obMust(t, s, 200, "GET", q, nil)))
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("GET %s: got %v, want %v", q, got, c.want)
			}
		})
	}
	t.Run("profiles-param-filter", func(t *testing.T) {
		got := obNames(obList(t, obMust(t, s, 200, "GET", "/profiles?lst/p=Gte(2)&Name=Re(^lst-)", nil)))
		if !reflect.DeepEqual(got, []string{"lst-p2"}) {
			t.Errorf("got %v", got)
		}
	})
	t.Run("slim", func(t *testing.T) {
		for _, m := range obList(t, obMust(t, s, 200, "GET", base+"&slim=Params,Meta", nil)) {
			if p, _ := m["Params"].(map[string]any); len(p) != 0 {
				t.Errorf("%v Params not slimmed: %v", m["Name"], m["Params"])
			}
			if p, _ := m["Meta"].(map[string]any); len(p) != 0 {
				t.Errorf("%v Meta not slimmed: %v", m["Name"], m["Meta"])
			}
			if m["Partial"] != true {
				t.Errorf("%v Partial = %v", m["Name"], m["Partial"])
			}
		}
	})
	t.Run("params", func(t *testing.T) {
		l := obList(t, obMust(t, s, 200, "GET", base+"&params=lst/p,nope", nil))
		if len(l) != 3 {
			t.Fatalf("got %d", len(l))
		}
		if p := l[0]["Params"]; !reflect.DeepEqual(p, map[string]any{"lst/p": 5.0}) {
			t.Errorf("params=lst/p: %v", p)
		}
	})
	t.Run("aggregate", func(t *testing.T) {
		l := obList(t, obMust(t, s, 200, "GET", base+"&aggregate=true", nil))
		p, _ := l[0]["Params"].(map[string]any)
		if p["lst/p"] != 5.0 || p["lst/q"] != "from-profile" || p["other"] != "a" {
			t.Errorf("aggregate Params of lst1: %v", p)
		}
		p, _ = l[2]["Params"].(map[string]any)
		if _, ok := p["lst/q"]; ok {
			t.Errorf("aggregate Params of lst3: %v", p)
		}
	})
	t.Run("head-counts", func(t *testing.T) {
		all := obList(t, obMust(t, s, 200, "GET", "/machines", nil))
		r := obMust(t, s, 200, "HEAD", "/machines?Description=lst&Runnable=true", nil)
		for h, want := range map[string]string{"X-DRP-LIST-FILTER-COUNT": "2", "X-DRP-LIST-COUNT": "2",
			"X-DRP-LIST-TOTAL-COUNT": fmt.Sprint(len(all))} {
			if got := r.Header.Get(h); got != want {
				t.Errorf("%s = %q, want %q", h, got, want)
			}
		}
		if len(r.Body) != 0 {
			t.Errorf("HEAD obList body %q", r.Body)
		}
		r = obMust(t, s, 200, "GET", "/machines?Description=lst", nil)
		if got := r.Header.Get("X-DRP-LIST-FILTER-COUNT"); got != "3" {
			t.Errorf("GET filter count %q", got)
		}
		r = obMust(t, s, 200, "HEAD", "/profiles", nil)
		if r.Header.Get("X-DRP-LIST-FILTER-COUNT") == "" {
			t.Errorf("no filter count on profiles")
		}
	})
	// The GET replies to malformed list queries are golden cases
	// (testdata/http/list-error-*.json, golden_e2e_test.go); HEAD of the
	// same queries answers 4xx too.
	files, err := filepath.Glob(filepath.Join(goldenDir, "list-error-*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no list-error golden cases: %v", err)
	}
	for _, f := range files {
		t.Run("head-"+strings.TrimSuffix(filepath.Base(f), ".json"), func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var tr transcript
			if err := json.Unmarshal(b, &tr); err != nil || tr.Request.Method != "GET" {
				t.Fatalf("%s: %v %+v", f, err, tr.Request)
			}
			if h := obCall(t, s, "HEAD", tr.Request.Path, nil); h.Status < 400 || h.Status >= 500 {
				t.Errorf("HEAD %s: %d, want 4xx", tr.Request.Path, h.Status)
			}
		})
	}
	t.Run("error-406", func(t *testing.T) {
		wantDRPError(t, obCall(t, s, "GET", "/machines?Bogus=1", nil), 406, "GET", "Filter not found: Bogus").about(t, "machines", "*")
		wantDRPError(t, obCall(t, s, "GET", "/bootenvs?limit=-1", nil), 406, "GET", "Limit cannot be negative").about(t, "bootenvs", "*")
	})
}

// testLongPoll: If-None-Match + Prefer: wait (§3.5).
func testLongPoll(t *testing.T, s *tserver) {
	m := obObj(t, obMust(t, s, 201, "POST", "/machines", `{"Name":"poll1"}`))
	p := "/machines/" + m["Uuid"].(string)
	etag := obMust(t, s, 200, "HEAD", p, nil).Header.Get("ETag")
	if etag == "" {
		t.Fatal("no ETag")
	}
	t.Run("unchanged-304", func(t *testing.T) {
		start := time.Now()
		r := obCall(t, s, "GET", p, nil, "If-None-Match", etag, "Prefer", "wait=2s")
		d := time.Since(start)
		if r.Status != 304 {
			t.Fatalf("got %d %s, want 304", r.Status, r.Body)
		}
		if d < 1800*time.Millisecond || d > 10*time.Second {
			t.Errorf("304 after %v, want about 2s", d)
		}
	})
	t.Run("changed-200", func(t *testing.T) {
		done := s.Go("GET", p, nil, admin(), "If-None-Match", etag, "Prefer", "wait=20s")
		time.Sleep(300 * time.Millisecond)
		obMust(t, s, 200, "PATCH", p, `[{"op":"replace","path":"/Description","from":"","value":"changed"}]`)
		res := await(t, done, 30*time.Second, "long poll")
		if res.Status != 200 {
			t.Fatalf("got %d %s, want 200", res.Status, res.Body)
		}
		// Well before the poll's own 20s: the change woke it.
		if res.Took > 15*time.Second {
			t.Errorf("long poll returned after %v, want promptly", res.Took)
		}
		if got := obObj(t, res.resp)["Description"]; got != "changed" {
			t.Errorf("Description %v", got)
		}
		if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			t.Errorf("Content-Type %q", ct)
		}
		if e := res.Header.Get("ETag"); e == "" || e == etag {
			t.Errorf("ETag after change %q (was %q)", e, etag)
		}
	})
	// pollAfter starts a long poll on path, runs change, and returns the
	// reply with how long the poll took.
	pollAfter := func(t *testing.T, path string, change func()) (resp, time.Duration) {
		t.Helper()
		et := obMust(t, s, 200, "HEAD", path, nil).Header.Get("ETag")
		done := s.Go("GET", path, nil, admin(), "If-None-Match", et, "Prefer", "wait=20s")
		time.Sleep(300 * time.Millisecond)
		change()
		res := await(t, done, 30*time.Second, "long poll")
		return res.resp, res.Took
	}
	t.Run("woken-by-params", func(t *testing.T) {
		r, d := pollAfter(t, p, func() { obMust(t, s, 200, "POST", p+"/params/poll/p", `1`) })
		if r.Status != 200 || d > 15*time.Second { // the poll waits 20s unless woken
			t.Fatalf("got %d after %v: %s", r.Status, d, r.Body)
		}
		if ps, _ := obObj(t, r)["Params"].(map[string]any); ps["poll/p"] != 1.0 {
			t.Errorf("Params %v", ps)
		}
	})
	t.Run("woken-by-delete", func(t *testing.T) {
		m := obObj(t, obMust(t, s, 201, "POST", "/machines", `{"Name":"poll2"}`))
		path := "/machines/" + m["Uuid"].(string)
		r, d := pollAfter(t, path, func() { obMust(t, s, 200, "DELETE", path, nil) })
		if d > 15*time.Second { // the poll waits 20s unless woken
			t.Fatalf("long poll of a deleted object returned after %v", d)
		}
		wantDRPError(t, r, 404, "GET", "Not Found").about(t, "machines", "*")
	})
	t.Run("stale-etag-200", func(t *testing.T) {
		start := time.Now()
		r := obMust(t, s, 200, "GET", p, nil, "If-None-Match", etag, "Prefer", "wait=5s")
		if time.Since(start) > 4*time.Second { // a wait would take 5s
			t.Errorf("stale ETag waited")
		}
		if obObj(t, r)["Description"] != "changed" {
			t.Errorf("body %s", r.Body)
		}
	})
}
