package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/provgate/provgate/backend"
	"github.com/provgate/provgate/backend/store"
	"github.com/provgate/provgate/backend/store/storetest"
)

// each runs fn against a fresh store of every available dialect.
func each(t *testing.T, fn func(t *testing.T, s *store.Store)) {
	t.Helper()
	for _, c := range storetest.Open(t) {
		t.Run(c.Name, func(t *testing.T) { fn(t, c.Store) })
	}
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func wantCode(t testing.TB, err error, code string) *backend.Error {
	t.Helper()
	if got := backend.ErrorCode(err); got != code {
		t.Fatalf("error code = %q (%v), want %q", got, err, code)
	}
	var e *backend.Error
	errors.As(err, &e)
	return e
}

func TestCRUD(t *testing.T) {
	each(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		m1 := mustJSON(t, map[string]any{"Uuid": "u1", "Name": "m1", "Pool": "default"})
		r, err := s.Create(ctx, "machines", "u1", m1)
		if err != nil || r.Rev != 1 || r.Key != "u1" {
			t.Fatalf("create: %+v %v", r, err)
		}
		g, err := s.Get(ctx, "machines", "u1")
		if err != nil || g.Rev != 1 {
			t.Fatalf("get: %+v %v", g, err)
		}
		var lastRev int64
		var back map[string]any
		if err := json.Unmarshal(g.Data, &back); err != nil || back["Name"] != "m1" {
			t.Fatalf("get data: %s %v", g.Data, err)
		}
		if g, err := s.GetBy(ctx, "machines", "Name", "m1"); err != nil || g.Key != "u1" {
			t.Fatalf("getby Name: %+v %v", g, err)
		}
		if g, err := s.GetBy(ctx, "machines", "Uuid", "u1"); err != nil || g.Key != "u1" {
			t.Fatalf("getby Uuid: %+v %v", g, err)
		}

		t.Run("conflicts", func(t *testing.T) {
			_, err := s.Create(ctx, "machines", "u1", mustJSON(t, map[string]any{"Uuid": "u1", "Name": "other"}))
			e := wantCode(t, err, backend.ECONFLICT)
			if e.Op != backend.CreateOp || e.Model != "machines" || e.Key != "u1" || len(e.Messages) != 1 || e.Messages[0] != "already exists" {
				t.Fatalf("conflict error = %+v", e)
			}
			_, err = s.Create(ctx, "machines", "u2", mustJSON(t, map[string]any{"Uuid": "u2", "Name": "m1"}))
			wantCode(t, err, backend.ECONFLICT)
			// Empty unique values do not collide.
			for _, k := range []string{"e1", "e2"} {
				if _, err := s.Create(ctx, "machines", k, mustJSON(t, map[string]any{"Uuid": k, "Name": ""})); err != nil {
					t.Fatalf("empty name %s: %v", k, err)
				}
			}
			_, err = s.Create(ctx, "machines", "", []byte(`{}`))
			wantCode(t, err, backend.EBADREQUEST)
			_, err = s.Create(ctx, "machines", "bad", []byte(`{"Uuid":`))
			wantCode(t, err, backend.EINVALID)
		})

		t.Run("not found", func(t *testing.T) {
			_, err := s.Get(ctx, "machines", "nope")
			if e := wantCode(t, err, backend.ENOTFOUND); e.Op != backend.ReadOp || e.Key != "nope" || e.Model != "machines" {
				t.Fatalf("not found = %+v", e)
			}
			_, err = s.GetBy(ctx, "machines", "Name", "nope")
			wantCode(t, err, backend.ENOTFOUND)
			_, err = s.GetBy(ctx, "machines", "Pool", "default") // not unique
			wantCode(t, err, backend.ENOTFOUND)
			_, err = s.Update(ctx, "machines", "nope", 0, []byte(`{}`))
			wantCode(t, err, backend.ENOTFOUND)
			_, err = s.Update(ctx, "machines", "nope", 3, []byte(`{}`))
			wantCode(t, err, backend.ENOTFOUND)
			_, err = s.Delete(ctx, "machines", "nope")
			if e := wantCode(t, err, backend.ENOTFOUND); e.Op != backend.DeleteOp {
				t.Fatalf("delete not found = %+v", e)
			}
			_, err = s.Get(ctx, "nokind", "x")
			wantCode(t, err, backend.EINTERNAL)
		})

		t.Run("revisions", func(t *testing.T) {
			// Each write gives a new revision, never used before by any
			// object (one counter for all).
			u, err := s.Update(ctx, "machines", "u1", 1, mustJSON(t, map[string]any{"Uuid": "u1", "Name": "m1", "Pool": "lab"}))
			if err != nil || u.Rev <= 1 {
				t.Fatalf("update: %+v %v", u, err)
			}
			_, err = s.Update(ctx, "machines", "u1", 1, mustJSON(t, map[string]any{"Uuid": "u1", "Name": "m1"}))
			if e := wantCode(t, err, backend.ECONFLICT); e.Key != "u1" {
				t.Fatalf("stale = %+v", e)
			}
			prev := u.Rev
			u, err = s.Update(ctx, "machines", "u1", 0, mustJSON(t, map[string]any{"Uuid": "u1", "Name": "m1", "Pool": "x"}))
			if err != nil || u.Rev <= prev {
				t.Fatalf("unconditional update: %+v %v", u, err)
			}
			lastRev = u.Rev
			g, _ := s.Get(ctx, "machines", "u1")
			if g.Rev != lastRev || !strings.Contains(string(g.Data), `"x"`) {
				t.Fatalf("after update: %+v", g)
			}
			// A unique value taken by another object.
			if _, err := s.Create(ctx, "machines", "u3", mustJSON(t, map[string]any{"Uuid": "u3", "Name": "m3"})); err != nil {
				t.Fatal(err)
			}
			_, err = s.Update(ctx, "machines", "u3", 0, mustJSON(t, map[string]any{"Uuid": "u3", "Name": "m1"}))
			wantCode(t, err, backend.ECONFLICT)
			_, err = s.Update(ctx, "machines", "u3", 0, []byte(`not json`))
			wantCode(t, err, backend.EINVALID)
		})

		t.Run("delete", func(t *testing.T) {
			d, err := s.Delete(ctx, "machines", "u1")
			if err != nil || d.Key != "u1" || d.Rev != lastRev || !strings.Contains(string(d.Data), `"m1"`) {
				t.Fatalf("delete: %+v %v", d, err)
			}
			_, err = s.Get(ctx, "machines", "u1")
			wantCode(t, err, backend.ENOTFOUND)
			// The unique value is free again.
			if _, err := s.Create(ctx, "machines", "u9", mustJSON(t, map[string]any{"Uuid": "u9", "Name": "m1"})); err != nil {
				t.Fatal(err)
			}
			// Created again, an object starts from a revision it never had.
			again, err := s.Create(ctx, "machines", "u1", mustJSON(t, map[string]any{"Uuid": "u1"}))
			if err != nil || again.Rev <= lastRev {
				t.Fatalf("created again: %+v %v, last revision %d", again, err, lastRev)
			}
			if r, err := s.Rev(ctx, "machines", "u1"); err != nil || r != again.Rev {
				t.Fatalf("Rev = %d %v, want %d", r, err, again.Rev)
			}
			_, err = s.Rev(ctx, "machines", "nosuch")
			wantCode(t, err, backend.ENOTFOUND)
			if _, err := s.Delete(ctx, "machines", "u1"); err != nil {
				t.Fatal(err)
			}
		})

		t.Run("conflicts inside a transaction keep it usable", func(t *testing.T) {
			err := s.InTx(ctx, func(ctx context.Context) error {
				_, err := s.Create(ctx, "machines", "u9", []byte(`{"Uuid":"u9"}`))
				wantCode(t, err, backend.ECONFLICT)
				_, err = s.Update(ctx, "machines", "u3", 0, mustJSON(t, map[string]any{"Uuid": "u3", "Name": "m1"}))
				wantCode(t, err, backend.ECONFLICT)
				_, err = s.Create(ctx, "machines", "u10", []byte(`{"Uuid":"u10","Name":"m10"}`))
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Get(ctx, "machines", "u10"); err != nil {
				t.Fatal(err)
			}
		})
	})
}

const uuidPrefix = "00000000-0000-0000-0000-00000000000"

func seedMachines(t *testing.T, s *store.Store) {
	t.Helper()
	ms := []map[string]any{
		{"Name": "alpha", "Pool": "default", "PoolStatus": "Free", "CurrentTask": 0, "Locked": false, "Runnable": true,
			"Address": "10.0.0.1", "Profiles": []string{"p1", "p2"}, "HardwareAddrs": []string{"aa:bb"},
			"Params": map[string]any{"foo/bar": 5, "os/name": "linux", "flag": true}, "Meta": map[string]string{"color": "red"}},
		{"Name": "beta", "Pool": "default", "PoolStatus": "InUse", "CurrentTask": 3, "Locked": true,
			"Address": "10.0.0.2", "Profiles": []string{"p2"}, "HardwareAddrs": []string{},
			"Params": map[string]any{"foo/bar": 10, "os/name": "windows", "flag": false}, "Meta": map[string]string{"color": "blue", "icon": "x"}},
		{"Name": "gamma", "Pool": "lab", "PoolStatus": "Free", "CurrentTask": 7, "Locked": false,
			"Address": "10.0.0.10", "Profiles": []string{}, "Params": map[string]any{"foo/bar": 2.5, "os/name": "linux"}, "Meta": map[string]string{}},
		{"Name": "delta", "Pool": "lab", "PoolStatus": "Free", "CurrentTask": -1, "Locked": false,
			"Address": "", "Profiles": []string{"p3"}, "Params": map[string]any{"foo/bar": "5", "nested": map[string]any{"a": 1}}, "Meta": map[string]string{"color": "red"}},
		{"Name": "", "Pool": "default", "PoolStatus": "Free", "CurrentTask": 0, "Locked": false,
			"Address": "10.0.0.5", "Profiles": nil, "Params": map[string]any{}, "Meta": map[string]string{"color": "green"}},
	}
	for i, m := range ms {
		key := fmt.Sprintf("%s%d", uuidPrefix, i+1)
		m["Uuid"] = key
		if _, err := s.Create(context.Background(), "machines", key, mustJSON(t, m)); err != nil {
			t.Fatal(err)
		}
	}
}

var testParams = map[string]bool{"foo/bar": true, "os/name": true, "flag": true, "nested": true, "a/b": true}

func parse(t *testing.T, prefix, raw string) backend.Query {
	t.Helper()
	v, err := url.ParseQuery(raw)
	if err != nil {
		t.Fatal(err)
	}
	q, err := backend.ParseQuery(testKinds.Kind(prefix), v, func(n string) bool { return testParams[n] })
	if err != nil {
		t.Fatalf("parse %q: %v", raw, err)
	}
	return q
}

// labels turns machine keys into their last digit; job keys stay whole.
func labels(recs []store.Record) string {
	var out []string
	for _, r := range recs {
		out = append(out, strings.TrimPrefix(r.Key, uuidPrefix))
	}
	return strings.Join(out, ",")
}

func TestListFilters(t *testing.T) {
	esc := url.QueryEscape
	cases := []struct{ q, want string }{
		// string
		{"Name=alpha", "1"},
		{"Name=Eq(alpha)", "1"},
		{"Name=Ne(alpha)", "2,3,4,5"},
		{"Name=Lt(beta)", "1,5"},
		{"Name=Lte(beta)", "1,2,5"},
		{"Name=Gt(delta)", "3"},
		{"Name=Gte(delta)", "3,4"},
		{"Name=In(alpha,gamma)", "1,3"},
		{"Name=Nin(alpha,gamma)", "2,4,5"},
		{"Name=" + esc("Re(^[ab])"), "1,2"},
		{"Name=Between(b,e)", "2,4"},
		{"Name=Except(b,e)", "1,3,5"},
		{"Pool=lab&PoolStatus=Free", "3,4"},
		{"Pool=default&Locked=false", "1,5"},
		{"PoolStatus=Ne(Free)", "2"},
		// integer: numeric, not text, comparison
		{"CurrentTask=3", "2"},
		{"CurrentTask=Ne(3)", "1,3,4,5"},
		{"CurrentTask=Lt(0)", "4"},
		{"CurrentTask=Lte(0)", "1,4,5"},
		{"CurrentTask=Lt(10)", "1,2,3,4,5"},
		{"CurrentTask=Gt(3)", "3"},
		{"CurrentTask=Gte(3)", "2,3"},
		{"CurrentTask=In(0,7)", "1,3,5"},
		{"CurrentTask=Nin(0,7)", "2,4"},
		{"CurrentTask=Between(0,5)", "1,2,5"},
		{"CurrentTask=Except(0,5)", "3,4"},
		{"CurrentTask=" + esc("Re(^-)"), "4"},
		// boolean
		{"Locked=true", "2"},
		{"Locked=false", "1,3,4,5"},
		{"Locked=Ne(true)", "1,3,4,5"},
		{"Locked=In(true,false)", "1,2,3,4,5"},
		{"Locked=Nin(true)", "1,3,4,5"},
		{"Locked=Lt(true)", "1,3,4,5"},
		{"Locked=Gte(true)", "2"},
		{"Locked=" + esc("Re(^t)"), "2"},
		{"Runnable=true", "1"},
		// UUID and key
		{"Uuid=" + uuidPrefix + "2", "2"},
		{"Uuid=In(" + uuidPrefix + "2," + uuidPrefix + "4)", "2,4"},
		{"Uuid=Gt(" + uuidPrefix + "3)", "4,5"},
		{"Key=" + uuidPrefix + "3", "3"},
		{"Uuid=" + esc("Re(5$)"), "5"},
		// IP
		{"Address=10.0.0.1", "1"},
		{"Address=" + esc(`Re(^10\.0\.0\.1)`), "1,3"},
		{"Address=Ne(10.0.0.1)", "2,3,4,5"},
		// list
		{"Profiles=p2", "1,2"},
		{"Profiles=Ne(p2)", "3,4,5"},
		{"Profiles=In(p1,p3)", "1,4"},
		{"Profiles=Nin(p1,p3)", "2,3,5"},
		{"Profiles=" + esc("Re(^p[13]$)"), "1,4"},
		{"HardwareAddr=aa:bb", "1"},
		{"HardwareAddrs=Ne(aa:bb)", "2,3,4,5"},
		// Meta
		{"Meta.color=red", "1,4"},
		{"Meta.color=Ne(red)", "2,3,5"},
		{"Meta.color=In(blue,green)", "2,5"},
		{"Meta.color=Nin(blue,green)", "1,3,4"},
		{"Meta.color=" + esc("Re(^r)"), "1,4"},
		{"Meta.color=Lt(c)", "2"},
		{"Meta.color=Gte(green)", "1,4,5"},
		{"Meta.color=Between(a,c)", "2"},
		{"Meta.color=Except(a,c)", "1,3,4,5"},
		{"Meta.icon=x", "2"},
		// params (names hold '/')
		{"foo/bar=5", "1"},
		{"foo/bar=" + esc(`"5"`), "4"},
		{"foo/bar=2.5", "3"},
		{"foo/bar=Ne(5)", "2,3,4,5"},
		{"foo/bar=In(5,10)", "1,2"},
		{"foo/bar=Nin(5,10)", "3,4,5"},
		{"foo/bar=Lt(6)", "1,3"},
		{"foo/bar=Gte(5)", "1,2"},
		{"foo/bar=Between(2,5)", "1,3"},
		{"foo/bar=Except(2,5)", "2,4,5"},
		{"foo/bar=" + esc("Re(^5$)"), "1,4"},
		{"os/name=linux", "1,3"},
		{"os/name=Gt(m)", "2"},
		{"os/name=Lte(linux)", "1,3"},
		{"os/name=" + esc("Re(^lin)"), "1,3"},
		{"os/name=Nin(linux)", "2,4,5"},
		{"flag=true", "1"},
		{"flag=false", "2"},
		{"flag=Ne(true)", "2,3,4,5"},
		{"nested=" + esc(`{"a":1}`), "4"},
		{"foo/bar=5&os/name=linux", "1"},
		// injection-looking values are plain values
		{"Name=" + esc(`alpha' OR '1'='1`), ""},
		{"Name=" + esc(`'; DROP TABLE obj_machines; --`), ""},
		{"Name=" + esc(`Re(' OR 1=1 --)`), ""},
		{esc(`Meta.a') OR 1=1 --`) + "=x", ""},
		{"os/name=" + esc(`linux' OR '1'='1`), ""},
		{"Profiles=" + esc(`p1') OR ('1'='1`), ""},
	}
	each(t, func(t *testing.T, s *store.Store) {
		seedMachines(t, s)
		ctx := context.Background()
		for _, c := range cases {
			t.Run(c.q, func(t *testing.T) {
				q := parse(t, "machines", c.q)
				recs, total, matched, err := s.List(ctx, "machines", q)
				if err != nil {
					t.Fatal(err)
				}
				if got := labels(recs); got != c.want {
					t.Fatalf("got %q, want %q", got, c.want)
				}
				if total != 5 || matched != len(recs) {
					t.Fatalf("total %d matched %d, want 5 and %d", total, matched, len(recs))
				}
			})
		}
		if _, err := s.Get(ctx, "machines", uuidPrefix+"1"); err != nil {
			t.Fatalf("table damaged: %v", err)
		}
		t.Run("bad filters", func(t *testing.T) {
			bad := []backend.Filter{
				{Name: "x') OR 1=1 --", Target: backend.TargetParam, Op: backend.OpEq, Values: []string{"1"}},
				{Name: "Name", Target: backend.TargetIndex, Index: testKinds.Kind("machines").Indexes["Name"], Op: "Like", Values: []string{"a"}},
				{Name: "Name", Target: backend.TargetIndex, Index: testKinds.Kind("machines").Indexes["Name"], Op: backend.OpBetween, Values: []string{"a"}},
				{Name: "Profiles", Target: backend.TargetIndex, Index: testKinds.Kind("machines").Indexes["Profiles"], Op: backend.OpLt, Values: []string{"a"}},
				{Name: "CurrentTask", Target: backend.TargetIndex, Index: testKinds.Kind("machines").Indexes["CurrentTask"], Op: backend.OpEq, Values: []string{"1 OR 1=1"}},
			}
			for _, f := range bad {
				_, _, _, err := s.List(ctx, "machines", backend.Query{Limit: -1, Filters: []backend.Filter{f}})
				wantCode(t, err, backend.ENOTACCEPTABLE)
			}
		})
	})
}

func TestListJobsTime(t *testing.T) {
	each(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		jobs := []map[string]any{
			{"Uuid": "j1", "Machine": "m-a", "State": "finished", "Archived": false, "StartTime": "2024-01-01T00:00:00Z"},
			{"Uuid": "j2", "Machine": "m-a", "State": "failed", "Archived": true, "StartTime": "2024-06-01T00:00:00Z"},
			{"Uuid": "j3", "Machine": "m-b", "State": "running", "Archived": false, "StartTime": "2025-01-01T00:00:00Z"},
		}
		for _, j := range jobs {
			if _, err := s.Create(ctx, "jobs", j["Uuid"].(string), mustJSON(t, j)); err != nil {
				t.Fatal(err)
			}
		}
		for _, c := range []struct{ q, want string }{
			{"StartTime=Gt(2024-03-01T00:00:00Z)", "j2,j3"},
			{"StartTime=Between(2024-01-01T00:00:00Z,2024-12-31T00:00:00Z)", "j1,j2"},
			{"StartTime=Except(2024-01-01T00:00:00Z,2024-12-31T00:00:00Z)", "j3"},
			{"Machine=m-a", "j1,j2"},
			{"Machine=m-a&Archived=false", "j1"},
			{"State=In(failed,running)", "j2,j3"},
			{"sort=StartTime&reverse=true", "j3,j2,j1"},
		} {
			recs, _, _, err := s.List(ctx, "jobs", parse(t, "jobs", c.q))
			if err != nil {
				t.Fatal(err)
			}
			if got := labels(recs); got != c.want {
				t.Errorf("%s: got %q, want %q", c.q, got, c.want)
			}
		}
	})
}

func TestListPaging(t *testing.T) {
	each(t, func(t *testing.T, s *store.Store) {
		seedMachines(t, s)
		ctx := context.Background()
		all := []string{"1", "2", "3", "4", "5"}
		vis := []string{uuidPrefix + "1", uuidPrefix + "3", uuidPrefix + "4", "x' OR '1'='1"}
		cases := []struct {
			name           string
			q              backend.Query
			want           string
			total, matched int
		}{
			{"default key order", parse(t, "machines", ""), strings.Join(all, ","), 5, 5},
			{"reverse", parse(t, "machines", "reverse=true"), "5,4,3,2,1", 5, 5},
			{"limit", parse(t, "machines", "limit=2"), "1,2", 5, 5},
			{"offset", parse(t, "machines", "offset=3"), "4,5", 5, 5},
			{"offset limit", parse(t, "machines", "offset=1&limit=2"), "2,3", 5, 5},
			{"limit 0", parse(t, "machines", "limit=0"), "", 5, 5},
			{"offset past end", parse(t, "machines", "offset=9"), "", 5, 5},
			{"filter limit", parse(t, "machines", "Pool=default&limit=2"), "1,2", 5, 3},
			{"filter offset", parse(t, "machines", "Pool=default&offset=1"), "2,5", 5, 3},
			{"sort by name", parse(t, "machines", "sort=Name"), "5,1,2,4,3", 5, 5},
			{"sort by name reverse", parse(t, "machines", "sort=Name&reverse=true"), "3,4,2,1,5", 5, 5},
			{"sort by int", parse(t, "machines", "sort=CurrentTask"), "4,1,5,2,3", 5, 5},
			{"sort by int reverse", parse(t, "machines", "sort=CurrentTask&reverse=true"), "3,2,5,1,4", 5, 5},
			{"sort by two", parse(t, "machines", "sort=Pool,Name"), "5,1,2,4,3", 5, 5},
			{"sort by bool", parse(t, "machines", "sort=Locked&limit=4&offset=2"), "4,5,2", 5, 5},
			{"sort filter reverse offset limit", parse(t, "machines", "PoolStatus=Free&sort=CurrentTask&reverse=true&offset=1&limit=2"), "5,1", 5, 4},
			{"visible", backend.Query{Limit: -1, Visible: vis}, "1,3,4", 3, 3},
			{"visible filtered", func() backend.Query {
				q := parse(t, "machines", "Pool=lab&limit=1")
				q.Visible = vis
				return q
			}(), "3", 3, 2},
			{"visible empty", backend.Query{Limit: -1, Visible: []string{}}, "", 0, 0},
			// Unfiltered restricted pages in key order are read from the
			// first visible keys (visible.go); the rest as above.
			{"visible limit", backend.Query{Limit: 2, Visible: vis}, "1,3", 3, 3},
			{"visible offset limit", backend.Query{Offset: 1, Limit: 1, Visible: vis}, "3", 3, 3},
			{"visible offset past end", backend.Query{Offset: 3, Limit: 5, Visible: vis}, "", 3, 3},
			{"visible limit 0", backend.Query{Limit: 0, Visible: vis}, "", 3, 3},
			{"visible reverse limit", backend.Query{Limit: 2, Reverse: true, Visible: vis}, "4,3", 3, 3},
			{"visible reverse offset", backend.Query{Offset: 1, Limit: 9, Reverse: true, Visible: vis}, "3,1", 3, 3},
			{"visible sorted by key", func() backend.Query {
				q := parse(t, "machines", "sort=Uuid&limit=2")
				q.Visible = vis
				return q
			}(), "1,3", 3, 3},
			{"visible unsorted", backend.Query{Limit: 2, Visible: []string{uuidPrefix + "4", uuidPrefix + "1", uuidPrefix + "3"}}, "1,3", 3, 3},
			{"visible empty limit", backend.Query{Limit: 2, Visible: []string{}}, "", 0, 0},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				recs, total, matched, err := s.List(ctx, "machines", c.q)
				if err != nil {
					t.Fatal(err)
				}
				if got := labels(recs); got != c.want || total != c.total || matched != c.matched {
					t.Fatalf("got %q total %d matched %d; want %q %d %d", got, total, matched, c.want, c.total, c.matched)
				}
			})
		}
		_, _, _, err := s.List(ctx, "machines", backend.Query{Limit: -1, Sort: []string{"Profiles"}})
		wantCode(t, err, backend.ENOTACCEPTABLE)
		_, _, _, err = s.List(ctx, "machines", backend.Query{Limit: -1, Sort: []string{"Nope"}})
		wantCode(t, err, backend.ENOTACCEPTABLE)
	})
}

func TestTransactions(t *testing.T) {
	each(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		rev0, err := s.Revision(ctx)
		if err != nil {
			t.Fatal(err)
		}
		boom := errors.New("boom")
		err = s.InTx(ctx, func(ctx context.Context) error {
			if _, err := s.Create(ctx, "users", "alice", []byte(`{"Name":"alice"}`)); err != nil {
				return err
			}
			// A nested InTx joins the outer transaction.
			if err := s.InTx(ctx, func(ctx context.Context) error {
				_, err := s.Create(ctx, "roles", "ops", []byte(`{"Name":"ops"}`))
				return err
			}); err != nil {
				return err
			}
			if err := s.SetSetting(ctx, "k", "v"); err != nil {
				return err
			}
			if _, err := s.EnqueueDelivery(ctx, backend.Delivery{Plugin: "p"}); err != nil {
				return err
			}
			if _, err := s.Get(ctx, "users", "alice"); err != nil {
				return fmt.Errorf("own write not visible: %w", err)
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("InTx error = %v, want boom", err)
		}
		for _, p := range []string{"users", "roles"} {
			recs, _, _, err := s.List(ctx, p, backend.Query{Limit: -1})
			if err != nil || len(recs) != 0 {
				t.Fatalf("%s after rollback: %d %v", p, len(recs), err)
			}
		}
		if _, ok, _ := s.GetSetting(ctx, "k"); ok {
			t.Fatal("setting survived rollback")
		}
		if ds, _ := s.ListDeliveries(ctx, "", 0); len(ds) != 0 {
			t.Fatal("delivery survived rollback")
		}
		if rev, _ := s.Revision(ctx); rev != rev0 {
			t.Fatalf("revision %d after rollback, want %d", rev, rev0)
		}
		if err := s.InTx(ctx, func(ctx context.Context) error {
			_, err := s.Create(ctx, "users", "bob", []byte(`{"Name":"bob"}`))
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Get(ctx, "users", "bob"); err != nil {
			t.Fatal(err)
		}
		_, err = s.ClaimForUpdate(ctx, "machines", backend.Query{Limit: -1}, 1)
		wantCode(t, err, backend.EINTERNAL)
	})
}

func TestSettingsAndRevision(t *testing.T) {
	each(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		rev := func() int64 {
			t.Helper()
			r, err := s.Revision(ctx)
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
		if _, ok, err := s.GetSetting(ctx, "license"); ok || err != nil {
			t.Fatalf("missing setting: %v %v", ok, err)
		}
		r0 := rev()
		if err := s.SetSetting(ctx, "license", "a"); err != nil {
			t.Fatal(err)
		}
		if err := s.SetSetting(ctx, "license", "b'; --"); err != nil {
			t.Fatal(err)
		}
		if v, ok, err := s.GetSetting(ctx, "license"); !ok || err != nil || v != "b'; --" {
			t.Fatalf("setting = %q %v %v", v, ok, err)
		}
		if rev() != r0+2 {
			t.Fatalf("settings bump: %d want %d", rev(), r0+2)
		}
		steps := []struct {
			name  string
			do    func() error
			bumps bool
		}{
			{"create user", func() error { _, err := s.Create(ctx, "users", "u", []byte(`{"Name":"u"}`)); return err }, true},
			{"update user", func() error { _, err := s.Update(ctx, "users", "u", 0, []byte(`{"Name":"u"}`)); return err }, true},
			{"delete user", func() error { _, err := s.Delete(ctx, "users", "u"); return err }, true},
			{"create role", func() error { _, err := s.Create(ctx, "roles", "r", []byte(`{"Name":"r"}`)); return err }, true},
			{"create tenant", func() error { _, err := s.Create(ctx, "tenants", "t", []byte(`{"Name":"t"}`)); return err }, true},
			{"create machine", func() error { _, err := s.Create(ctx, "machines", "m", []byte(`{"Uuid":"m"}`)); return err }, false},
			{"update machine", func() error { _, err := s.Update(ctx, "machines", "m", 0, []byte(`{"Uuid":"m"}`)); return err }, false},
			{"failed user create", func() error {
				_, err := s.Create(ctx, "roles", "r", []byte(`{"Name":"r"}`))
				if backend.IsCode(err, backend.ECONFLICT) {
					return nil
				}
				return fmt.Errorf("want conflict, got %v", err)
			}, false},
		}
		wantLog := []backend.Change{{Prefix: "settings", Key: "license"}, {Prefix: "settings", Key: "license"}}
		for _, st := range steps {
			before := rev()
			if err := st.do(); err != nil {
				t.Fatalf("%s: %v", st.name, err)
			}
			if got := rev() - before; (got == 1) != st.bumps || got > 1 {
				t.Fatalf("%s: revision moved by %d", st.name, got)
			}
			if st.bumps {
				prefix := strings.Fields(st.name)[1] // "create role" → role
				k := map[string]string{"user": "u", "role": "r", "tenant": "t"}[prefix]
				wantLog = append(wantLog, backend.Change{Prefix: prefix + "s", Key: k})
			}
		}
		// A rolled-back write leaves neither a revision nor a log entry.
		before := rev()
		_ = s.InTx(ctx, func(ctx context.Context) error {
			if _, err := s.Create(ctx, "roles", "gone", []byte(`{"Name":"gone"}`)); err != nil {
				t.Fatal(err)
			}
			return errors.New("roll back")
		})
		if rev() != before {
			t.Fatalf("rolled-back write moved the revision to %d", rev())
		}
		// The change log names each revision's object, in order and
		// without gaps.
		log, err := s.Changes(ctx, r0, rev())
		if err != nil {
			t.Fatal(err)
		}
		if len(log) != len(wantLog) {
			t.Fatalf("change log %+v, want %+v", log, wantLog)
		}
		for i, c := range log {
			if c.Rev != r0+int64(i)+1 || c.Prefix != wantLog[i].Prefix || c.Key != wantLog[i].Key {
				t.Fatalf("change %d: %+v, want %+v at %d", i, c, wantLog[i], r0+int64(i)+1)
			}
		}
		if tail, err := s.Changes(ctx, rev()-1, rev()); err != nil || len(tail) != 1 || tail[0].Rev != rev() {
			t.Fatalf("last change: %+v %v", tail, err)
		}
	})
}

func TestJobLogs(t *testing.T) {
	each(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		if l, err := s.JobLog(ctx, "j1"); err != nil || len(l) != 0 {
			t.Fatalf("empty log: %q %v", l, err)
		}
		var want []byte
		for i := 0; i < 20; i++ {
			chunk := []byte(fmt.Sprintf("line %d\x00\xff\n", i))
			want = append(want, chunk...)
			if err := s.AppendJobLog(ctx, "j1", chunk); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.AppendJobLog(ctx, "j2", []byte("other")); err != nil {
			t.Fatal(err)
		}
		if l, err := s.JobLog(ctx, "j1"); err != nil || string(l) != string(want) {
			t.Fatalf("log = %q %v", l, err)
		}
		if err := s.DeleteJobLog(ctx, "j1"); err != nil {
			t.Fatal(err)
		}
		if l, _ := s.JobLog(ctx, "j1"); len(l) != 0 {
			t.Fatalf("log after delete = %q", l)
		}
		if l, _ := s.JobLog(ctx, "j2"); string(l) != "other" {
			t.Fatalf("other log = %q", l)
		}
	})
}

func TestClaimForUpdateConcurrent(t *testing.T) {
	each(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		const rows, workers, batch = 1000, 32, 7
		err := s.InTx(ctx, func(ctx context.Context) error {
			for i := 0; i < rows; i++ {
				k := fmt.Sprintf("m%04d", i)
				if _, err := s.Create(ctx, "machines", k, mustJSON(t, map[string]any{"Uuid": k, "Name": k, "Pool": "default", "PoolStatus": "Free"})); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		free := parse(t, "machines", "Pool=default&PoolStatus=Free")
		var mu sync.Mutex
		claimed := map[string]int{}
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for {
					var got []string
					err := s.InTx(ctx, func(ctx context.Context) error {
						recs, err := s.ClaimForUpdate(ctx, "machines", free, batch)
						if err != nil {
							return err
						}
						for _, r := range recs {
							var m map[string]any
							if err := json.Unmarshal(r.Data, &m); err != nil {
								return err
							}
							if m["PoolStatus"] != "Free" {
								return fmt.Errorf("claimed a %v machine", m["PoolStatus"])
							}
							m["PoolStatus"] = "InUse"
							m["Context"] = fmt.Sprint(w)
							if _, err := s.Update(ctx, "machines", r.Key, r.Rev, mustJSON(t, m)); err != nil {
								return err
							}
							got = append(got, r.Key)
						}
						return nil
					})
					if err != nil {
						errs <- err
						return
					}
					if len(got) == 0 {
						return
					}
					mu.Lock()
					for _, k := range got {
						claimed[k]++
					}
					mu.Unlock()
				}
			}(w)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if len(claimed) != rows {
			t.Fatalf("claimed %d distinct machines, want %d", len(claimed), rows)
		}
		for k, n := range claimed {
			if n != 1 {
				t.Fatalf("machine %s claimed %d times", k, n)
			}
		}
		_, _, matched, err := s.List(ctx, "machines", free)
		if err != nil || matched != 0 {
			t.Fatalf("free after claims: %d %v", matched, err)
		}
		_, _, matched, err = s.List(ctx, "machines", parse(t, "machines", "PoolStatus=InUse&limit=1"))
		if err != nil || matched != rows {
			t.Fatalf("in use after claims: %d %v", matched, err)
		}
	})
}

func TestDeliveries(t *testing.T) {
	each(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		const n = 300
		for i := 0; i < n; i++ {
			if _, err := s.EnqueueDelivery(ctx, backend.Delivery{Plugin: "cb", Callback: "jobfail", Machine: fmt.Sprintf("m%d", i%5), Job: fmt.Sprint(i), Payload: []byte(`{"i":` + fmt.Sprint(i) + `}`)}); err != nil {
				t.Fatal(err)
			}
		}
		var mu sync.Mutex
		seen := map[int64]int{}
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		for w := 0; w < 16; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					ds, err := s.ClaimDeliveries(ctx, 7, time.Minute)
					if err != nil {
						errs <- err
						return
					}
					if len(ds) == 0 {
						return
					}
					for _, d := range ds {
						if d.Attempts != 1 || d.State != backend.DeliveryPending || !d.LeaseUntil.After(time.Now().Add(30*time.Second)) {
							errs <- fmt.Errorf("claimed delivery %+v", d)
							return
						}
						mu.Lock()
						seen[d.ID]++
						mu.Unlock()
						if err := s.FinishDelivery(ctx, d.ID, backend.DeliveryDone, "", time.Time{}); err != nil {
							errs <- err
							return
						}
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if len(seen) != n {
			t.Fatalf("claimed %d deliveries, want %d", len(seen), n)
		}
		for id, c := range seen {
			if c != 1 {
				t.Fatalf("delivery %d claimed %d times", id, c)
			}
		}
		if done, _ := s.ListDeliveries(ctx, backend.DeliveryDone, 0); len(done) != n {
			t.Fatalf("done = %d", len(done))
		}

		t.Run("lease, retry and failure", func(t *testing.T) {
			future, err := s.EnqueueDelivery(ctx, backend.Delivery{Plugin: "cb", NextAt: time.Now().Add(time.Hour)})
			if err != nil {
				t.Fatal(err)
			}
			id, err := s.EnqueueDelivery(ctx, backend.Delivery{Plugin: "cb", Payload: []byte("x")})
			if err != nil {
				t.Fatal(err)
			}
			ds, err := s.ClaimDeliveries(ctx, 10, time.Minute)
			if err != nil || len(ds) != 1 || ds[0].ID != id || string(ds[0].Payload) != "x" {
				t.Fatalf("claim = %+v %v", ds, err)
			}
			if again, _ := s.ClaimDeliveries(ctx, 10, time.Minute); len(again) != 0 {
				t.Fatalf("leased delivery claimed again: %+v", again)
			}
			// Let the lease run out, as it does when a claimer dies.
			if err := s.DB().Exec(`UPDATE callback_deliveries SET lease_until_us = 1 WHERE id = ?`, id).Error; err != nil {
				t.Fatal(err)
			}
			ds, err = s.ClaimDeliveries(ctx, 10, time.Minute)
			if err != nil || len(ds) != 1 || ds[0].ID != id || ds[0].Attempts != 2 {
				t.Fatalf("reclaim after lease = %+v %v", ds, err)
			}
			if err := s.FinishDelivery(ctx, id, backend.DeliveryPending, "503", time.Now().Add(-time.Second)); err != nil {
				t.Fatal(err)
			}
			ds, err = s.ClaimDeliveries(ctx, 10, time.Minute)
			if err != nil || len(ds) != 1 || ds[0].Attempts != 3 || ds[0].LastError != "503" {
				t.Fatalf("retry claim = %+v %v", ds, err)
			}
			if err := s.FinishDelivery(ctx, id, backend.DeliveryFailed, "gave up", time.Time{}); err != nil {
				t.Fatal(err)
			}
			failed, _ := s.ListDeliveries(ctx, backend.DeliveryFailed, 0)
			if len(failed) != 1 || failed[0].ID != id || failed[0].LastError != "gave up" || !failed[0].LeaseUntil.IsZero() {
				t.Fatalf("failed = %+v", failed)
			}
			pending, _ := s.ListDeliveries(ctx, backend.DeliveryPending, 0)
			if len(pending) != 1 || pending[0].ID != future {
				t.Fatalf("pending = %+v", pending)
			}
			wantCode(t, s.FinishDelivery(ctx, id, "bogus", "", time.Time{}), backend.EINVALID)
			wantCode(t, s.FinishDelivery(ctx, 999999, backend.DeliveryDone, "", time.Time{}), backend.ENOTFOUND)
			if all, _ := s.ListDeliveries(ctx, "", 5); len(all) != 5 {
				t.Fatalf("limit: %d", len(all))
			}
		})
	})
}

func TestAttempts(t *testing.T) {
	each(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		base := time.Now().Add(-time.Hour)
		for i := 0; i < 6; i++ {
			a := backend.CallbackAttempt{Plugin: []string{"p1", "p2"}[i%2], Callback: "cb", Machine: []string{"m1", "m2", "m3"}[i%3],
				Source: "jobfail", Attempt: i + 1, Status: 200 + i, DurationMs: int64(i * 10), Error: "", At: base.Add(time.Duration(i) * time.Minute)}
			if err := s.RecordAttempt(ctx, a); err != nil {
				t.Fatal(err)
			}
		}
		all, err := s.ListAttempts(ctx, backend.AttemptQuery{Plugin: "", Machine: "", Limit: 0})
		if err != nil || len(all) != 6 {
			t.Fatalf("all = %d %v", len(all), err)
		}
		if !sort.SliceIsSorted(all, func(i, j int) bool { return all[i].At.After(all[j].At) }) || all[0].Attempt != 6 {
			t.Fatalf("not newest first: %+v", all)
		}
		if all[0].Status != 205 || all[0].DurationMs != 50 || all[0].Source != "jobfail" || all[0].Plugin != "p2" || all[0].Machine != "m3" {
			t.Fatalf("fields: %+v", all[0])
		}
		if got, _ := s.ListAttempts(ctx, backend.AttemptQuery{Plugin: "p1", Machine: "", Limit: 0}); len(got) != 3 {
			t.Fatalf("p1 = %d", len(got))
		}
		if got, _ := s.ListAttempts(ctx, backend.AttemptQuery{Plugin: "p1", Machine: "m1", Limit: 0}); len(got) != 1 || got[0].Attempt != 1 {
			t.Fatalf("p1/m1 = %+v", got)
		}
		if got, _ := s.ListAttempts(ctx, backend.AttemptQuery{Plugin: "", Machine: "m2", Limit: 1}); len(got) != 1 || got[0].Attempt != 5 {
			t.Fatalf("m2 limit 1 = %+v", got)
		}
		// Pages continue after the last row they returned, ties on At
		// broken by ID, and see neither rows recorded since nor repeats.
		tie := backend.CallbackAttempt{Plugin: "p1", Callback: "cb", Machine: "m1", Source: "action", Attempt: 7, At: all[0].At}
		if err := s.RecordAttempt(ctx, tie); err != nil {
			t.Fatal(err)
		}
		var paged []int
		q := backend.AttemptQuery{Limit: 2}
		for {
			page, err := s.ListAttempts(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range page {
				paged = append(paged, a.Attempt)
			}
			if len(page) < q.Limit {
				break
			}
			last := page[len(page)-1]
			q.AfterAt, q.AfterID = last.At, last.ID
			if len(paged) == 2 {
				late := backend.CallbackAttempt{Plugin: "p1", Callback: "cb", Machine: "m1", Source: "action", Attempt: 8}
				if err := s.RecordAttempt(ctx, late); err != nil {
					t.Fatal(err)
				}
			}
		}
		if fmt.Sprint(paged) != "[7 6 5 4 3 2 1]" {
			t.Fatalf("paged = %v, want [7 6 5 4 3 2 1]", paged)
		}
		if got, _ := s.ListAttempts(ctx, backend.AttemptQuery{Machine: "m1", AfterAt: all[0].At, AfterID: all[0].ID}); len(got) != 2 || got[0].Attempt != 4 {
			t.Fatalf("m1 after the newest = %+v", got)
		}
		n, err := s.PruneCallbackHistory(ctx, base.Add(150*time.Second))
		if err != nil || n != 3 {
			t.Fatalf("prune = %d %v", n, err)
		}
	})
}

func TestOpenErrors(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := store.Open(ctx, "postgres://bob:s3cretpw@127.0.0.1:1/nodb?sslmode=disable&connect_timeout=2", store.Options{})
	if err == nil || strings.Contains(err.Error(), "s3cretpw") || !strings.Contains(err.Error(), "PostgreSQL") {
		t.Fatalf("unreachable postgres error = %v", err)
	}
	_, err = store.Open(ctx, "postgres://bob:s3cretpw@%zz/db", store.Options{})
	if err == nil || strings.Contains(err.Error(), "s3cretpw") {
		t.Fatalf("bad dsn error = %v", err)
	}
	_, err = store.Open(ctx, t.TempDir()+"/missing/dir/store.db", store.Options{})
	if err == nil || !strings.Contains(err.Error(), "SQLite") {
		t.Fatalf("bad sqlite path error = %v", err)
	}
	// Reopening migrates idempotently and keeps data.
	path := t.TempDir() + "/store.db"
	s, err := store.Open(ctx, path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, "users", "keep", []byte(`{"Name":"keep"}`)); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	s, err = store.Open(ctx, path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Get(ctx, "users", "keep"); err != nil {
		t.Fatal(err)
	}
}

// TestCommittedWrites: OnCommittedWrite hears of each object write once it
// is committed, never of one rolled back, and SoleWriter says whether it
// hears of them all.
func TestCommittedWrites(t *testing.T) {
	each(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		var mu sync.Mutex
		var heard []string
		s.OnCommittedWrite(func(prefix, key string) {
			mu.Lock()
			heard = append(heard, prefix+"/"+key)
			mu.Unlock()
		})
		got := func() []string {
			mu.Lock()
			defer mu.Unlock()
			return append([]string(nil), heard...)
		}
		if _, err := s.Create(ctx, "profiles", "cw1", []byte(`{"Name":"cw1"}`)); err != nil {
			t.Fatal(err)
		}
		err := s.InTx(ctx, func(ctx context.Context) error {
			if _, err := s.Update(ctx, "profiles", "cw1", 0, []byte(`{"Name":"cw1","Description":"x"}`)); err != nil {
				t.Fatal(err)
			}
			if n := len(got()); n != 1 {
				t.Errorf("a write was told before its commit: %v", got())
			}
			return errors.New("roll back")
		})
		if err == nil || len(got()) != 1 {
			t.Fatalf("rolled back: %v, heard %v", err, got())
		}
		if err := s.InTx(ctx, func(ctx context.Context) error {
			if _, err := s.Delete(ctx, "profiles", "cw1"); err != nil {
				return err
			}
			_, err := s.Create(ctx, "roles", "cw-r", []byte(`{"Name":"cw-r"}`))
			return err
		}); err != nil {
			t.Fatal(err)
		}
		want := []string{"profiles/cw1", "profiles/cw1", "roles/cw-r"}
		if h := got(); strings.Join(h, " ") != strings.Join(want, " ") {
			t.Fatalf("heard %v, want %v", h, want)
		}
		if s.SoleWriter() != (s.Dialect() == "sqlite") {
			t.Fatalf("SoleWriter %v on %s", s.SoleWriter(), s.Dialect())
		}
	})
}

// TestRecordAttemptsBatch: a batch larger than one INSERT's rows lands
// whole, in one transaction, every field as given.
func TestRecordAttemptsBatch(t *testing.T) {
	each(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		base := time.Now().Add(-time.Hour).Truncate(time.Microsecond)
		var batch []backend.CallbackAttempt
		for i := 0; i < 1203; i++ {
			batch = append(batch, backend.CallbackAttempt{Plugin: "batch", Callback: "cb", Machine: fmt.Sprintf("m%d", i),
				Source: "callbackDo", Attempt: 1, Status: 200 + i%3, DurationMs: int64(i), Error: "e", At: base.Add(time.Duration(i) * time.Millisecond)})
		}
		if err := s.RecordAttempts(ctx, batch); err != nil {
			t.Fatal(err)
		}
		got, err := s.ListAttempts(ctx, backend.AttemptQuery{Plugin: "batch", Limit: 2000})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(batch) {
			t.Fatalf("stored %d attempts of %d", len(got), len(batch))
		}
		newest := got[0]
		if newest.Machine != "m1202" || newest.DurationMs != 1202 || newest.Status != 200+1202%3 || newest.Source != "callbackDo" ||
			newest.Error != "e" || !newest.At.Equal(batch[1202].At) {
			t.Fatalf("newest attempt %+v, want %+v", newest, batch[1202])
		}
		if err := s.RecordAttempts(ctx, nil); err != nil {
			t.Fatalf("empty batch: %v", err)
		}
	})
}

// testKinds is the kind catalog the tests read kinds from.
var testKinds = backend.NewCatalog()

// TestNotices: on PostgreSQL a notice sent inside a transaction reaches a
// listener only if the transaction commits, in the order sent, and
// FlushNotices returns once the committed ones are sent; the revision
// notice goes out with its transaction. Notify outside a transaction sends
// at once.
func TestNotices(t *testing.T) {
	each(t, func(t *testing.T, s *store.Store) {
		if !s.Notifies() {
			t.Skip("SQLite sends no notices")
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		heard := make(chan string, 64)
		listening := make(chan struct{}, 1)
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = s.Listen(ctx, 100*time.Millisecond, func(p string) { heard <- p }, nil)
		}()
		// The first backlog call (listening) has no resync; send probes
		// until one is heard, so that the listener is known to be up.
		go func() {
			for ctx.Err() == nil {
				select {
				case <-listening:
					return
				case <-time.After(50 * time.Millisecond):
				}
				_ = s.Notify(ctx, "probe")
			}
		}()
		deadline := time.After(20 * time.Second)
		for up := false; !up; {
			select {
			case p := <-heard:
				up = p == "probe"
			case <-deadline:
				t.Fatal("the listener heard nothing")
			}
		}
		listening <- struct{}{}
		time.Sleep(100 * time.Millisecond)
		for len(heard) > 0 {
			<-heard
		}
		err := s.InTx(ctx, func(ctx context.Context) error {
			if err := s.Notify(ctx, "rolled-back"); err != nil {
				t.Fatal(err)
			}
			return errors.New("roll back")
		})
		if err == nil {
			t.Fatal("want the rollback's error")
		}
		if err := s.InTx(ctx, func(ctx context.Context) error {
			for _, p := range []string{"a", "b", backend.RevisionNotice, "c"} {
				if err := s.Notify(ctx, p); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		s.FlushNotices()
		if err := s.Notify(ctx, "after"); err != nil {
			t.Fatal(err)
		}
		var got []string
		for len(got) < 5 {
			select {
			case p := <-heard:
				got = append(got, p)
			case <-time.After(10 * time.Second):
				t.Fatalf("heard %v, want 5 notices", got)
			}
		}
		// The revision notice commits with its transaction, the others
		// follow the commit in order.
		if g := strings.Join(got, " "); g != backend.RevisionNotice+" a b c after" {
			t.Fatalf("heard %q", g)
		}
		select {
		case p := <-heard:
			t.Fatalf("heard %q more", p)
		case <-time.After(200 * time.Millisecond):
		}
		cancel()
		<-done
	})
}

// TestListVisibleTotalFresh: a restricted list's total, kept per visible set
// where the store sees every write (visible.go), follows creates and deletes
// of visible keys at once, inside and outside transactions, on a set read
// from more chunks than one page query takes.
func TestListVisibleTotalFresh(t *testing.T) {
	each(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		key := func(i int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012d", i) }
		var vis []string
		for i := range 200 {
			vis = append(vis, key(i))
		}
		create := func(ctx context.Context, i int) {
			t.Helper()
			if _, err := s.Create(ctx, "machines", key(i), mustJSON(t, map[string]any{"Uuid": key(i), "Name": fmt.Sprintf("m-%d", i)})); err != nil {
				t.Fatal(err)
			}
		}
		// Every third visible key exists, and keys outside the set.
		for i := 0; i < 260; i += 3 {
			create(ctx, i)
		}
		check := func(q backend.Query, wantFirst string, wantLen, wantTotal int) {
			t.Helper()
			recs, total, matched, err := s.List(ctx, "machines", q)
			if err != nil {
				t.Fatal(err)
			}
			if total != wantTotal || matched != wantTotal || len(recs) != wantLen || (wantLen > 0 && recs[0].Key != wantFirst) {
				first := ""
				if len(recs) > 0 {
					first = recs[0].Key
				}
				t.Fatalf("got %d rows from %q, total %d matched %d; want %d from %q, total %d", len(recs), first, total, matched, wantLen, wantFirst, wantTotal)
			}
		}
		page := backend.Query{Offset: 40, Limit: 50, Visible: vis}
		for range 2 {
			// key(120) is the 41st existing key: the page spans chunks.
			check(page, key(120), 27, 67)
		}
		create(ctx, 1)
		check(page, key(117), 28, 68)
		if _, err := s.Delete(ctx, "machines", key(0)); err != nil {
			t.Fatal(err)
		}
		check(page, key(120), 27, 67)
		// A write outside the set changes nothing, inside one it counts
		// from its commit.
		create(ctx, 401)
		check(page, key(120), 27, 67)
		if err := s.InTx(ctx, func(ctx context.Context) error {
			create(ctx, 2)
			recs, total, _, err := s.List(ctx, "machines", page)
			if err != nil {
				return err
			}
			if total != 68 || len(recs) != 28 {
				t.Errorf("inside the transaction: %d rows, total %d; want 28, 68", len(recs), total)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		check(page, key(117), 28, 68)
		check(backend.Query{Limit: 3, Reverse: true, Visible: vis}, key(198), 3, 68)
	})
}

// TestCreateMany: a bulk create stores every object with a revision of its
// own, lists and reads back as Create's would, and inserts none when one
// key exists.
func TestCreateMany(t *testing.T) {
	each(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		if _, err := s.Create(ctx, "machines", "k-0", mustJSON(t, map[string]any{"Uuid": "k-0", "Name": "n-0"})); err != nil {
			t.Fatal(err)
		}
		var keys []string
		var docs [][]byte
		for i := 1; i <= 12000; i++ {
			k := fmt.Sprintf("k-%05d", i)
			keys = append(keys, k)
			docs = append(docs, mustJSON(t, map[string]any{"Uuid": k, "Name": fmt.Sprintf("n-%d", i), "Params": map[string]any{"a/b": i}}))
		}
		if err := s.CreateMany(ctx, "machines", keys, docs); err != nil {
			t.Fatal(err)
		}
		recs, total, _, err := s.List(ctx, "machines", backend.Query{Limit: -1})
		if err != nil {
			t.Fatal(err)
		}
		if total != 12001 || len(recs) != 12001 {
			t.Fatalf("listed %d of total %d, want 12001", len(recs), total)
		}
		revs := map[int64]bool{}
		for _, r := range recs {
			revs[r.Rev] = true
		}
		if len(revs) != len(recs) {
			t.Fatalf("%d revisions for %d objects", len(revs), len(recs))
		}
		r, err := s.Get(ctx, "machines", "k-11999")
		if err != nil {
			t.Fatal(err)
		}
		var got map[string]any
		if err := json.Unmarshal(r.Data, &got); err != nil {
			t.Fatal(err)
		}
		if got["Name"] != "n-11999" || got["Params"].(map[string]any)["a/b"] != float64(11999) {
			t.Fatalf("read back %s", r.Data)
		}
		// One existing key: nothing of the batch is inserted.
		err = s.CreateMany(ctx, "machines", []string{"k-new", "k-00007"}, [][]byte{[]byte(`{"Uuid":"k-new","Name":"x"}`), []byte(`{"Uuid":"k-00007","Name":"y"}`)})
		if err == nil {
			t.Fatal("CreateMany over an existing key succeeded")
		}
		wantCode(t, s.CreateMany(ctx, "users", []string{"u"}, [][]byte{[]byte(`{"Name":"u"}`)}), backend.EBADREQUEST)
		if _, err := s.Get(ctx, "machines", "k-new"); !backend.IsCode(err, backend.ENOTFOUND) {
			t.Fatalf("k-new after the failed batch: %v", err)
		}
	})
}

// TestListVisibleTotalReplicas: on PostgreSQL a restricted list's total,
// kept per visible set, follows a create and a delete made through another
// store on the same schema (another replica) on the very next list.
func TestListVisibleTotalReplicas(t *testing.T) {
	dsn := storetest.PostgresDSN(t)
	if dsn == "" {
		t.Skip("no PostgreSQL test database")
	}
	ctx := context.Background()
	open := func() *store.Store {
		s, err := store.Open(ctx, dsn, store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	a, b := open(), open()
	key := func(i int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012d", i) }
	var vis []string
	for i := range 100 {
		vis = append(vis, key(i))
	}
	for i := 0; i < 100; i += 2 {
		if _, err := b.Create(ctx, "machines", key(i), mustJSON(t, map[string]any{"Uuid": key(i), "Name": fmt.Sprintf("m-%d", i)})); err != nil {
			t.Fatal(err)
		}
	}
	total := func() int {
		t.Helper()
		_, n, _, err := a.List(ctx, "machines", backend.Query{Limit: 10, Visible: vis})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	for range 2 {
		if n := total(); n != 50 {
			t.Fatalf("total %d, want 50", n)
		}
	}
	if _, err := b.Create(ctx, "machines", key(1), mustJSON(t, map[string]any{"Uuid": key(1), "Name": "m-1"})); err != nil {
		t.Fatal(err)
	}
	if n := total(); n != 51 {
		t.Fatalf("total after another replica's create %d, want 51", n)
	}
	if err := b.InTx(ctx, func(ctx context.Context) error {
		for _, i := range []int{0, 2} {
			if _, err := b.Delete(ctx, "machines", key(i)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if n := total(); n != 49 {
		t.Fatalf("total after another replica's deletes %d, want 49", n)
	}
	if _, err := b.Delete(ctx, "machines", key(4)); err != nil {
		t.Fatal(err)
	}
	if n := total(); n != 48 {
		t.Fatalf("total after another replica's delete %d, want 48", n)
	}
	if err := b.CreateMany(ctx, "machines", []string{key(3), key(5)}, [][]byte{
		mustJSON(t, map[string]any{"Uuid": key(3), "Name": "m-3"}), mustJSON(t, map[string]any{"Uuid": key(5), "Name": "m-5"})}); err != nil {
		t.Fatal(err)
	}
	if n := total(); n != 50 {
		t.Fatalf("total after another replica's bulk create %d, want 50", n)
	}
	// A create that conflicts writes nothing and moves nothing.
	if _, err := b.Create(ctx, "machines", key(1), mustJSON(t, map[string]any{"Uuid": key(1), "Name": "m-1b"})); !backend.IsCode(err, backend.ECONFLICT) {
		t.Fatalf("second create of %s: %v", key(1), err)
	}
	if n := total(); n != 50 {
		t.Fatalf("total after a conflicting create %d, want 50", n)
	}
}
