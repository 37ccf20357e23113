package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/provgate/provgate/backend"
	"github.com/provgate/provgate/gateway/auth"
)

// memObjects is an in-memory object service: what the handlers see of the
// backend, without a database. fail, when set, is what every write returns.
type memObjects struct {
	objs map[string]backend.Model // by "prefix/key"
	revs map[string]int64
	fail error
}

func newMemObjects() *memObjects {
	return &memObjects{objs: map[string]backend.Model{}, revs: map[string]int64{}}
}

func (o *memObjects) decode(prefix string, body []byte) (backend.Model, error) {
	m := testKinds.Kind(prefix).New()
	if err := json.Unmarshal(body, m); err != nil {
		return nil, backend.OpError(backend.EBADREQUEST, backend.ActionOp, prefix, "", err.Error())
	}
	m.Fill()
	return m, nil
}

func (o *memObjects) Create(_ context.Context, prefix string, body []byte) (backend.Model, error) {
	if o.fail != nil {
		return nil, o.fail
	}
	m, err := o.decode(prefix, body)
	if err != nil {
		return nil, err
	}
	id := prefix + "/" + m.Key()
	if _, ok := o.objs[id]; ok {
		return nil, backend.OpError(backend.ECONFLICT, backend.CreateOp, prefix, m.Key(), "already exists")
	}
	o.objs[id], o.revs[id] = m, 1
	return m, nil
}

func (o *memObjects) Get(_ context.Context, prefix, key string) (backend.Model, int64, error) {
	m, ok := o.objs[prefix+"/"+key]
	if !ok {
		return nil, 0, backend.NotFound(backend.ReadOp, prefix, key)
	}
	return m, o.revs[prefix+"/"+key], nil
}

func (o *memObjects) View(ctx context.Context, prefix, key string) (backend.View, error) {
	m, rev, err := o.Get(ctx, prefix, key)
	if err != nil {
		return backend.View{}, err
	}
	b, err := json.Marshal(m)
	if err != nil {
		return backend.View{}, err
	}
	return backend.View{Model: m, Rev: rev, ETag: backend.ETag(rev, b), JSON: b}, nil
}

func (o *memObjects) CreateMany(ctx context.Context, prefix string, items []json.RawMessage) ([]backend.Model, error) {
	out := []backend.Model{}
	for _, item := range items {
		m, err := o.Create(ctx, prefix, item)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

func (o *memObjects) List(_ context.Context, prefix string, _ backend.Query) ([]backend.Model, int, int, error) {
	var keys []string
	for id := range o.objs {
		if p, _, _ := strings.Cut(id, "/"); p == prefix {
			keys = append(keys, id)
		}
	}
	sort.Strings(keys)
	out := []backend.Model{}
	for _, id := range keys {
		out = append(out, o.objs[id])
	}
	return out, len(out), len(out), nil
}

func (o *memObjects) ListJSON(ctx context.Context, prefix string, q backend.Query) ([]byte, int, int, error) {
	l, total, matched, err := o.List(ctx, prefix, q)
	if err != nil {
		return nil, 0, 0, err
	}
	b, err := json.Marshal(l)
	return b, total, matched, err
}

func (o *memObjects) Patch(_ context.Context, prefix, key string, _ []byte, _ bool) (backend.Model, error) {
	if o.fail != nil {
		return nil, o.fail
	}
	m, ok := o.objs[prefix+"/"+key]
	if !ok {
		return nil, backend.NotFound(backend.PatchOp, prefix, key)
	}
	return m, nil
}

func (o *memObjects) Put(_ context.Context, prefix, key string, body []byte) (backend.Model, error) {
	if o.fail != nil {
		return nil, o.fail
	}
	if _, ok := o.objs[prefix+"/"+key]; !ok {
		return nil, backend.NotFound(backend.ReplaceOp, prefix, key)
	}
	m, err := o.decode(prefix, body)
	if err != nil {
		return nil, err
	}
	o.objs[prefix+"/"+key] = m
	o.revs[prefix+"/"+key]++
	return m, nil
}

func (o *memObjects) Delete(_ context.Context, prefix, key string) (backend.Model, error) {
	if o.fail != nil {
		return nil, o.fail
	}
	m, ok := o.objs[prefix+"/"+key]
	if !ok {
		return nil, backend.NotFound(backend.DeleteOp, prefix, key)
	}
	delete(o.objs, prefix+"/"+key)
	return m, nil
}

func (o *memObjects) Wait(context.Context, string, string, string, time.Duration) (bool, error) {
	return false, nil
}

func (o *memObjects) Shape(context.Context, backend.Model, backend.Query) error { return nil }

// memParams keeps the params of objects in memory, as JSON values.
type memParams struct {
	params map[string]map[string]json.RawMessage // by "prefix/key"
	set    []string                              // "prefix/key/name=value" of every SetParam
}

func (p *memParams) of(prefix, key string) (map[string]json.RawMessage, error) {
	ps, ok := p.params[prefix+"/"+key]
	if !ok {
		return nil, backend.NotFound(backend.ReadOp, prefix, key)
	}
	return ps, nil
}

func (p *memParams) Params(_ context.Context, prefix, key string, _, _ bool) (map[string]json.RawMessage, error) {
	return p.of(prefix, key)
}

func (p *memParams) GetParam(_ context.Context, prefix, key, name string, _, _ bool) (json.RawMessage, error) {
	ps, err := p.of(prefix, key)
	if err != nil {
		return nil, err
	}
	if v, ok := ps[name]; ok {
		return v, nil
	}
	return json.RawMessage("null"), nil
}

func (p *memParams) SetParam(_ context.Context, prefix, key, name string, value json.RawMessage) (json.RawMessage, error) {
	ps, err := p.of(prefix, key)
	if err != nil {
		return nil, err
	}
	p.set = append(p.set, prefix+"/"+key+"/"+name+"="+string(value))
	ps[name] = value
	return value, nil
}

func (p *memParams) SetParams(_ context.Context, prefix, key string, params json.RawMessage) (map[string]json.RawMessage, error) {
	if _, err := p.of(prefix, key); err != nil {
		return nil, err
	}
	next := map[string]json.RawMessage{}
	if err := json.Unmarshal(params, &next); err != nil {
		return nil, backend.OpError(backend.EBADREQUEST, backend.ActionOp, prefix, key, err.Error())
	}
	p.params[prefix+"/"+key] = next
	return next, nil
}

func (p *memParams) PatchParams(_ context.Context, prefix, key string, _ []byte) (map[string]json.RawMessage, error) {
	return p.of(prefix, key)
}

func (p *memParams) DeleteParam(_ context.Context, prefix, key, name string) (json.RawMessage, error) {
	ps, err := p.of(prefix, key)
	if err != nil {
		return nil, err
	}
	v, ok := ps[name]
	if !ok {
		return nil, backend.NotFound(backend.DeleteOp, "params", name)
	}
	delete(ps, name)
	return v, nil
}

// handlerServer is a gateway that lets every caller do everything, over the
// given services.
func handlerServer(d Deps) *Server {
	dec := &allowAll{}
	d.Auth, d.Policy, d.Resolver = dec, dec, keyResolver{}
	return New(Options{Logger: slog.New(slog.DiscardHandler), Deps: d})
}

// do sends one request through the Fiber app and returns the response and
// its body.
func do(t *testing.T, s *Server, method, uri, body string, hdrs ...string) (*http.Response, []byte) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, uri, r)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdrs); i += 2 {
		req.Header.Set(hdrs[i], hdrs[i+1])
	}
	res, err := s.App().Test(req, -1)
	if err != nil {
		t.Fatalf("%s %s: %v", method, uri, err)
	}
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res, b
}

// wantDRPError checks a response is the DRP error object with status,
// Type, Model and Key, and a message containing msg.
func wantDRPError(t *testing.T, res *http.Response, body []byte, status int, typ, model, key, msg string) {
	t.Helper()
	e := errorOf(t, body)
	if res.StatusCode != status || e.Code != status || e.Type != typ || e.Model != model || e.Key != key {
		t.Fatalf("got %d %s, want %d Type %s Model %s Key %s", res.StatusCode, body, status, typ, model, key)
	}
	if !strings.Contains(strings.Join(e.Messages, "\n"), msg) {
		t.Fatalf("messages %q, want one containing %q", e.Messages, msg)
	}
}

// TestObjectHandlers: the CRUD routes answer with the object service's
// results, statuses and list headers, and its errors as DRP error objects.
func TestObjectHandlers(t *testing.T) {
	objs := newMemObjects()
	s := handlerServer(Deps{Objects: objs})

	res, body := do(t, s, "POST", "/api/v3/profiles", `{"Name":"p1","Description":"one"}`)
	var p backend.Profile
	if res.StatusCode != 201 || json.Unmarshal(body, &p) != nil || p.Name != "p1" || p.Description != "one" {
		t.Fatalf("create: %d %s", res.StatusCode, body)
	}
	res, body = do(t, s, "POST", "/api/v3/profiles", `{"Name":"p1"}`)
	wantDRPError(t, res, body, 409, "CREATE", "profiles", "p1", "already exists")

	res, body = do(t, s, "GET", "/api/v3/profiles/p1", "")
	etag := backend.ModelETag(objs.objs["profiles/p1"], 1)
	if res.StatusCode != 200 || res.Header.Get("ETag") != etag || !strings.Contains(string(body), `"Name":"p1"`) {
		t.Fatalf("get: %d %q %s", res.StatusCode, res.Header.Get("ETag"), body)
	}
	res, body = do(t, s, "GET", "/api/v3/profiles/p1", "", "If-None-Match", etag)
	if res.StatusCode != 304 || len(body) != 0 {
		t.Fatalf("get unchanged: %d %s", res.StatusCode, body)
	}
	res, body = do(t, s, "GET", "/api/v3/profiles/nope", "")
	wantDRPError(t, res, body, 404, "GET", "profiles", "nope", "Not Found")

	do(t, s, "POST", "/api/v3/profiles", `{"Name":"p2"}`)
	res, body = do(t, s, "GET", "/api/v3/profiles", "")
	var list []backend.Profile
	if res.StatusCode != 200 || json.Unmarshal(body, &list) != nil || len(list) != 2 || list[0].Name != "p1" || list[1].Name != "p2" {
		t.Fatalf("list: %d %s", res.StatusCode, body)
	}
	if res.Header.Get("X-DRP-LIST-TOTAL-COUNT") != "2" || res.Header.Get("X-DRP-LIST-COUNT") != "2" {
		t.Fatalf("list headers %v", res.Header)
	}
	res, body = do(t, s, "HEAD", "/api/v3/profiles", "")
	if res.StatusCode != 200 || len(body) != 0 || res.Header.Get("X-DRP-LIST-TOTAL-COUNT") != "2" {
		t.Fatalf("head list: %d %s %v", res.StatusCode, body, res.Header)
	}

	res, body = do(t, s, "PUT", "/api/v3/profiles/p2", `{"Name":"p2","Description":"two"}`)
	if res.StatusCode != 200 || !strings.Contains(string(body), `"Description":"two"`) {
		t.Fatalf("put: %d %s", res.StatusCode, body)
	}
	res, body = do(t, s, "DELETE", "/api/v3/profiles/p2", "")
	if res.StatusCode != 200 || !strings.Contains(string(body), `"Name":"p2"`) {
		t.Fatalf("delete: %d %s", res.StatusCode, body)
	}
	res, body = do(t, s, "DELETE", "/api/v3/profiles/p2", "")
	wantDRPError(t, res, body, 404, "DELETE", "profiles", "p2", "Not Found")
}

// TestErrorMapping: the gateway alone turns a backend error's kind into
// the HTTP status and its operation into DRP's error Type; a domain Type
// wins, no operation means the request's method, and server errors keep
// their cause out of the reply.
func TestErrorMapping(t *testing.T) {
	tests := []struct {
		name   string
		err    error
		status int
		typ    string
		msg    string
	}{
		{"patch conflict", backend.OpError(backend.ECONFLICT, backend.PatchOp, "profiles", "p1", "Test op failed"), 409, "PATCH", "Test op failed"},
		{"read in a patch", backend.NotFound(backend.ReadOp, "profiles", "p1"), 404, "GET", "Not Found"},
		{"create", backend.OpError(backend.EBADREQUEST, backend.CreateOp, "profiles", "p1", "Empty key not allowed"), 400, "CREATE", "Empty key"},
		{"replace", backend.OpError(backend.EBADREQUEST, backend.ReplaceOp, "profiles", "p1", "readonly: p1"), 400, "PUT", "readonly"},
		{"delete", backend.OpError(backend.ECONFLICT, backend.DeleteOp, "profiles", "p1", "Locked"), 409, "DELETE", "Locked"},
		{"action", backend.OpError(backend.EBADREQUEST, backend.ActionOp, "profiles", "p1", "bad body"), 400, "POST", "bad body"},
		{"request's own", backend.NotFound(backend.RequestOp, "profiles", "p1"), 404, "PATCH", "Not Found"},
		{"domain type", backend.NewError(backend.EINVALID, "ValidationError", "profiles", "p1", "Params.x: bad"), 422, "ValidationError", "Params.x"},
		{"commit unavailable", backend.OpError(backend.EUNAVAILABLE, backend.CommitOp, "", "", "database unavailable"), 503, "TX", "database unavailable"},
		{"internal", &backend.Error{Code: backend.EINTERNAL, Op: backend.ReadOp, Model: "profiles", Key: "p1",
			Messages: []string{"disk on fire"}}, 500, "GET", "internal error (request"},
		{"not a domain error", errors.New("disk on fire"), 500, "PATCH", "internal error (request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := newMemObjects()
			objs.objs["profiles/p1"], objs.revs["profiles/p1"] = fakeModel("profiles", "p1"), 1
			objs.fail = tt.err
			s := handlerServer(Deps{Objects: objs})
			res, body := do(t, s, "PATCH", "/api/v3/profiles/p1", `[]`)
			e := errorOf(t, body)
			if res.StatusCode != tt.status || e.Code != tt.status || e.Type != tt.typ {
				t.Fatalf("got %d %s, want %d Type %s", res.StatusCode, body, tt.status, tt.typ)
			}
			if !strings.Contains(strings.Join(e.Messages, "\n"), tt.msg) || strings.Contains(string(body), "disk on fire") {
				t.Fatalf("messages %q, want %q and no cause", e.Messages, tt.msg)
			}
		})
	}
}

// TestParamsHandlers: the params sub-resources call the params service
// with the value sent and answer with what it returns.
func TestParamsHandlers(t *testing.T) {
	objs := newMemObjects()
	params := &memParams{params: map[string]map[string]json.RawMessage{"profiles/p1": {"a": json.RawMessage("1")}}}
	s := handlerServer(Deps{Objects: objs, Params: params})

	res, body := do(t, s, "GET", "/api/v3/profiles/p1/params", "")
	if res.StatusCode != 200 || string(body) != `{"a":1}` {
		t.Fatalf("params: %d %s", res.StatusCode, body)
	}
	res, body = do(t, s, "POST", "/api/v3/profiles/p1/params/b", `{"x":[1,"two"]}`)
	if res.StatusCode != 200 || string(body) != `{"x":[1,"two"]}` {
		t.Fatalf("set param: %d %s", res.StatusCode, body)
	}
	if len(params.set) != 1 || params.set[0] != `profiles/p1/b={"x":[1,"two"]}` {
		t.Fatalf("set calls %q", params.set)
	}
	res, body = do(t, s, "GET", "/api/v3/profiles/p1/params/b", "")
	if res.StatusCode != 200 || string(body) != `{"x":[1,"two"]}` {
		t.Fatalf("get param: %d %s", res.StatusCode, body)
	}
	res, body = do(t, s, "GET", "/api/v3/profiles/p1/params/none", "")
	if res.StatusCode != 200 || string(body) != `null` {
		t.Fatalf("absent param: %d %s", res.StatusCode, body)
	}
	res, body = do(t, s, "POST", "/api/v3/profiles/p1/params/b", `{"x":`)
	wantDRPError(t, res, body, 400, "POST", "", "", "invalid JSON body")

	res, body = do(t, s, "DELETE", "/api/v3/profiles/p1/params/a", "")
	if res.StatusCode != 200 || string(body) != `1` {
		t.Fatalf("delete param: %d %s", res.StatusCode, body)
	}
	res, body = do(t, s, "DELETE", "/api/v3/profiles/p1/params/a", "")
	wantDRPError(t, res, body, 404, "DELETE", "params", "a", "Not Found")

	res, body = do(t, s, "POST", "/api/v3/profiles/p1/params", `{"c":true}`)
	if res.StatusCode != 200 || string(body) != `{"c":true}` {
		t.Fatalf("set params: %d %s", res.StatusCode, body)
	}
	res, body = do(t, s, "GET", "/api/v3/profiles/ghost/params", "")
	wantDRPError(t, res, body, 404, "GET", "profiles", "ghost", "Not Found")

	// A server without the params service has no params routes (its
	// rows are left out at construction), and keeps the others.
	s = handlerServer(Deps{Objects: objs})
	res, body = do(t, s, "GET", "/api/v3/profiles/p1/params", "")
	wantDRPError(t, res, body, 404, "GET", "", "/api/v3/profiles/p1/params", "No route")
	if res, body = do(t, s, "GET", "/api/v3/profiles", ""); res.StatusCode != 200 {
		t.Fatalf("list profiles without params service: %d %s", res.StatusCode, body)
	}
}

// fakeJobs answers every job request with outcome and job, and mints
// token for every new job.
type fakeJobs struct {
	outcome backend.JobOutcome
	job     *backend.Job
	err     error
	token   string
}

func (j *fakeJobs) CreateJob(context.Context, []byte) (backend.JobOutcome, *backend.Job, error) {
	return j.outcome, j.job, j.err
}
func (j *fakeJobs) JobLog(context.Context, string) ([]byte, error) { return []byte("log"), nil }
func (j *fakeJobs) AppendJobLog(context.Context, string, []byte) error {
	return nil
}
func (j *fakeJobs) JobToken(context.Context, *backend.Job, *auth.Principal) (string, error) {
	return j.token, nil
}

// TestCreateJobOutcomes: the gateway answers a job request's outcome with
// DRP's status: 201 and the new job with its token, 202 and the job handed
// back, 204 and no body for nothing to run.
func TestCreateJobOutcomes(t *testing.T) {
	const machine = "3e7031fe-3062-45f1-835c-92541bc9cbd3"
	job := func() *backend.Job {
		return &backend.Job{Uuid: "0c3f6ef5-6b1a-4c47-9b0c-f5a37a5ddc0b", Machine: machine, State: backend.JobCreated, Task: "t1"}
	}
	tests := []struct {
		name   string
		jobs   *fakeJobs
		status int
		check  func(t *testing.T, body []byte)
	}{
		{"new", &fakeJobs{outcome: backend.JobNew, job: job(), token: "tok"}, 201, func(t *testing.T, body []byte) {
			var j backend.Job
			if json.Unmarshal(body, &j) != nil || j.Task != "t1" || j.Token != "tok" {
				t.Fatalf("body %s", body)
			}
		}},
		{"again", &fakeJobs{outcome: backend.JobAgain, job: job()}, 202, func(t *testing.T, body []byte) {
			var j backend.Job
			if json.Unmarshal(body, &j) != nil || j.Uuid != job().Uuid || j.Token != "" {
				t.Fatalf("body %s", body)
			}
		}},
		{"nothing to run", &fakeJobs{outcome: backend.JobNone}, 204, func(t *testing.T, body []byte) {
			if len(body) != 0 {
				t.Fatalf("body %s", body)
			}
		}},
		{"conflict", &fakeJobs{err: backend.NewError(backend.ECONFLICT, "Conflict", "jobs", "", "Machine is not runnable")}, 409,
			func(t *testing.T, body []byte) {
				if e := errorOf(t, body); e.Type != "Conflict" || e.Model != "jobs" {
					t.Fatalf("body %s", body)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := handlerServer(Deps{Jobs: tt.jobs, JobTokens: tt.jobs})
			res, body := do(t, s, "POST", "/api/v3/jobs", `{"Machine":"`+machine+`"}`)
			if res.StatusCode != tt.status {
				t.Fatalf("status %d %s, want %d", res.StatusCode, body, tt.status)
			}
			tt.check(t, body)
		})
	}
}

// fakeUsers records what the user handlers ask for.
type fakeUsers struct {
	tokenFor string
	req      auth.TokenRequest
	password string
}

func (u *fakeUsers) Token(_ context.Context, name string, _ *auth.Principal, req auth.TokenRequest) (auth.IssuedToken, error) {
	u.tokenFor, u.req = name, req
	return auth.IssuedToken{Token: "tok-" + name}, nil
}
func (u *fakeUsers) ChangePassword(_ context.Context, name, password string) (backend.Model, error) {
	u.password = password
	usr := &backend.User{Name: name, Secret: "never-shown", PasswordHash: []byte("never-shown")}
	usr.Fill()
	return usr, nil
}
func (u *fakeUsers) RotateSecret(context.Context, string) error { return nil }
func (u *fakeUsers) RotateSystemSecret(context.Context) error   { return nil }

// TestUserHandlers: the token request reaches the user service as the
// query gave it; a password change needs a password and answers with the
// user without its secrets.
func TestUserHandlers(t *testing.T) {
	users := &fakeUsers{}
	s := handlerServer(Deps{Users: users})

	res, body := do(t, s, "GET", "/api/v3/users/bob/token?ttl=10m&roles=a,+b,&scope=machines&action=get", "")
	var tok struct{ Token string }
	if res.StatusCode != 200 || json.Unmarshal(body, &tok) != nil || tok.Token != "tok-bob" {
		t.Fatalf("token: %d %s", res.StatusCode, body)
	}
	if users.tokenFor != "bob" || users.req.TTL != "10m" || strings.Join(users.req.Roles, "|") != "a|b" ||
		users.req.Scope != "machines" || users.req.Action != "get" {
		t.Fatalf("token request %q %+v", users.tokenFor, users.req)
	}

	res, body = do(t, s, "PUT", "/api/v3/users/bob/password", `{"Password":""}`)
	wantDRPError(t, res, body, 400, "PUT", "users", "bob", "Password is required")
	res, body = do(t, s, "PUT", "/api/v3/users/bob/password", `{"Password":"n3w"}`)
	if res.StatusCode != 200 || users.password != "n3w" || !strings.Contains(string(body), `"Name":"bob"`) ||
		strings.Contains(string(body), "never-shown") {
		t.Fatalf("password: %d %s (set %q)", res.StatusCode, body, users.password)
	}
}

// fakePools records the pool operation it is asked for.
type fakePools struct {
	verb backend.PoolVerb
	pool string
	body string
	opts backend.PoolOptions
}

func (p *fakePools) Active(context.Context, []string) ([]string, error) { return []string{"p1"}, nil }
func (p *fakePools) Status(context.Context, string, []string) (map[string][]backend.PoolResult, error) {
	return map[string][]backend.PoolResult{}, nil
}
func (p *fakePools) Op(_ context.Context, verb backend.PoolVerb, pool string, body []byte, opts backend.PoolOptions) ([]backend.PoolResult, error) {
	if pool == "missing" {
		return nil, backend.NotFound(backend.ActionOp, "pools", pool)
	}
	p.verb, p.pool, p.body, p.opts = verb, pool, string(body), opts
	return []backend.PoolResult{{Uuid: "m1", Name: "one", Allocated: true}}, nil
}
func (p *fakePools) ReleaseToPool(context.Context, string) ([]backend.PoolResult, error) {
	return []backend.PoolResult{}, nil
}

// TestPoolOpHandler: a pool operation reaches the pool service with the
// verb the request was authorized for, the body and the query options;
// its results and errors come back as they are.
func TestPoolOpHandler(t *testing.T) {
	pools := &fakePools{}
	s := handlerServer(Deps{Pools: pools})
	res, body := do(t, s, "POST", "/api/v3/pools/p1/allocateMachines?source-pool=default&force=true", `{"Count":1}`)
	if res.StatusCode != 200 || !strings.Contains(string(body), `"Uuid":"m1"`) {
		t.Fatalf("op: %d %s", res.StatusCode, body)
	}
	if pools.verb != backend.PoolAllocate || pools.pool != "p1" || pools.body != `{"Count":1}` ||
		pools.opts.SourcePool != "default" || !pools.opts.Force || pools.opts.Visible != nil {
		t.Fatalf("op %+v", pools)
	}
	res, body = do(t, s, "POST", "/api/v3/pools/missing/addMachines", `{}`)
	wantDRPError(t, res, body, 404, "POST", "pools", "missing", "Not Found")
}

// fakeActions runs every action by echoing its parameters.
type fakeActions struct{ params map[string]json.RawMessage }

func (a *fakeActions) Providers() []backend.PluginProvider { return nil }
func (a *fakeActions) List(context.Context, string, string, string) ([]backend.AvailableAction, error) {
	return []backend.AvailableAction{{Command: "doIt"}}, nil
}
func (a *fakeActions) Run(_ context.Context, _, _, _, _ string, params map[string]json.RawMessage) (json.RawMessage, error) {
	a.params = params
	return json.Marshal(params)
}
func (a *fakeActions) Attempts(context.Context, string, string, int) ([]backend.CallbackAttempt, error) {
	return []backend.CallbackAttempt{}, nil
}

// TestRunActionHandler: action parameters reach the plugin as JSON values;
// a body that is not an object is DRP's 400 INVOKE.
func TestRunActionHandler(t *testing.T) {
	acts := &fakeActions{}
	s := handlerServer(Deps{Actions: acts})
	res, body := do(t, s, "POST", "/api/v3/machines/Name:m1/actions/doIt", `{"callback/action":"x","n":[1,2]}`)
	if res.StatusCode != 200 || string(body) != `{"callback/action":"x","n":[1,2]}` {
		t.Fatalf("run: %d %s", res.StatusCode, body)
	}
	if string(acts.params["n"]) != `[1,2]` {
		t.Fatalf("params %s", acts.params)
	}
	res, body = do(t, s, "POST", "/api/v3/machines/Name:m1/actions/doIt", `[1]`)
	wantDRPError(t, res, body, 400, "INVOKE", "machines", "native-m1", "action parameters must be a JSON object")
}

// testKinds is the catalog the tests read kinds from.
var testKinds = backend.NewCatalog()
