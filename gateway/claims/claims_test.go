package claims

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/provgate/provgate/backend"
)

var update = flag.Bool("update", false, "rewrite testdata/claims/derive.golden.json")

const (
	m1 = "3e7031fe-3062-45f1-835c-92541bc9cbd3" // machine "m1"
	m2 = "a7d8c1a2-1b2c-4d5e-8f90-123456789abc" // machine "a/b"
	j1 = "5b2a0c4e-7f3d-4b1a-9c8e-0d1f2e3a4b5c" // a job of m1
)

// fakeResolver knows a few objects; everything else is a native key.
type fakeResolver struct {
	calls []string
}

var indexKeys = map[string]string{
	"machines|Name:m1":          m1,
	"machines|Name:a/b":         m2,
	"machines|Uuid:" + m1:       m1,
	"users|Name:bob":            "bob",
	"jobs|Uuid:" + j1:           j1,
	"reservations|Addr:fd00::5": "fd00::5",
	"pools|Id:p1":               "p1",
}

var stored = map[string]string{
	"machines|" + m1: `{"Validated":true,"Available":true,"Errors":[],"ReadOnly":false,"Meta":{"color":"blue"},
		"Endpoint":"","Bundle":"","Uuid":"` + m1 + `","Name":"m1","Description":"old","Secret":"s3cr3t",
		"Profiles":["p1"],"Params":{"a":1,"callback/callbacks":{"x":{"Url":"http://x"}},"big":9007199254740993},
		"Runnable":true,"CurrentTask":0,"Workflow":""}`,
	"users|bob": `{"Validated":true,"Available":true,"Errors":[],"Meta":{},"Name":"bob","Description":"",
		"Roles":["ops"],"Secret":"Ab3xY0123456789z","PasswordHash":"c2NyeXB0"}`,
	"pools|p1": `{"Id":"p1","Meta":{},"Errors":[],"ParentPool":"","EnterActions":{"Workflow":"wf1"}}`,
}

func (f *fakeResolver) NativeKey(_ context.Context, prefix, key string) (string, error) {
	f.calls = append(f.calls, "NativeKey "+prefix+" "+key)
	if v, ok := indexKeys[prefix+"|"+key]; ok {
		return v, nil
	}
	return "", backend.NotFound(backend.ReadOp, prefix, key)
}

func (f *fakeResolver) JobMachine(_ context.Context, job string) (string, error) {
	f.calls = append(f.calls, "JobMachine "+job)
	if job == j1 {
		return m1, nil
	}
	return "", backend.NotFound(backend.ReadOp, "jobs", job)
}

func (f *fakeResolver) Current(_ context.Context, prefix, key string) ([]byte, error) {
	f.calls = append(f.calls, "Current "+prefix+" "+key)
	if v, ok := stored[prefix+"|"+key]; ok {
		return []byte(v), nil
	}
	if prefix == "jobs" && key == j1 {
		return []byte(`{"Uuid":"` + j1 + `","Machine":"` + m1 + `","State":"running","Meta":{}}`), nil
	}
	k := kinds.Kind(prefix)
	if k == nil {
		return nil, backend.NotFound(backend.ReadOp, prefix, key)
	}
	b, _ := json.Marshal(map[string]any{k.KeyField: key, "Description": "old", "Meta": map[string]string{}})
	return b, nil
}

type testCase struct {
	Name   string `json:"name"`
	Method string `json:"method"`
	Path   string `json:"path"`
	Query  string `json:"query,omitempty"`
	Body   string `json:"body,omitempty"`
}

type golden struct {
	testCase
	Claims    []string `json:"claims"`
	Scope     string   `json:"scope"`
	Key       string   `json:"key,omitempty"`
	Ref       string   `json:"ref,omitempty"`
	Specific  string   `json:"specific,omitempty"`
	Param     string   `json:"param,omitempty"`
	Cmd       string   `json:"cmd,omitempty"`
	List      bool     `json:"list,omitempty"`
	Operation string   `json:"operation"`
	Pattern   string   `json:"pattern"`
	Lookups   []string `json:"lookups,omitempty"`
}

// sampleKey is the key each kind's generated cases address.
var sampleKey = map[string]string{
	"users": "bob", "roles": "ops", "tenants": "t1", "machines": m1, "profiles": "prof1",
	"params": "foo/bar", "bootenvs": "local", "workflows": "wf1", "stages": "st1", "tasks": "task1",
	"jobs": j1, "pools": "p1", "plugins": "callback", "reservations": "10.0.0.5",
	"plugin_providers": "callback",
}

// routeCase builds one request for a route form, so every form of Routes()
// has a golden case.
func routeCase(ri *Route) testCase {
	rel := strings.TrimPrefix(ri.Pattern, apiBase+"/")
	parts := strings.Split(rel, "/")
	kind := parts[0]
	if (kind == "indexes" || kind == "meta" || kind == "access") && len(parts) > 1 {
		kind = parts[1]
	}
	for i, s := range parts {
		switch s {
		case "{key}", "{key...}":
			parts[i] = sampleKey[kind]
		case "{name...}":
			parts[i] = "callback/callbacks"
		case "{cmd}":
			parts[i] = "doThing"
		}
	}
	tc := testCase{Name: ri.Method + " " + ri.Pattern, Method: ri.Method, Path: apiBase + "/" + strings.Join(parts, "/")}
	last := parts[len(parts)-1]
	switch {
	case ri.Method == "PATCH" && strings.HasSuffix(ri.Pattern, "/params"):
		tc.Body = `[{"op":"add","path":"/newp","from":"","value":5}]`
	case ri.Method == "PATCH" && strings.HasPrefix(rel, "meta/"):
		tc.Body = `[{"op":"add","path":"/color","value":"red"}]`
	case ri.Method == "PATCH":
		tc.Body = `[{"op":"test","path":"/Description","from":"","value":"old"},{"op":"replace","path":"/Description","from":"","value":"new"}]`
	case ri.Method == "PUT" && strings.HasSuffix(ri.Pattern, "/{key}"), ri.Method == "PUT" && strings.HasSuffix(ri.Pattern, "/{key...}"):
		k := kinds.Kind(kind)
		b, _ := json.Marshal(map[string]any{k.KeyField: sampleKey[kind], "Description": "new", "Meta": map[string]string{}})
		tc.Body = string(b)
	case ri.Pattern == apiBase+"/jobs" && ri.Method == "POST":
		tc.Body = `{"Machine":"` + m1 + `","Uuid":"","StartTime":"0001-01-01T00:00:00Z"}`
	case last == "password":
		tc.Body = `{"Password":"s3cret"}`
	case last == "import":
		// Two named objects and one that names no key of its own.
		tc.Body = `[{"Name":"a1"},{"Name":"b2"},{}]`
	case ri.Pattern == apiBase+"/access/explain":
		tc.Body = `{"User":"bob","Method":"GET","Path":"/machines"}`
	case ri.Method == "POST" || ri.Method == "PUT":
		tc.Body = `{}`
	}
	if ri.Pattern == apiBase+"/access/roles/diff" {
		tc.Query = "a=ops&b=reader"
	}
	return tc
}

// edgeCases are the PATCH, PUT, params and key forms the generated cases do
// not reach.
var edgeCases = []testCase{
	{Name: "get by Name index", Method: "GET", Path: "/api/v3/machines/Name:m1"},
	{Name: "get decode adds getSecure", Method: "GET", Path: "/api/v3/machines/Name:m1", Query: "decode=true"},
	{Name: "get decode=false", Method: "GET", Path: "/api/v3/machines/" + m1, Query: "decode=false"},
	{Name: "get decode=1 fails closed", Method: "GET", Path: "/api/v3/machines/" + m1, Query: "decode=1"},
	{Name: "get decode empty fails closed", Method: "GET", Path: "/api/v3/machines/" + m1, Query: "decode"},
	{Name: "get decode on scope without getSecure", Method: "GET", Path: "/api/v3/users/bob", Query: "decode=true"},
	{Name: "list decode adds getSecure", Method: "GET", Path: "/api/v3/profiles", Query: "decode=true"},
	{Name: "count decode", Method: "HEAD", Path: "/api/v3/machines", Query: "decode=true&Name=m1"},
	{Name: "params decode", Method: "GET", Path: "/api/v3/machines/Name:m1/params/foo/bar", Query: "decode=true&aggregate=true"},
	{Name: "non-unique index is a native key", Method: "GET", Path: "/api/v3/machines/Arch:amd64"},
	{Name: "ipv6 reservation is a native key", Method: "GET", Path: "/api/v3/reservations/fd00::5"},
	{Name: "reservation by Addr index", Method: "DELETE", Path: "/api/v3/reservations/Addr:fd00::5"},
	{Name: "encoded slash stays in the key", Method: "GET", Path: "/api/v3/machines/Name:a%2Fb"},
	{Name: "encoded slash in profile key", Method: "DELETE", Path: "/api/v3/profiles/a%2Fb"},
	{Name: "param object with slashes", Method: "GET", Path: "/api/v3/params/callback/callbacks"},
	{Name: "param object with encoded slash", Method: "PATCH", Path: "/api/v3/params/callback%2Fcallbacks",
		Body: `[{"op":"replace","path":"/Secure","value":true}]`},
	{Name: "param object named like a sub-resource", Method: "GET", Path: "/api/v3/params/foo/actions"},
	{Name: "param object with encoded trailing slash", Method: "DELETE", Path: "/api/v3/params/sec/pw%2F"},
	{Name: "meta of param with encoded trailing slash", Method: "PATCH", Path: "/api/v3/meta/params/sec/pw%2F",
		Body: `[{"op":"add","path":"/color","value":"red"}]`},
	{Name: "params set encoded trailing slash", Method: "POST", Path: "/api/v3/machines/" + m1 + "/params/pub%2F", Body: `"x"`},
	{Name: "create names its key", Method: "POST", Path: "/api/v3/profiles", Body: `{"Name":"a1","Description":"x"}`},
	{Name: "create key field in any case, last wins", Method: "POST", Path: "/api/v3/profiles", Body: `{"Name":"a1","name":"b2"}`},
	{Name: "create machine with Uuid", Method: "POST", Path: "/api/v3/machines", Body: `{"Name":"m9","Uuid":"` + m2 + `"}`},
	{Name: "create machine without Uuid needs star", Method: "POST", Path: "/api/v3/machines", Body: `{"Name":"m9","Uuid":""}`},
	{Name: "create with a list as key needs star", Method: "POST", Path: "/api/v3/users", Body: `{"Name":"a,b"}`},
	{Name: "create with a spaced key needs star", Method: "POST", Path: "/api/v3/users", Body: `{"Name":" a"}`},
	{Name: "create with star key needs star", Method: "POST", Path: "/api/v3/pools", Body: `{"Id":"*"}`},
	{Name: "create malformed body needs star", Method: "POST", Path: "/api/v3/pools", Body: `{"Id":`},
	{Name: "patch test op needs get", Method: "PATCH", Path: "/api/v3/machines/" + m1,
		Body: `[{"op":"test","path":"/Params/secret","value":"guess"},{"op":"replace","path":"/Description","value":"x"}]`},
	{Name: "params patch test op needs get", Method: "PATCH", Path: "/api/v3/machines/" + m1 + "/params",
		Body: `[{"op":"test","path":"/secret","value":"guess"},{"op":"add","path":"/pub","value":1}]`},
	{Name: "trailing slash", Method: "GET", Path: "/api/v3/machines/"},
	{Name: "patch escaped pointers", Method: "PATCH", Path: "/api/v3/machines/" + m1,
		Body: `[{"op":"add","path":"/Params/callback~1callbacks/a","from":"","value":{"Url":"http://x"}},{"op":"add","path":"/Params/a~0b","value":1}]`},
	{Name: "patch move needs path and from", Method: "PATCH", Path: "/api/v3/machines/" + m1,
		Body: `[{"op":"move","from":"/Params/old","path":"/Params/new"}]`},
	{Name: "patch copy needs path and get", Method: "PATCH", Path: "/api/v3/machines/" + m1,
		Body: `[{"op":"copy","from":"/Params/a","path":"/Params/b"}]`},
	{Name: "patch remove add replace", Method: "PATCH", Path: "/api/v3/machines/" + m1,
		Body: `[{"op":"remove","path":"/Params/a"},{"op":"add","path":"/Profiles/-","value":"p2"},{"op":"replace","path":"/Runnable","value":false}]`},
	{Name: "patch duplicate pointers once", Method: "PATCH", Path: "/api/v3/machines/" + m1,
		Body: `[{"op":"replace","path":"/Stage","value":"a"},{"op":"replace","path":"/Stage","value":"b"}]`},
	{Name: "patch drpcli test and replace", Method: "PATCH", Path: "/api/v3/machines/" + m1,
		Body: `[{"op":"test","path":"/Params/a","from":"","value":1},{"op":"replace","path":"/Params/a","from":"","value":2},{"op":"add","path":"/Params/b","from":"","value":"x"},{"op":"test","path":"/Description","from":"","value":""},{"op":"replace","path":"/Description","from":"","value":"hello"}]`},
	{Name: "patch empty asks get", Method: "PATCH", Path: "/api/v3/machines/Name:m1", Body: `[]`},
	{Name: "patch only tests asks get", Method: "PATCH", Path: "/api/v3/roles/ops",
		Body: `[{"op":"test","path":"/Description","value":"x"}]`},
	{Name: "patch whole-document test needs get", Method: "PATCH", Path: "/api/v3/bootenvs/local",
		Body: `[{"op":"test","path":"","from":"","value":{"Name":"local"}},{"op":"replace","path":"/Description","from":"","value":"x"}]`},
	{Name: "patch whole-document replace needs bare update", Method: "PATCH", Path: "/api/v3/bootenvs/local",
		Body: `[{"op":"replace","path":"","value":{"Name":"local"}}]`},
	{Name: "patch move from whole document", Method: "PATCH", Path: "/api/v3/profiles/prof1",
		Body: `[{"op":"move","from":"","path":"/Params/x"}]`},
	{Name: "patch exact-case members only", Method: "PATCH", Path: "/api/v3/users/bob",
		Body: `[{"op":"replace","path":"/Description","Path":"/Secret","value":"x"}]`},
	{Name: "patch job by its machine", Method: "PATCH", Path: "/api/v3/jobs/Uuid:" + j1,
		Body: `[{"op":"replace","path":"/State","value":"failed"}]`},
	{Name: "params patch drpcli add", Method: "PATCH", Path: "/api/v3/machines/Name:m1/params",
		Body: `[{"op":"test","path":"","from":"","value":{"a":1}},{"op":"add","path":"/newp","from":"","value":5}]`},
	{Name: "params patch whole map", Method: "PATCH", Path: "/api/v3/profiles/prof1/params",
		Body: `[{"op":"replace","path":"","value":{}}]`},
	{Name: "params patch nested and move", Method: "PATCH", Path: "/api/v3/stages/st1/params",
		Body: `[{"op":"add","path":"/callback~1callbacks/a","value":{}},{"op":"move","from":"/old~0name","path":"/new"}]`},
	{Name: "params set nested name", Method: "POST", Path: "/api/v3/machines/Name:m1/params/callback/callbacks", Body: `{"a":{}}`},
	{Name: "params set name with tilde", Method: "PUT", Path: "/api/v3/plugins/callback/params/a~b", Body: `1`},
	{Name: "params delete encoded slash", Method: "DELETE", Path: "/api/v3/machines/" + m1 + "/params/foo%2Fbar"},
	{Name: "meta patch", Method: "PATCH", Path: "/api/v3/meta/roles/ops",
		Body: `[{"op":"test","path":"","value":{}},{"op":"add","path":"/feature-flags","value":"x"}]`},
	{Name: "put unchanged asks get", Method: "PUT", Path: "/api/v3/machines/" + m1,
		Body: `{"Validated":false,"Available":false,"Errors":null,"ReadOnly":false,"Meta":{"color":"blue"},"Endpoint":"","Bundle":"","Uuid":"` + m1 + `","Name":"m1","Description":"old","Profiles":["p1"],"Params":{"a":1.0,"callback/callbacks":{"x":{"Url":"http://x"}},"big":9007199254740993},"Runnable":true,"CurrentTask":0,"Workflow":null,"Stage":""}`},
	{Name: "put nested leaves", Method: "PUT", Path: "/api/v3/machines/Name:m1",
		Body: `{"Meta":{},"Uuid":"` + m1 + `","Name":"m1","Description":"old","Profiles":["p1","p2"],"Params":{"a":2,"callback/callbacks":{"x":{"Url":"http://y"},"y~":{}},"big":9007199254740992},"Runnable":true}`},
	{Name: "put secret counts when given", Method: "PUT", Path: "/api/v3/users/bob",
		Body: `{"Name":"bob","Roles":["ops"],"Secret":"mine","PasswordHash":""}`},
	{Name: "put case variant field", Method: "PUT", Path: "/api/v3/users/bob",
		Body: `{"Name":"bob","Roles":["ops"],"passwordhash":"c2NyeXB0","description":"x"}`},
	{Name: "put clears a field", Method: "PUT", Path: "/api/v3/pools/p1",
		Body: `{"Id":"p1","ParentPool":"","EnterActions":{"Workflow":"wf1","AddProfiles":["x"]}}`},
	{Name: "put job", Method: "PUT", Path: "/api/v3/jobs/" + j1,
		Body: `{"Uuid":"` + j1 + `","Machine":"` + m1 + `","State":"finished","Meta":{}}`},
	{Name: "job create reads Machine as the handler does", Method: "POST", Path: "/api/v3/jobs",
		Body: `{"Machine":"` + m2 + `","machine":"` + m1 + `"}`},
	{Name: "job create by machine index", Method: "POST", Path: "/api/v3/jobs", Body: `{"Machine":"Name:m1"}`},
	{Name: "job create for an unknown machine keeps the key", Method: "POST", Path: "/api/v3/jobs", Body: `{"Machine":"Name:nope"}`},
	{Name: "patch empty body is the empty patch", Method: "PATCH", Path: "/api/v3/tasks/task1", Body: " \n"},
	{Name: "patch null is the empty patch", Method: "PATCH", Path: "/api/v3/tasks/task1", Body: "null"},
	{Name: "put drops unknown fields and keeps an empty key", Method: "PUT", Path: "/api/v3/users/bob",
		Body: `{"Name":"","Roles":["ops"],"Frobs":[1],"Meta":null}`},
	{Name: "job log by machine", Method: "PUT", Path: "/api/v3/jobs/" + j1 + "/log", Body: "line\n"},
	{Name: "user token by index", Method: "GET", Path: "/api/v3/users/Name:bob/token", Query: "ttl=600&roles=ops"},
	{Name: "pool verb by index", Method: "POST", Path: "/api/v3/pools/Id:p1/allocateMachines", Body: `{"pool/count":1}`},
	{Name: "pool status without pool object", Method: "GET", Path: "/api/v3/pools/machines-only/status"},
	{Name: "system rotateSecret", Method: "POST", Path: "/api/v3/system/actions/rotateSecret", Body: `{}`},
	{Name: "machine action with plugin", Method: "POST", Path: "/api/v3/machines/Name:m1/actions/callbackDo", Query: "plugin=callback",
		Body: `{"callback/action":"x"}`},
}

func (tc testCase) request(t testing.TB) Request {
	q, err := url.ParseQuery(tc.Query)
	if err != nil {
		t.Fatalf("%s: query: %v", tc.Name, err)
	}
	var body []byte
	if tc.Body != "" {
		body = []byte(tc.Body)
	}
	return Request{Method: tc.Method, Path: tc.Path, Query: q, Body: body}
}

func claimStrings(cs []backend.Claim) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		spec := c.Specific
		if spec == "" {
			spec = `""`
		}
		out[i] = c.Scope + " " + c.Action + " " + spec
	}
	return out
}

func allCases() []testCase {
	var cases []testCase
	for _, ri := range Routes() {
		cases = append(cases, routeCase(ri))
	}
	return append(cases, edgeCases...)
}

func TestDeriveGolden(t *testing.T) {
	ctx := context.Background()
	var got []golden
	for _, tc := range allCases() {
		res := &fakeResolver{}
		r, err := Derive(ctx, tc.request(t), res)
		if err != nil {
			t.Errorf("%s: Derive: %v", tc.Name, err)
			continue
		}
		got = append(got, golden{testCase: tc, Claims: claimStrings(r.Claims), Scope: r.Scope, Key: r.Key,
			Ref: r.Ref, Specific: r.Specific, Param: r.Name, Cmd: r.Cmd, List: r.List, Operation: r.Operation, Pattern: r.Pattern, Lookups: res.calls})
	}
	file := filepath.Join("..", "..", "testdata", "claims", "derive.golden.json")
	gotJSON, err := json.MarshalIndent(got, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	gotJSON = append(gotJSON, '\n')
	if *update {
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, gotJSON, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	wantJSON, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (run go test ./gateway/claims -update)", err)
	}
	var want []golden
	if err := json.Unmarshal(wantJSON, &want); err != nil {
		t.Fatal(err)
	}
	wantBy := map[string]golden{}
	for _, w := range want {
		wantBy[w.Name] = w
	}
	for _, g := range got {
		w, ok := wantBy[g.Name]
		if !ok {
			t.Errorf("%s: no golden entry (run with -update)", g.Name)
			continue
		}
		gj, _ := json.Marshal(g)
		wj, _ := json.Marshal(w)
		if string(gj) != string(wj) {
			t.Errorf("%s:\n got  %s\n want %s", g.Name, gj, wj)
		}
	}
	if len(got) != len(want) {
		t.Errorf("got %d cases, golden has %d (run with -update)", len(got), len(want))
	}
}

// TestRoutesMatchThemselves checks that each route's generated request is
// derived by that same route and by no other.
func TestRoutesMatchThemselves(t *testing.T) {
	seen := map[string]bool{}
	for _, ri := range Routes() {
		if seen[ri.Method+" "+ri.Pattern] {
			t.Errorf("duplicate route %s %s", ri.Method, ri.Pattern)
		}
		seen[ri.Method+" "+ri.Pattern] = true
		tc := routeCase(ri)
		rt, caps, err := match(tc.Method, tc.Path)
		if err != nil {
			t.Errorf("%s: %v", tc.Name, err)
			continue
		}
		if rt != ri {
			t.Errorf("%s: matched %s", tc.Name, rt.Pattern)
		}
		n := 0
		segs := strings.Split(strings.TrimPrefix(tc.Path, apiBase+"/"), "/")
		for _, other := range table.api {
			if _, ok := other.match(segs); ok && other.Method == tc.Method {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%s: %d routes match %s (captures %+v)", tc.Name, n, tc.Path, caps)
		}
	}
}

// TestRouteDeriveIsDerive: a route's Derive, which the guard calls on the
// row its router took, derives what Derive derives from the path alone.
func TestRouteDeriveIsDerive(t *testing.T) {
	ctx := context.Background()
	for _, tc := range allCases() {
		rt, err := Match(tc.Method, tc.Path)
		if err != nil {
			t.Fatalf("%s: %v", tc.Name, err)
		}
		want, werr := Derive(ctx, tc.request(t), &fakeResolver{})
		got, gerr := rt.Derive(ctx, tc.request(t), &fakeResolver{})
		if !reflect.DeepEqual(got, want) || (gerr == nil) != (werr == nil) {
			t.Errorf("%s: route Derive %+v, %v; Derive %+v, %v", tc.Name, got, gerr, want, werr)
		}
	}
	// A path the route does not take, decoded, is no route.
	rt, err := Match("GET", apiBase+"/machines/k1")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{apiBase + "/machines/..", apiBase + "/machines/%2e", apiBase + "/machines/k1/x"} {
		if _, err := rt.Derive(ctx, Request{Method: "GET", Path: p}, &fakeResolver{}); !backend.IsCode(err, backend.ENOTFOUND) {
			t.Errorf("GET %s on %s: %v, want No route", p, rt.Pattern, err)
		}
	}
	if _, err := rt.Derive(ctx, Request{Method: "GET", Path: apiBase + "/machines/%zz"}, &fakeResolver{}); !backend.IsCode(err, backend.EBADREQUEST) {
		t.Errorf("invalid escape: %v, want 400", err)
	}
	// The router matches literal segments as sent: an encoded one is no
	// literal, so neither Match nor a row takes it.
	for _, p := range []string{apiBase + "/m%61chines/k1", apiBase + "/machines/k1/param%73", apiBase + "/machines/k1/params/%61"} {
		wantRoute := p == apiBase+"/machines/k1/params/%61"
		if _, err := Match("GET", p); (err == nil) != wantRoute {
			t.Errorf("Match GET %s: %v", p, err)
		}
	}
	if _, err := rt.Derive(ctx, Request{Method: "GET", Path: apiBase + "/m%61chines/k1"}, &fakeResolver{}); !backend.IsCode(err, backend.ENOTFOUND) {
		t.Errorf("encoded literal: %v, want No route", err)
	}
}

// TestClaimsUseKnownScopesAndActions: a wanted claim in an unknown scope is
// contained by everything in DRP, so no route may derive one.
func TestClaimsUseKnownScopesAndActions(t *testing.T) {
	for _, tc := range allCases() {
		r, err := Derive(context.Background(), tc.request(t), &fakeResolver{})
		if err != nil {
			t.Fatalf("%s: %v", tc.Name, err)
		}
		if len(r.Claims) == 0 && !r.Public {
			t.Errorf("%s: no claims", tc.Name)
		}
		if !kinds.ValidScope(r.Scope) {
			t.Errorf("%s: unknown result scope %q", tc.Name, r.Scope)
		}
		for _, c := range r.Claims {
			if !kinds.ValidScope(c.Scope) || !kinds.ValidAction(c.Scope, c.Action) {
				t.Errorf("%s: invalid claim %s", tc.Name, c)
			}
		}
	}
}

func TestDeriveErrors(t *testing.T) {
	tests := []struct {
		name       string
		tc         testCase
		code       string
		msg        string
		typ, model string
	}{
		{name: "unknown prefix", tc: testCase{Method: "GET", Path: "/api/v3/subnets"}, code: backend.ENOTFOUND, msg: "No route", typ: "GET"},
		{name: "unknown sub-resource", tc: testCase{Method: "GET", Path: "/api/v3/machines/" + m1 + "/frobnicate"}, code: backend.ENOTFOUND, msg: "No route"},
		{name: "wrong method", tc: testCase{Method: "DELETE", Path: "/api/v3/info"}, code: backend.ENOTFOUND, msg: "No route", typ: "DELETE"},
		{name: "outside the api", tc: testCase{Method: "GET", Path: "/api/v2/machines"}, code: backend.ENOTFOUND, msg: "No route"},
		{name: "api root", tc: testCase{Method: "GET", Path: "/api/v3"}, code: backend.ENOTFOUND, msg: "No route"},
		{name: "api root slash", tc: testCase{Method: "GET", Path: "/api/v3/"}, code: backend.ENOTFOUND, msg: "No route"},
		{name: "case differs", tc: testCase{Method: "GET", Path: "/api/v3/MACHINES"}, code: backend.ENOTFOUND, msg: "No route"},
		{name: "params on a kind without params", tc: testCase{Method: "GET", Path: "/api/v3/users/bob/params"}, code: backend.ENOTFOUND, msg: "No route"},
		{name: "pubkey on a kind without secure params", tc: testCase{Method: "GET", Path: "/api/v3/roles/ops/pubkey"}, code: backend.ENOTFOUND, msg: "No route"},
		{name: "dot-dot key", tc: testCase{Method: "GET", Path: "/api/v3/machines/../users"}, code: backend.ENOTFOUND, msg: "No route"},
		{name: "encoded dot-dot key", tc: testCase{Method: "DELETE", Path: "/api/v3/machines/%2e%2E"}, code: backend.ENOTFOUND, msg: "No route"},
		{name: "dot-dot in param name", tc: testCase{Method: "POST", Path: "/api/v3/machines/" + m1 + "/params/a/../b", Body: `1`}, code: backend.ENOTFOUND, msg: "No route"},
		{name: "dot key", tc: testCase{Method: "GET", Path: "/api/v3/params/./x"}, code: backend.ENOTFOUND, msg: "No route"},
		{name: "empty key", tc: testCase{Method: "GET", Path: "/api/v3/machines//params"}, code: backend.ENOTFOUND, msg: "No route"},
		{name: "double trailing slash", tc: testCase{Method: "GET", Path: "/api/v3/machines//"}, code: backend.ENOTFOUND, msg: "No route"},
		{name: "encoded slash is no route separator", tc: testCase{Method: "GET", Path: "/api/v3/machines%2F" + m1}, code: backend.ENOTFOUND, msg: "No route"},
		{name: "bad escape", tc: testCase{Method: "GET", Path: "/api/v3/machines/%zz"}, code: backend.EBADREQUEST, msg: "invalid escape"},
		{name: "index key not found", tc: testCase{Method: "GET", Path: "/api/v3/machines/Name:nope"}, code: backend.ENOTFOUND, msg: "Not Found", model: "machines"},
		{name: "job not found", tc: testCase{Method: "GET", Path: "/api/v3/jobs/nope"}, code: backend.ENOTFOUND, msg: "Not Found", model: "jobs"},
		{name: "patch not JSON", tc: testCase{Method: "PATCH", Path: "/api/v3/machines/" + m1, Body: `[{"op":`}, code: backend.EBADREQUEST, msg: "JSON array", typ: "PATCH", model: "machines"},
		{name: "patch not an array", tc: testCase{Method: "PATCH", Path: "/api/v3/machines/" + m1, Body: `{"op":"add"}`}, code: backend.EBADREQUEST, msg: "JSON array"},
		{name: "patch op not an object", tc: testCase{Method: "PATCH", Path: "/api/v3/machines/" + m1, Body: `[null]`}, code: backend.EBADREQUEST, msg: "not an object"},
		{name: "patch unknown op", tc: testCase{Method: "PATCH", Path: "/api/v3/machines/" + m1, Body: `[{"op":"merge","path":"/a"}]`}, code: backend.EBADREQUEST, msg: "unknown op"},
		{name: "patch missing op", tc: testCase{Method: "PATCH", Path: "/api/v3/machines/" + m1, Body: `[{"path":"/a"}]`}, code: backend.EBADREQUEST, msg: "op"},
		{name: "patch missing path", tc: testCase{Method: "PATCH", Path: "/api/v3/machines/" + m1, Body: `[{"op":"remove"}]`}, code: backend.EBADREQUEST, msg: "missing path"},
		{name: "patch test missing path", tc: testCase{Method: "PATCH", Path: "/api/v3/machines/" + m1, Body: `[{"op":"test","value":1}]`}, code: backend.EBADREQUEST, msg: "missing path"},
		{name: "patch path not a string", tc: testCase{Method: "PATCH", Path: "/api/v3/machines/" + m1, Body: `[{"op":"add","path":5}]`}, code: backend.EBADREQUEST, msg: "malformed path"},
		{name: "patch bad escape in pointer", tc: testCase{Method: "PATCH", Path: "/api/v3/machines/" + m1, Body: `[{"op":"add","path":"/a~2b","value":1}]`}, code: backend.EBADREQUEST, msg: "invalid JSON pointer"},
		{name: "patch trailing tilde", tc: testCase{Method: "PATCH", Path: "/api/v3/machines/" + m1, Body: `[{"op":"add","path":"/a~","value":1}]`}, code: backend.EBADREQUEST, msg: "invalid JSON pointer"},
		{name: "patch relative pointer", tc: testCase{Method: "PATCH", Path: "/api/v3/machines/" + m1, Body: `[{"op":"add","path":"Description","value":1}]`}, code: backend.EBADREQUEST, msg: "invalid JSON pointer"},
		{name: "patch move without from", tc: testCase{Method: "PATCH", Path: "/api/v3/machines/" + m1, Body: `[{"op":"move","path":"/a"}]`}, code: backend.EBADREQUEST, msg: "missing from"},
		{name: "params patch malformed", tc: testCase{Method: "PATCH", Path: "/api/v3/machines/" + m1 + "/params", Body: `nope`}, code: backend.EBADREQUEST, msg: "JSON array"},
		{name: "meta patch malformed", tc: testCase{Method: "PATCH", Path: "/api/v3/meta/users/bob", Body: `[{"op":"copy","path":"/a","from":"x"}]`}, code: backend.EBADREQUEST, msg: "invalid JSON pointer"},
		{name: "job without Machine", tc: testCase{Method: "POST", Path: "/api/v3/jobs", Body: `{"Uuid":""}`}, code: backend.EBADREQUEST, msg: "Create request must have Machine field"},
		{name: "job with empty Machine", tc: testCase{Method: "POST", Path: "/api/v3/jobs", Body: `{"Machine":""}`}, code: backend.EBADREQUEST, msg: "Create request must have Machine field"},
		{name: "job body malformed", tc: testCase{Method: "POST", Path: "/api/v3/jobs", Body: `{"Machine":5}`}, code: backend.EBADREQUEST, msg: "malformed job"},
		{name: "put not an object", tc: testCase{Method: "PUT", Path: "/api/v3/machines/" + m1, Body: `[1]`}, code: backend.EBADREQUEST, msg: "JSON object", typ: "PUT"},
		{name: "put trailing data", tc: testCase{Method: "PUT", Path: "/api/v3/machines/" + m1, Body: `{} {}`}, code: backend.EBADREQUEST, msg: "JSON object"},
		{name: "put unparsable", tc: testCase{Method: "PUT", Path: "/api/v3/machines/" + m1, Body: `{"a":`}, code: backend.EBADREQUEST, msg: "JSON object"},
		{name: "put object not found", tc: testCase{Method: "PUT", Path: "/api/v3/machines/Name:nope", Body: `{}`}, code: backend.ENOTFOUND, msg: "Not Found"},
		{name: "patch over the op limit", tc: testCase{Method: "PATCH", Path: "/api/v3/machines/" + m1, Body: patchOfN(MaxPatchOps + 1)},
			code: backend.ETOOLARGE, msg: "at most 1000 operations; this one holds 1001", typ: "PATCH", model: "machines"},
		{name: "params patch over the op limit", tc: testCase{Method: "PATCH", Path: "/api/v3/machines/" + m1 + "/params", Body: patchOfN(5000)},
			code: backend.ETOOLARGE, msg: "at most 1000 operations"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.tc.Name = tt.name
			_, err := Derive(context.Background(), tt.tc.request(t), &fakeResolver{})
			var be *backend.Error
			if !errors.As(err, &be) {
				t.Fatalf("got %v, want a *backend.Error", err)
			}
			if be.Code != tt.code || !strings.Contains(strings.Join(be.Messages, ";"), tt.msg) {
				t.Errorf("got %s %q, want %s containing %q", be.Code, be.Messages, tt.code, tt.msg)
			}
			if tt.typ != "" && be.Type != tt.typ {
				t.Errorf("got Type %q, want %q", be.Type, tt.typ)
			}
			if tt.model != "" && be.Model != tt.model {
				t.Errorf("got Model %q, want %q", be.Model, tt.model)
			}
			if tt.code == backend.ENOTFOUND && tt.msg == "No route" && be.Key != tt.tc.Path {
				t.Errorf("got Key %q, want the path %q", be.Key, tt.tc.Path)
			}
		})
	}
}

// patchOfN is a patch of n add ops on distinct params.
func patchOfN(n int) string {
	var b strings.Builder
	b.WriteByte('[')
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"op":"add","path":"/Params/p%d","value":%d}`, i, i)
	}
	b.WriteByte(']')
	return b.String()
}

// TestDeriveBodyErrorNamesObject: when only the body is at fault, the
// Result still names the object (as the caller named it), so the gateway
// can answer a hidden object as a missing one before any body error.
func TestDeriveBodyErrorNamesObject(t *testing.T) {
	for _, tc := range []testCase{
		{Method: "PATCH", Path: "/api/v3/machines/Name:m1", Body: `{`},
		{Method: "PATCH", Path: "/api/v3/machines/Name:m1/params", Body: `[{"op":"nope"}]`},
		{Method: "PATCH", Path: "/api/v3/machines/Name:m1", Body: patchOfN(MaxPatchOps + 1)},
		{Method: "PUT", Path: "/api/v3/machines/Name:m1", Body: `[]`},
		{Method: "PATCH", Path: "/api/v3/jobs/" + j1, Body: `"x"`},
	} {
		r, err := Derive(context.Background(), tc.request(t), &fakeResolver{})
		if err == nil {
			t.Fatalf("%s %s %q: no error", tc.Method, tc.Path, tc.Body)
		}
		wantRef, wantKey, wantSpecific := "Name:m1", m1, m1
		if strings.Contains(tc.Path, "/jobs/") {
			wantRef, wantKey, wantSpecific = j1, j1, m1
		}
		if r.Ref != wantRef || r.Key != wantKey || r.Specific != wantSpecific || r.Scope == "" || len(r.Claims) != 0 {
			t.Errorf("%s %s: Result %+v", tc.Method, tc.Path, r)
		}
	}
}

// TestDeriveWritten: the values a request writes, by pointer into the
// object, as sent.
func TestDeriveWritten(t *testing.T) {
	tests := []struct {
		tc   testCase
		want []string // pointer=value
	}{
		{testCase{Method: "PATCH", Path: "/api/v3/machines/" + m1,
			Body: `[{"op":"test","path":"/Name","value":"m1"},{"op":"replace","path":"/Description","value":"d"},{"op":"remove","path":"/Params/a"},
				{"op":"move","from":"/Params/x","path":"/Params/y"},{"op":"add","path":"/Params/a~1b","value":{"k":1}}]`},
			[]string{`/Description="d"`, `/Params/a~1b={"k":1}`}},
		{testCase{Method: "PATCH", Path: "/api/v3/machines/" + m1 + "/params", Body: `[{"op":"add","path":"/pub","value":2}]`},
			[]string{`/Params/pub=2`}},
		{testCase{Method: "PATCH", Path: "/api/v3/meta/roles/ops", Body: `[{"op":"add","path":"/color","value":"red"}]`},
			[]string{`/Meta/color="red"`}},
		{testCase{Method: "POST", Path: "/api/v3/machines/" + m1 + "/params/a/b", Body: `[1]`}, []string{`/Params/a~1b=[1]`}},
		{testCase{Method: "PUT", Path: "/api/v3/machines/" + m1 + "/params/pub", Body: `"v"`}, []string{`/Params/pub="v"`}},
		{testCase{Method: "DELETE", Path: "/api/v3/machines/" + m1 + "/params/pub"}, nil},
		{testCase{Method: "POST", Path: "/api/v3/machines/" + m1 + "/params", Body: `{"a":1}`}, []string{`/Params={"a":1}`}},
		{testCase{Method: "PUT", Path: "/api/v3/pools/p1", Body: `{"Id":"p1","Description":"x","EnterActions":{"Workflow":"wf2"},"description":"y"}`},
			[]string{`/EnterActions/Workflow="wf2"`}},
		{testCase{Method: "DELETE", Path: "/api/v3/machines/" + m1}, nil},
	}
	for _, tt := range tests {
		r, err := Derive(context.Background(), tt.tc.request(t), &fakeResolver{})
		if err != nil {
			t.Fatalf("%s %s: %v", tt.tc.Method, tt.tc.Path, err)
		}
		var got []string
		for _, w := range r.Written {
			got = append(got, w.Pointer+"="+string(w.Value))
		}
		if strings.Join(got, " ") != strings.Join(tt.want, " ") {
			t.Errorf("%s %s: written %q, want %q", tt.tc.Method, tt.tc.Path, got, tt.want)
		}
	}
}

// TestDerivePutManyLeaves: a PUT changing more leaves than a patch may
// hold ops is authorized by its changed top-level fields, which cover them.
func TestDerivePutManyLeaves(t *testing.T) {
	params := map[string]any{}
	for i := 0; i < MaxPatchOps+1; i++ {
		params[fmt.Sprintf("p%d", i)] = i
	}
	body, _ := json.Marshal(map[string]any{"Uuid": m1, "Name": "m1", "Description": "new", "Params": params,
		"Meta": map[string]string{"color": "blue"}, "Profiles": []string{"p1"}, "Runnable": true})
	r, err := Derive(context.Background(), Request{Method: "PUT", Path: "/api/v3/machines/" + m1, Body: body}, &fakeResolver{})
	if err != nil {
		t.Fatal(err)
	}
	got := claimStrings(r.Claims)
	want := []string{"machines update:/Description " + m1, "machines update:/Params " + m1}
	if strings.Join(got, ";") != strings.Join(want, ";") {
		t.Errorf("claims %q, want %q", got, want)
	}
}

// TestDeriveLargePatchIsLinear: deriving a patch of the largest size
// allowed with every pointer distinct stays cheap (deduplication is a map
// lookup, not a scan of the claims so far).
func TestDeriveLargePatchIsLinear(t *testing.T) {
	body := []byte(patchOfN(MaxPatchOps))
	req := Request{Method: "PATCH", Path: "/api/v3/machines/" + m1, Body: body}
	r, err := Derive(context.Background(), req, &fakeResolver{})
	if err != nil || len(r.Claims) != MaxPatchOps {
		t.Fatalf("%d claims, %v", len(r.Claims), err)
	}
	allocs := testing.AllocsPerRun(3, func() { _, _ = Derive(context.Background(), req, &fakeResolver{}) })
	if allocs > 40*MaxPatchOps {
		t.Errorf("%v allocations for %d ops", allocs, MaxPatchOps)
	}
}

func TestFiberPath(t *testing.T) {
	tests := []struct{ pattern, want string }{
		{"/api/v3/machines", "/api/v3/machines"},
		{"/api/v3/machines/{key}/params/{name...}", "/api/v3/machines/:key/params/*"},
		{"/api/v3/params/{key...}", "/api/v3/params/*"},
		{"/api/v3/system/actions/{cmd}", "/api/v3/system/actions/:cmd"},
	}
	for _, tt := range tests {
		if got := (&Route{Pattern: tt.pattern}).FiberPath(); got != tt.want {
			t.Errorf("FiberPath(%s) = %s, want %s", tt.pattern, got, tt.want)
		}
	}
}

func TestPointerHelpers(t *testing.T) {
	for in, want := range map[string]string{"a": "a", "a/b": "a~1b", "a~b": "a~0b", "~/": "~0~1", "": ""} {
		if got := backend.EscapePointer(in); got != want {
			t.Errorf("backend.EscapePointer(%q) = %q, want %q", in, got, want)
		}
	}
	for p, want := range map[string]bool{"": true, "/": true, "/a~0~1": true, "a": false, "/~": false, "/~2": false} {
		if got := backend.ValidPointer(p); got != want {
			t.Errorf("backend.ValidPointer(%q) = %v, want %v", p, got, want)
		}
	}
}

func BenchmarkDerive(b *testing.B) {
	ctx := context.Background()
	res := &fakeResolver{}
	reqs := map[string]Request{
		"get":   {Method: "GET", Path: "/api/v3/machines/" + m1},
		"list":  {Method: "GET", Path: "/api/v3/machines", Query: url.Values{"Name": {"m1"}}},
		"param": {Method: "POST", Path: "/api/v3/machines/" + m1 + "/params/callback/callbacks", Body: []byte(`{}`)},
		"patch": {Method: "PATCH", Path: "/api/v3/machines/" + m1, Body: []byte(`[{"op":"test","path":"/Description","from":"","value":"old"},{"op":"replace","path":"/Description","from":"","value":"new"}]`)},
	}
	for name, r := range reqs {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				res.calls = res.calls[:0]
				if _, err := Derive(ctx, r, res); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
