package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/provgate/provgate/backend"
	"github.com/provgate/provgate/gateway/auth"
	"github.com/provgate/provgate/gateway/claims"
	"github.com/provgate/provgate/policies"
)

// call is one backend call a handler made: which object (scope and key),
// param name and action command it acted on.
type call struct {
	what, scope, key, name, cmd string
}

// recorder records every backend call of one request.
type recorder struct{ calls []call }

func (r *recorder) add(what, scope, key, name, cmd string) {
	r.calls = append(r.calls, call{what, scope, key, name, cmd})
}

// fakeModel is a stored-looking object of scope with key.
func fakeModel(scope, key string) backend.Model {
	k := testKinds.Kind(scope)
	if k == nil {
		k = testKinds.Kind("profiles")
	}
	m := k.New()
	m.SetKey(key)
	m.Fill()
	return m
}

// recObjects is the Objects service of the fuzz server.
type recObjects struct{ *recorder }

func (o recObjects) Create(_ context.Context, prefix string, _ []byte) (backend.Model, error) {
	o.add("Create", prefix, "", "", "")
	return fakeModel(prefix, "new"), nil
}
func (o recObjects) Get(_ context.Context, prefix, key string) (backend.Model, int64, error) {
	o.add("Get", prefix, key, "", "")
	return fakeModel(prefix, key), 1, nil
}
func (o recObjects) View(_ context.Context, prefix, key string) (backend.View, error) {
	o.add("Get", prefix, key, "", "")
	m := fakeModel(prefix, key)
	b, err := json.Marshal(m)
	return backend.View{Model: m, Rev: 1, ETag: backend.ETag(1, b), JSON: b}, err
}
func (o recObjects) CreateMany(_ context.Context, prefix string, items []json.RawMessage) ([]backend.Model, error) {
	o.add("CreateMany", prefix, "", "", "")
	return []backend.Model{fakeModel(prefix, "new")}, nil
}
func (o recObjects) List(_ context.Context, prefix string, _ backend.Query) ([]backend.Model, int, int, error) {
	o.add("List", prefix, "", "", "")
	return nil, 0, 0, nil
}

// ListJSON is List encoded; it records as List, the operation it answers.
func (o recObjects) ListJSON(_ context.Context, prefix string, _ backend.Query) ([]byte, int, int, error) {
	o.add("List", prefix, "", "", "")
	return []byte("[]"), 0, 0, nil
}
func (o recObjects) Patch(_ context.Context, prefix, key string, _ []byte, _ bool) (backend.Model, error) {
	o.add("Patch", prefix, key, "", "")
	return fakeModel(prefix, key), nil
}
func (o recObjects) Put(_ context.Context, prefix, key string, _ []byte) (backend.Model, error) {
	o.add("Put", prefix, key, "", "")
	return fakeModel(prefix, key), nil
}
func (o recObjects) Delete(_ context.Context, prefix, key string) (backend.Model, error) {
	o.add("Delete", prefix, key, "", "")
	return fakeModel(prefix, key), nil
}
func (o recObjects) Wait(_ context.Context, prefix, key, _ string, _ time.Duration) (bool, error) {
	o.add("Wait", prefix, key, "", "")
	return false, nil
}
func (o recObjects) Shape(context.Context, backend.Model, backend.Query) error { return nil }
func (o recObjects) Params(_ context.Context, prefix, key string, _, _ bool) (map[string]json.RawMessage, error) {
	o.add("Params", prefix, key, "", "")
	return map[string]json.RawMessage{}, nil
}
func (o recObjects) GetParam(_ context.Context, prefix, key, name string, _, _ bool) (json.RawMessage, error) {
	o.add("GetParam", prefix, key, name, "")
	return json.RawMessage("null"), nil
}
func (o recObjects) SetParam(_ context.Context, prefix, key, name string, v json.RawMessage) (json.RawMessage, error) {
	o.add("SetParam", prefix, key, name, "")
	return v, nil
}
func (o recObjects) SetParams(_ context.Context, prefix, key string, p json.RawMessage) (map[string]json.RawMessage, error) {
	o.add("SetParams", prefix, key, "", "")
	var out map[string]json.RawMessage
	if err := json.Unmarshal(p, &out); err != nil {
		return nil, err
	}
	return out, nil
}
func (o recObjects) PatchParams(_ context.Context, prefix, key string, _ []byte) (map[string]json.RawMessage, error) {
	o.add("PatchParams", prefix, key, "", "")
	return map[string]json.RawMessage{}, nil
}
func (o recObjects) DeleteParam(_ context.Context, prefix, key, name string) (json.RawMessage, error) {
	o.add("DeleteParam", prefix, key, name, "")
	return json.RawMessage("null"), nil
}

type recPools struct{ *recorder }

func (p recPools) Active(context.Context, []string) ([]string, error) { return []string{}, nil }
func (p recPools) Status(_ context.Context, pool string, _ []string) (map[string][]backend.PoolResult, error) {
	p.add("Status", "pools", pool, "", "")
	return map[string][]backend.PoolResult{}, nil
}
func (p recPools) Op(_ context.Context, verb backend.PoolVerb, pool string, _ []byte, _ backend.PoolOptions) ([]backend.PoolResult, error) {
	p.add("PoolOp", "pools", pool, "", "action:"+string(verb))
	return []backend.PoolResult{}, nil
}
func (p recPools) ReleaseToPool(_ context.Context, key string) ([]backend.PoolResult, error) {
	p.add("ReleaseToPool", "machines", key, "", "")
	return []backend.PoolResult{}, nil
}

type recUsers struct{ *recorder }

func (u recUsers) Token(_ context.Context, name string, _ *auth.Principal, _ auth.TokenRequest) (auth.IssuedToken, error) {
	u.add("Token", "users", name, "", "")
	return auth.IssuedToken{Token: "t"}, nil
}
func (u recUsers) ChangePassword(_ context.Context, name, _ string) (backend.Model, error) {
	u.add("ChangePassword", "users", name, "", "")
	return fakeModel("users", name), nil
}
func (u recUsers) RotateSecret(_ context.Context, name string) error {
	u.add("RotateSecret", "users", name, "", "")
	return nil
}
func (u recUsers) RotateSystemSecret(context.Context) error {
	u.add("RotateSystemSecret", "system", "", "", "rotateSecret")
	return nil
}

type recActions struct{ *recorder }

func (a recActions) Providers() []backend.PluginProvider { return nil }
func (a recActions) List(_ context.Context, prefix, key, _ string) ([]backend.AvailableAction, error) {
	a.add("ListActions", prefix, key, "", "")
	return []backend.AvailableAction{{Command: "doIt"}}, nil
}
func (a recActions) Run(_ context.Context, prefix, key, cmd, _ string, _ map[string]json.RawMessage) (json.RawMessage, error) {
	a.add("RunAction", prefix, key, "", cmd)
	return json.RawMessage(`{}`), nil
}
func (a recActions) Attempts(_ context.Context, plugin, _ string, _ int) ([]backend.CallbackAttempt, error) {
	a.add("Attempts", "plugins", plugin, "", "")
	return []backend.CallbackAttempt{}, nil
}

type recJobs struct{ *recorder }

func (j recJobs) CreateJob(context.Context, []byte) (backend.JobOutcome, *backend.Job, error) {
	return backend.JobNone, nil, nil
}
func (j recJobs) JobToken(context.Context, *backend.Job, *auth.Principal) (string, error) {
	return "", nil
}
func (j recJobs) JobLog(_ context.Context, key string) ([]byte, error) {
	j.add("JobLog", "jobs", key, "", "")
	return nil, nil
}
func (j recJobs) AppendJobLog(_ context.Context, key string, _ []byte) error {
	j.add("AppendJobLog", "jobs", key, "", "")
	return nil
}
func (j recJobs) JobActions(_ context.Context, key, _ string) ([]backend.JobAction, error) {
	j.add("JobActions", "jobs", key, "", "")
	return []backend.JobAction{}, nil
}

// allowAll authenticates everyone as one user and allows every request,
// remembering the input of the request's own decision (the first).
type allowAll struct {
	first *policies.Input
}

func (allowAll) Authenticate(context.Context, string, string) (*auth.Principal, error) {
	return &auth.Principal{Kind: auth.KindUser, Name: "fuzz", Roles: []string{}}, nil
}

func (a *allowAll) Decide(_ context.Context, in policies.Input) (policies.Decision, error) {
	if a.first == nil {
		// The guard's decision comes before any the handler asks for.
		cp := in
		a.first = &cp
	}
	return policies.Decision{Allow: true, Reasons: []string{}}, nil
}

// keyResolver resolves every "Index:value" key to "native-<value>" and
// every job to its machine "machine-<job>".
type keyResolver struct{}

func (keyResolver) NativeKey(_ context.Context, _, key string) (string, error) {
	_, v, _ := strings.Cut(key, ":")
	return "native-" + v, nil
}
func (keyResolver) JobMachine(_ context.Context, key string) (string, error) {
	return "machine-" + key, nil
}
func (keyResolver) Current(_ context.Context, prefix, key string) ([]byte, error) {
	return json.Marshal(fakeModel(prefix, key))
}

// fuzzServer is a gateway whose services record what they are asked.
func fuzzServer() (*Server, *recorder, *allowAll) {
	rec := &recorder{}
	dec := &allowAll{}
	s := New(Options{Logger: slog.New(slog.DiscardHandler), Deps: Deps{Auth: dec, Policy: dec, Resolver: keyResolver{}, Objects: recObjects{rec}, Params: recObjects{rec},
		Pools: recPools{rec}, Users: recUsers{rec}, Actions: recActions{rec}, Jobs: recJobs{rec}, JobTokens: recJobs{rec}, JobActions: recJobs{rec}}})
	return s, rec, dec
}

type fastCtx = fasthttp.RequestCtx

// serve runs one request through the Fiber app.
func serve(s *Server, method, uri string, body []byte) *fasthttp.RequestCtx {
	return serveHeaders(s, method, uri, body)
}

// serveHeaders runs one request with headers (name, value pairs).
func serveHeaders(s *Server, method, uri string, body []byte, hdrs ...string) *fasthttp.RequestCtx {
	var req fasthttp.Request
	req.Header.SetMethod(method)
	req.SetRequestURI(uri)
	req.Header.SetContentType("application/json")
	for i := 0; i+1 < len(hdrs); i += 2 {
		req.Header.Set(hdrs[i], hdrs[i+1])
	}
	if len(body) > 0 {
		req.SetBody(body)
	}
	var ctx fasthttp.RequestCtx
	ctx.Init(&req, nil, nil)
	s.App().Handler()(&ctx)
	return &ctx
}

// checkKeys asserts that every backend call the request caused acted on
// exactly the object, param name and command its claims were derived for.
func checkKeys(t *testing.T, method, uri string, body []byte, rec *recorder, dec *allowAll) {
	t.Helper()
	if len(rec.calls) == 0 {
		return
	}
	if dec.first == nil {
		t.Fatalf("%s %q: backend called (%v) without a decision", method, uri, rec.calls)
	}
	in := dec.first
	_, rawQuery, _ := strings.Cut(uri, "?")
	q, _ := url.ParseQuery(rawQuery)
	res, err := claims.Derive(context.Background(), claims.Request{Method: in.Method, Path: in.Path, Query: q, Body: body}, keyResolver{})
	if err != nil {
		t.Fatalf("%s %q: backend called (%v) for a request Derive refuses: %v", method, uri, rec.calls, err)
	}
	for _, c := range rec.calls {
		switch {
		case c.what == "List" && c.scope == "users" && res.Pattern == "/api/v3/access/escalation":
			// The escalation report reads every user, then answers only
			// about those the caller may see (docs/design.md §9.8).
			continue
		case c.what == "Get" && c.scope == "params" && res.List:
			// A list's filter names checked against param definitions.
			continue
		case c.what == "List" || c.what == "Create" || c.what == "CreateMany":
			if c.scope != res.Scope || res.Key != "" {
				t.Fatalf("%s %q: %s of %s, derived %+v", method, uri, c.what, c.scope, res)
			}
			continue
		case c.what == "RotateSystemSecret":
			if res.Scope != "system" || res.Cmd != "rotateSecret" {
				t.Fatalf("%s %q: system secret rotated, derived %+v", method, uri, res)
			}
			continue
		}
		if c.scope != res.Scope || c.key != res.Key || c.key == "" {
			t.Fatalf("%s %q: %s acted on %s %q, claims were derived for %s %q (%v)", method, uri, c.what, c.scope, c.key,
				res.Scope, res.Key, res.Claims)
		}
		if c.name != res.Name {
			t.Fatalf("%s %q: %s used param %q, claims were derived for %q (%v)", method, uri, c.what, c.name, res.Name, res.Claims)
		}
		if c.cmd != "" && c.cmd != res.Cmd && c.cmd != res.Operation {
			t.Fatalf("%s %q: %s ran %q, claims were derived for %q", method, uri, c.what, c.cmd, res.Operation)
		}
	}
}

// FuzzHandlerKeys sends arbitrary requests through the gateway's Fiber app
// with recording services and checks that each handler used exactly the
// key, param name and command that claims.Derive authorized: the path is
// turned into them once, and handlers never parse it again.
func FuzzHandlerKeys(f *testing.F) {
	b, err := os.ReadFile(filepath.Join("..", "testdata", "claims", "derive.golden.json"))
	if err != nil {
		f.Fatal(err)
	}
	var golden []struct {
		Method, Path, Query, Body string
	}
	if err := json.Unmarshal(b, &golden); err != nil {
		f.Fatal(err)
	}
	for _, g := range golden {
		uri := g.Path
		if g.Query != "" {
			uri += "?" + g.Query
		}
		f.Add(g.Method, uri, []byte(g.Body))
	}
	for _, s := range [][3]string{
		{"GET", "/api/v3/params/sec/pw%2F", ""},
		{"DELETE", "/api/v3/params/sec/pw%2F", ""},
		{"PATCH", "/api/v3/meta/params/sec/pw%2F", `[{"op":"add","path":"/a","value":1}]`},
		{"POST", "/api/v3/machines/Name:m1/params/pub%2F", `1`},
		{"DELETE", "/api/v3/machines/m1/params/a%2F%2Fb", ""},
		{"GET", "/api/v3/%70arams/a", ""},
		{"GET", "/api/v3/params/a/", ""},
		{"GET", "//api/v3/params/a%2f", ""},
		{"POST", "/api/v3/machines/m1/actions/do%2Fit", `{}`},
		{"POST", "/api/v3/pools/Id:p1/%61llocateMachines", `{}`},
		{"POST", "/api/v3/system/actions/rotate%53ecret", `{}`},
		{"GET", "/api/v3/users/Name:bob%2F/token", ""},
		{"PUT", "/api/v3/jobs/j1/log", "x"},
		{"GET", "/api/v3/plugins/p%2F1/attempts", ""},
	} {
		f.Add(s[0], s[1], []byte(s[2]))
	}
	s, rec, dec := fuzzServer()
	f.Fuzz(func(t *testing.T, method, uri string, body []byte) {
		if !strings.HasPrefix(uri, "/") || strings.ContainsAny(uri, " \r\n#") || len(method) == 0 || len(method) > 10 {
			return
		}
		rec.calls, dec.first = nil, nil
		ctx := serve(s, method, uri, body)
		if ctx.Response.StatusCode() >= 500 && ctx.Response.StatusCode() != 503 && ctx.Response.StatusCode() != 501 {
			t.Fatalf("%s %q: %d %s", method, uri, ctx.Response.StatusCode(), ctx.Response.Body())
		}
		checkKeys(t, method, uri, body, rec, dec)
	})
}

// TestHandlerKeysTrailingSlashParam is the finding behind FuzzHandlerKeys:
// "sec/pw%2F" is the param "sec/pw/" to the claims, and so to the handler.
func TestHandlerKeysTrailingSlashParam(t *testing.T) {
	s, rec, dec := fuzzServer()
	for _, tc := range []struct{ method, uri, body, what, key, name string }{
		{"GET", "/api/v3/params/sec/pw%2F", "", "Get", "sec/pw/", ""},
		{"PATCH", "/api/v3/params/sec/pw%2F", "[]", "Patch", "sec/pw/", ""},
		{"DELETE", "/api/v3/params/sec/pw%2F", "", "Delete", "sec/pw/", ""},
		{"PATCH", "/api/v3/meta/params/sec/pw%2F", `[{"op":"add","path":"/a","value":1}]`, "Patch", "sec/pw/", ""},
		{"POST", "/api/v3/machines/Name:m1/params/pub%2F", `1`, "SetParam", "native-m1", "pub/"},
		{"DELETE", "/api/v3/machines/m1/params/pub%2F", ``, "DeleteParam", "m1", "pub/"},
	} {
		rec.calls, dec.first = nil, nil
		ctx := serve(s, tc.method, tc.uri, []byte(tc.body))
		if ctx.Response.StatusCode() != 200 {
			t.Fatalf("%s %s: %d %s", tc.method, tc.uri, ctx.Response.StatusCode(), ctx.Response.Body())
		}
		got := fmt.Sprint(rec.calls)
		want := fmt.Sprint([]call{{tc.what, rec.calls[0].scope, tc.key, tc.name, ""}})
		if got != want {
			t.Errorf("%s %s: backend calls %s, want %s", tc.method, tc.uri, got, want)
		}
		checkKeys(t, tc.method, tc.uri, []byte(tc.body), rec, dec)
	}
	// A path Fiber would route to another handler than the claims' route
	// is served by no handler at all.
	rec.calls = nil
	if ctx := serve(s, "GET", "/api/v3/%70arams/a", nil); ctx.Response.StatusCode() != 404 || len(rec.calls) != 0 {
		t.Errorf("GET /api/v3/%%70arams/a: %d, calls %v", ctx.Response.StatusCode(), rec.calls)
	}
}
