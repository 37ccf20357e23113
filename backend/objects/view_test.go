package objects

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/provgate/provgate/backend"
	"github.com/provgate/provgate/backend/store"
)

// countingStore counts full reads behind backend.View, to tell a cache hit from a miss.
type countingStore struct {
	*store.Store
	gets int
}

func (c *countingStore) Get(ctx context.Context, prefix, key string) (backend.Record, error) {
	c.gets++
	return c.Store.Get(ctx, prefix, key)
}

// revsOnly is countingStore as a store other processes write too: the
// cache must read revisions, whatever the database.
type revsOnly struct{ *countingStore }

func (revsOnly) SoleWriter() bool { return false }

// TestView: backend.View answers what Get answers, encoded, from the cache while
// the object stands still, and reads again as soon as anything (this
// service, another service over the same database, a delete, a delete and
// create again) changed it: by its revision (revsOnly, and PostgreSQL), or
// told by the store (SQLite, the only writer of its file). The cache holds
// at most its size.
func TestView(t *testing.T) {
	each(t, func(t *testing.T, e env) {
		for _, mode := range []string{"store default", "revisions"} {
			t.Run(mode, func(t *testing.T) {
				cs := &countingStore{Store: e.st}
				var st Store = cs
				if mode == "revisions" {
					st = revsOnly{cs}
				}
				testView(t, e, cs, New(st, Options{ViewCacheSize: 3}), strings.ReplaceAll(mode, " ", "-"))
			})
		}
	})
}

// testView runs TestView's steps on reader; suffix keeps its objects
// apart from another run's on the same database.
func testView(t *testing.T, e env, cs *countingStore, reader *Service, suffix string) {
	ctx := sys()
	{
		p1 := "p1-" + suffix
		mustCreate(t, e, "profiles", `{"Name":"`+p1+`","Description":"one"}`)

		view := func(key string) backend.View {
			t.Helper()
			v, err := reader.Objects.View(ctx, "profiles", key)
			if err != nil {
				t.Fatalf("view %s: %v", key, err)
			}
			m, rev, err := reader.Objects.Get(ctx, "profiles", key)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := json.Marshal(m)
			if string(v.JSON) != string(want) || v.Rev != rev || v.ETag != backend.ModelETag(m, rev) {
				t.Fatalf("view %s = %s rev %d, Get = %s rev %d", key, v.JSON, v.Rev, want, rev)
			}
			return v
		}
		misses := func(f func()) int {
			t.Helper()
			before := cs.gets
			f()
			return cs.gets - before - 1 // minus the comparison's own Get
		}

		if n := misses(func() { view(p1) }); n != 1 {
			t.Fatalf("first view read the store %d times", n)
		}
		if n := misses(func() { view(p1) }); n != 0 {
			t.Fatalf("a second view of an unchanged object read it again (%d)", n)
		}
		// A write through another service (another replica) is seen at once.
		if _, err := e.svc.Objects.Patch(ctx, "profiles", p1, []byte(`[{"op":"replace","path":"/Description","value":"two"}]`), false); err != nil {
			t.Fatal(err)
		}
		if n := misses(func() {
			if v := view(p1); !strings.Contains(string(v.JSON), `"two"`) {
				t.Fatalf("stale view after a write: %s", v.JSON)
			}
		}); n != 1 {
			t.Fatalf("view after a write read the store %d times", n)
		}
		// Deleted: not found, as Get.
		if _, err := e.svc.Objects.Delete(ctx, "profiles", p1); err != nil {
			t.Fatal(err)
		}
		_, err := reader.Objects.View(ctx, "profiles", p1)
		wantErr(t, err, backend.ENOTFOUND, "", "Not Found")
		// Created again with the very same body as before: a new revision,
		// never the old entry.
		mustCreate(t, e, "profiles", `{"Name":"`+p1+`","Description":"two"}`)
		if n := misses(func() { view(p1) }); n != 1 {
			t.Fatalf("view of an object created again read the store %d times", n)
		}
		// Index keys are read, and answered, as Get does.
		if v, err := reader.Objects.View(ctx, "profiles", "Name:"+p1); err != nil || v.Model.Key() != p1 {
			t.Fatalf("view by index: %+v %v", v, err)
		}
		_, err = reader.Objects.View(ctx, "profiles", "nosuch")
		wantErr(t, err, backend.ENOTFOUND, "", "Not Found")

		// Bounded: least recently used objects leave first.
		for i := range 6 {
			mustCreate(t, e, "profiles", fmt.Sprintf(`{"Name":"q%d-%s"}`, i, suffix))
			view(fmt.Sprintf("q%d-%s", i, suffix))
		}
		if n := reader.Objects.ViewCacheLen(); n != 3 {
			t.Fatalf("cache holds %d objects, bound is 3", n)
		}
		if n := misses(func() { view("q5-" + suffix) }); n != 0 {
			t.Fatalf("recent object was evicted (%d reads)", n)
		}
		if n := misses(func() { view("q0-" + suffix) }); n != 1 {
			t.Fatalf("oldest object still cached (%d reads)", n)
		}

		// Off: every view reads the store.
		off := New(cs, Options{ViewCacheSize: -1})
		for range 2 {
			before := cs.gets
			if _, err := off.Objects.View(ctx, "profiles", "q1-"+suffix); err != nil || cs.gets != before+1 {
				t.Fatalf("view without a cache: %v, %d reads", err, cs.gets-before)
			}
		}
	}
}

// TestListJSON: a list reply from ListJSON is, byte for byte, the encoding
// of what List answers, with and without view options, whether its objects
// come from the read cache or from the rows; shaping a cached object never
// changes it; a write through another service over the same database (a
// replica) is seen by the next list, since each row's revision must match
// the cached one.
func TestListJSON(t *testing.T) {
	each(t, func(t *testing.T, e env) {
		ctx := sys()
		reader := New(e.st, Options{ViewCacheSize: 64})
		other := New(e.st, Options{SecureKey: testKey})
		for i := 0; i < 5; i++ {
			mustCreate(t, e, "machines", fmt.Sprintf(`{"Name":"lj%d","Uuid":"%08x-1111-4000-8000-000000000000","Params":{"a":%d,"b":"x"},"Meta":{"color":"red"}}`, i, i, i))
		}
		k := backend.NewCatalog().Kind("machines")
		same := func(raw string) {
			t.Helper()
			vals, err := url.ParseQuery(raw)
			if err != nil {
				t.Fatal(err)
			}
			q, err := backend.ParseQuery(k, vals, func(string) bool { return false })
			if err != nil {
				t.Fatal(err)
			}
			want, wt, wm, err := reader.Objects.List(ctx, "machines", q)
			if err != nil {
				t.Fatal(err)
			}
			wantJSON, err := json.Marshal(want)
			if err != nil {
				t.Fatal(err)
			}
			got, gt, gm, err := reader.Objects.ListJSON(ctx, "machines", q)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(wantJSON) || gt != wt || gm != wm {
				t.Fatalf("%s: ListJSON %s (%d, %d)\nList %s (%d, %d)", raw, got, gt, gm, wantJSON, wt, wm)
			}
		}
		for round := 0; round < 2; round++ { // the second round reads from the cache
			for _, raw := range []string{"", "limit=2&offset=1", "slim=Params", "slim=Params,Meta", "params=a", "params=b", "Name=lj3", "reverse=true&slim=Meta"} {
				same(raw)
			}
		}
		if n := reader.Objects.ViewCacheLen(); n != 5 {
			t.Fatalf("read cache holds %d objects after the lists, want 5", n)
		}
		// Shaping worked on copies: the cached objects keep Params and Meta.
		body, _, _, err := reader.Objects.ListJSON(ctx, "machines", backend.Query{Limit: -1})
		if err != nil {
			t.Fatal(err)
		}
		if c := strings.Count(string(body), `"color":"red"`); c != 5 || strings.Count(string(body), `"b":"x"`) != 5 {
			t.Fatalf("cached objects lost Params or Meta: %s", body)
		}
		// A write through another service: the next list answers it.
		if _, err := other.Objects.Patch(ctx, "machines", "00000002-1111-4000-8000-000000000000",
			[]byte(`[{"op":"replace","path":"/Params/b","value":"changed"}]`), false); err != nil {
			t.Fatal(err)
		}
		body, _, _, err = reader.Objects.ListJSON(ctx, "machines", backend.Query{Limit: -1})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(body), `"b":"changed"`) {
			t.Fatalf("list after another service's write is stale: %s", body)
		}
		same("")
		same("slim=Meta")
		// Shaped encodings are kept by revision: the patched machine's
		// new Params show through params=, which the first rounds cached.
		same("params=b")
		body, _, _, err = reader.Objects.ListJSON(ctx, "machines", backend.Query{Limit: -1, Params: []string{"b"}})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(body), `"b":"changed"`) || strings.Count(string(body), `"b":"x"`) != 4 {
			t.Fatalf("params=b list after another service's write: %s", body)
		}
		// A caller whose tenant shows one machine gets that one only,
		// though the cache holds all five from the unrestricted lists.
		one := "00000003-1111-4000-8000-000000000000"
		body, total, matched, err := reader.Objects.ListJSON(ctx, "machines", backend.Query{Limit: -1, Visible: []string{one}})
		if err != nil {
			t.Fatal(err)
		}
		if total != 1 || matched != 1 || strings.Count(string(body), `"Uuid":`) != 1 || !strings.Contains(string(body), one) {
			t.Fatalf("restricted list from a warm cache: %d %d %s", total, matched, body)
		}
	})
}

// racingStore writes an object between a list's page query and its
// documents' read.
type racingStore struct {
	*store.Store
	between func()
}

func (r racingStore) GetMany(ctx context.Context, prefix string, keys []string) ([]backend.Record, error) {
	if r.between != nil {
		r.between()
	}
	return r.Store.GetMany(ctx, prefix, keys)
}

// TestListJSONChangedBetweenReads: an object written between the page
// query (keys and revisions) and the read of its document is answered as
// the page read again shows it, never as a document of another revision
// under the listed one.
func TestListJSONChangedBetweenReads(t *testing.T) {
	each(t, func(t *testing.T, e env) {
		ctx := sys()
		writer := New(e.st, Options{SecureKey: testKey})
		for i := 0; i < 3; i++ {
			mustCreate(t, e, "machines", fmt.Sprintf(`{"Name":"cb%d","Uuid":"%08x-2222-4000-8000-000000000000","Params":{"b":"x"}}`, i, i))
		}
		target := "00000001-2222-4000-8000-000000000000"
		once := false
		rs := racingStore{Store: e.st, between: func() {
			if once {
				return
			}
			once = true
			if _, err := writer.Objects.Patch(ctx, "machines", target, []byte(`[{"op":"replace","path":"/Params/b","value":"new"}]`), false); err != nil {
				t.Error(err)
			}
		}}
		reader := New(rs, Options{ViewCacheSize: 64})
		body, total, _, err := reader.Objects.ListJSON(ctx, "machines", backend.Query{Limit: -1})
		if err != nil {
			t.Fatal(err)
		}
		if !once || total != 3 || !strings.Contains(string(body), `"b":"new"`) || strings.Count(string(body), `"Uuid":`) != 3 {
			t.Fatalf("list across a write (written %v): %d %s", once, total, body)
		}
		want, _, _, err := reader.Objects.List(ctx, "machines", backend.Query{Limit: -1})
		if err != nil {
			t.Fatal(err)
		}
		wantJSON, _ := json.Marshal(want)
		if string(body) != string(wantJSON) {
			t.Fatalf("ListJSON %s\nList %s", body, wantJSON)
		}
	})
}

// TestListJSONRestrictedFromCache: a restricted page in key order whose
// objects the cache holds answers as the store would, and follows creates,
// patches and deletes made through another service on the same store at
// once.
func TestListJSONRestrictedFromCache(t *testing.T) {
	each(t, func(t *testing.T, e env) {
		ctx := sys()
		reader := New(e.st, Options{ViewCacheSize: 64})
		other := New(e.st, Options{SecureKey: testKey})
		key := func(i int) string { return fmt.Sprintf("%08x-3333-4000-8000-000000000000", i) }
		for i := 0; i < 8; i++ {
			mustCreate(t, e, "machines", fmt.Sprintf(`{"Name":"rc%d","Uuid":"%s","Params":{"b":"x"}}`, i, key(i)))
		}
		vis := []string{key(1), key(2), key(4), key(5), key(6), key(9)}
		same := func(q backend.Query, wantTotal int) string {
			t.Helper()
			want, wt, _, err := reader.Objects.List(ctx, "machines", q)
			if err != nil {
				t.Fatal(err)
			}
			wantJSON, _ := json.Marshal(want)
			got, gt, gm, err := reader.Objects.ListJSON(ctx, "machines", q)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(wantJSON) || gt != wt || gm != wt || gt != wantTotal {
				t.Fatalf("ListJSON %s (%d, %d)\nList %s (%d), want total %d", got, gt, gm, wantJSON, wt, wantTotal)
			}
			return string(got)
		}
		for _, q := range []backend.Query{
			{Limit: 3, Visible: vis}, {Offset: 1, Limit: 2, Visible: vis}, {Limit: 2, Reverse: true, Visible: vis},
			{Limit: 3, Slim: []string{"Params"}, Visible: vis},
		} {
			for range 2 { // the second from the cache
				same(q, 5)
			}
		}
		if _, err := other.Objects.Patch(ctx, "machines", key(2), []byte(`[{"op":"replace","path":"/Params/b","value":"new"}]`), false); err != nil {
			t.Fatal(err)
		}
		if body := same(backend.Query{Limit: 3, Visible: vis}, 5); !strings.Contains(body, `"b":"new"`) {
			t.Fatalf("page after a patch: %s", body)
		}
		if _, err := other.Objects.Delete(ctx, "machines", key(1)); err != nil {
			t.Fatal(err)
		}
		if body := same(backend.Query{Limit: 3, Visible: vis}, 4); strings.Contains(body, key(1)) {
			t.Fatalf("page after a delete: %s", body)
		}
		mustCreate(t, e, "machines", fmt.Sprintf(`{"Name":"rc9","Uuid":"%s"}`, key(9)))
		same(backend.Query{Limit: 2, Reverse: true, Visible: vis}, 5)
		same(backend.Query{Limit: 9, Visible: vis}, 5)
	})
}
