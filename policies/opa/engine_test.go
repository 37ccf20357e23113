package opa

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/provgate/provgate/backend"
	"github.com/provgate/provgate/policies"
)

func claim(scope, action, specific string) backend.Claim {
	return backend.Claim{Scope: scope, Action: action, Specific: specific}
}

func testData() policies.Data {
	return policies.NewData(
		[]backend.Role{
			{Name: "superuser", Claims: []backend.Claim{claim("*", "*", "*")}},
			{Name: "operator", Claims: []backend.Claim{claim("machines", "get,list,action:callbackDo", "*"), claim("pools", "*", "p1,p2")}},
			{Name: "reader", Claims: []backend.Claim{claim("machines", "get,list", "*")}},
			{Name: "m1reader", Claims: []backend.Claim{claim("machines", "get,list", "m1")}},
			{Name: "rbac", Claims: []backend.Claim{claim("roles,tenants", "*", "*")}},
			{Name: "rolereader", Claims: []backend.Claim{claim("roles", "get,list", "*")}},
		},
		[]backend.Tenant{{Name: "t1", Members: map[string][]string{"machines": {"m1", "m2"}}, Users: []string{"tina"}}},
		policies.LicenseData{Valid: true, Features: []string{"rbac"}},
	)
}

// testCompiled shares the compiled embedded policy between the engines of
// the package's tests, as a test process's servers share it (Compiled);
// engines on a policy directory or bundle compile their own.
var testCompiled = NewCompiled()

func newTestEngine(t testing.TB, opts Options) *Engine {
	t.Helper()
	if opts.Compiled == nil && opts.PolicyDir == "" && opts.Bundle.Location == "" {
		opts.Compiled = testCompiled
	}
	e, err := New(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	if err := e.SetData(context.Background(), testData()); err != nil {
		t.Fatal(err)
	}
	return e
}

func user(name string, roles ...string) policies.Principal {
	return policies.Principal{Kind: "user", Name: name, Roles: roles, Claims: []backend.Claim{}}
}

func request(p policies.Principal, required ...backend.Claim) policies.Input {
	return policies.Input{Principal: p, Required: required, Method: "GET", Path: "/api/v3/x"}
}

func TestDecide(t *testing.T) {
	e := newTestEngine(t, Options{})
	withObject := func(in policies.Input, scope, key string) policies.Input {
		in.Object = &policies.Object{Scope: scope, Key: key}
		return in
	}
	withList := func(in policies.Input, scope string) policies.Input {
		in.List = &policies.ListRequest{Scope: scope}
		return in
	}
	withOp := func(in policies.Input, op string) policies.Input { in.Operation = op; return in }
	restricted := user("rob", "superuser")
	restricted.Restrict = []backend.Claim{claim("machines", "get", "*")}
	ops := policies.Principal{Kind: "machine", Name: "uuid-1", MachineToken: "operations"}

	tests := []struct {
		name string
		in   policies.Input
		want policies.Decision
	}{
		{"superuser allowed", request(user("root", "superuser"), claim("machines", "get", "m1")),
			policies.Decision{Allow: true, Reasons: []string{}}},
		{"missing claim denied with reason", request(user("olga", "operator"), claim("pools", "update:/Description", "p3")),
			policies.Decision{Reasons: []string{"Requires: pools update:/Description p3"}}},
		{"unknown role denied", request(user("g", "ghost"), claim("machines", "get", "m1")),
			policies.Decision{Reasons: []string{"Requires: machines get m1"}}},
		{"self claim allowed", request(user("bob"), claim("users", "password", "bob")),
			policies.Decision{Allow: true, Reasons: []string{}}},
		{"restrict denies outside", request(restricted, claim("pools", "get", "p1")),
			policies.Decision{Reasons: []string{"Requires: pools get p1"}}},
		{"tenant hides non-member", withObject(request(user("tina", "superuser"), claim("machines", "get", "m9")), "machines", "m9"),
			policies.Decision{NotFound: true, Reasons: []string{"machines m9: Not Found"}}},
		{"tenant member allowed", withObject(request(user("tina", "superuser"), claim("machines", "get", "m1")), "machines", "m1"),
			policies.Decision{Allow: true, Reasons: []string{}}},
		{"machine operations no reservation but its own creations", request(ops, claim("reservations", "delete", "0a000001")),
			policies.Decision{Reasons: []string{"Requires: reservations delete 0a000001"}}},
		{"machine operations other machine", request(ops, claim("machines", "get", "uuid-2")),
			policies.Decision{Reasons: []string{"Requires: machines get uuid-2"}}},
		{"license allows rbac", withOp(request(user("a", "rbac"), claim("roles", "create", "")), "create"),
			policies.Decision{Allow: true, Reasons: []string{}}},
		{"list restricted by get specifics", withList(request(user("mia", "m1reader"), claim("machines", "list", "")), "machines"),
			policies.Decision{Allow: true, Reasons: []string{}, Visible: &policies.Visible{Restricted: true, Keys: []string{"m1"}}}},
		{"list unrestricted", withList(request(user("rita", "reader"), claim("machines", "list", "")), "machines"),
			policies.Decision{Allow: true, Reasons: []string{}, Visible: &policies.Visible{}}},
		{"list tenant restricted", withList(request(user("tina", "superuser"), claim("machines", "list", "")), "machines"),
			policies.Decision{Allow: true, Reasons: []string{}, Visible: &policies.Visible{Restricted: true, Keys: []string{"m1", "m2"}}}},
		{"no claims denied", request(user("root", "superuser")),
			policies.Decision{Reasons: []string{"Requires: at least one claim"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := e.Decide(context.Background(), tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v (visible %+v), want %+v (visible %+v)", got, got.Visible, tt.want, tt.want.Visible)
			}
		})
	}
}

func TestDecideUnlicensed(t *testing.T) {
	e := newTestEngine(t, Options{})
	d := testData()
	d.License = policies.LicenseData{}
	if err := e.SetData(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	in := request(user("root", "superuser"), claim("roles", "update:/Claims", "r1"))
	in.Operation = "patch"
	got, err := e.Decide(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if got.Allow || !reflect.DeepEqual(got.Reasons, []string{"roles patch is a licensed enterprise feature"}) {
		t.Errorf("got %+v", got)
	}
}

// SetData takes effect on the very next decision, cached or not.
func TestSetDataInvalidatesCache(t *testing.T) {
	e := newTestEngine(t, Options{})
	ctx := context.Background()
	in := request(user("olga", "operator"), claim("machines", "get", "m1"))
	for i := 0; i < 2; i++ { // the second one is served from the cache
		d, err := e.Decide(ctx, in)
		if err != nil || !d.Allow {
			t.Fatalf("before: %+v %v", d, err)
		}
	}
	if n := e.cache.len(); n != 1 {
		t.Fatalf("cache holds %d decisions, want 1", n)
	}
	_, dataBefore := e.Revisions()
	data := testData()
	data.Roles["operator"] = policies.RoleData{Claims: []backend.Claim{claim("pools", "get", "*")}, Compiled: nil}
	if err := e.SetData(ctx, data); err != nil {
		t.Fatal(err)
	}
	if _, dataAfter := e.Revisions(); dataAfter != dataBefore+1 {
		t.Errorf("data revision %d → %d, want +1", dataBefore, dataAfter)
	}
	d, err := e.Decide(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if d.Allow {
		t.Errorf("after SetData: %+v, want a denial", d)
	}
}

func TestCacheReturnsCopies(t *testing.T) {
	e := newTestEngine(t, Options{})
	in := request(user("olga", "operator"), claim("pools", "get", "p9"))
	d1, _ := e.Decide(context.Background(), in)
	d1.Reasons[0] = "changed"
	d2, _ := e.Decide(context.Background(), in)
	if d2.Reasons[0] != "Requires: pools get p9" {
		t.Errorf("cached decision was changed through a returned copy: %q", d2.Reasons)
	}
}

func TestCacheBounded(t *testing.T) {
	c := newCache[policies.Decision](3, 3)
	for i := 0; i < 10; i++ {
		c.put(cacheKey{data: uint64(i)}, policies.Decision{Allow: true})
	}
	if c.len() != 3 {
		t.Errorf("len %d, want 3", c.len())
	}
	if _, ok := c.get(cacheKey{data: 9}); !ok {
		t.Error("newest entry evicted")
	}
	if _, ok := c.get(cacheKey{data: 0}); ok {
		t.Error("oldest entry kept")
	}
}

func TestCacheOff(t *testing.T) {
	e := newTestEngine(t, Options{CacheSize: -1})
	in := request(user("root", "superuser"), claim("machines", "get", "m1"))
	for i := 0; i < 2; i++ {
		if d, err := e.Decide(context.Background(), in); err != nil || !d.Allow {
			t.Fatalf("%+v %v", d, err)
		}
	}
	if e.cache != nil {
		t.Error("cache present")
	}
}

func TestTokenRoles(t *testing.T) {
	e := newTestEngine(t, Options{})
	tests := []struct {
		user, requested, want []string
	}{
		{[]string{"operator"}, []string{"reader", "superuser", "m1reader", "nope"}, []string{"reader", "m1reader"}},
		{[]string{"superuser"}, []string{"operator", "operator"}, []string{"operator"}},
		{[]string{"m1reader"}, []string{"reader"}, []string{}},
		{nil, nil, []string{}},
	}
	for _, tt := range tests {
		got, err := e.TokenRoles(context.Background(), tt.user, tt.requested)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("TokenRoles(%v, %v) = %v, want %v", tt.user, tt.requested, got, tt.want)
		}
	}
}

// A minimal policy for engine-level tests: decision and token_roles.
const minimalPolicy = `package provgate.authz

decision := {"allow": input.principal.name == "yes", "reasons": [], "not_found": false}

token_roles := []
`

const minimalTest = `package provgate.authz_test

import data.provgate.authz

test_yes_allowed if authz.decision.allow with input as {"principal": {"name": "yes"}}
`

func TestFailClosed(t *testing.T) {
	tests := []struct{ name, policy string }{
		{"undefined decision", "package provgate.authz\n\ndecision := {\"allow\": true} if false\n\ntoken_roles := []\n"},
		{"conflicting decision", "package provgate.authz\n\ndecision := {\"allow\": true, \"reasons\": []} if input.principal.name != \"\"\n\n" +
			"decision := {\"allow\": false, \"reasons\": []} if input.principal.name != \"\"\n\ntoken_roles := []\n"},
		{"allow not a boolean", "package provgate.authz\n\ndecision := {\"allow\": \"yes\", \"reasons\": []}\n\ntoken_roles := []\n"},
		{"reasons not strings", "package provgate.authz\n\ndecision := {\"allow\": false, \"reasons\": [1]}\n\ntoken_roles := []\n"},
		{"allows and hides", "package provgate.authz\n\ndecision := {\"allow\": true, \"reasons\": [], \"not_found\": true}\n\ntoken_roles := []\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := newEngine(context.Background(), Options{}, map[string]string{"p.rego": tt.policy})
			if err != nil {
				t.Fatal(err)
			}
			d, err := e.Decide(context.Background(), request(user("x", "superuser"), claim("machines", "get", "m1")))
			if err == nil {
				t.Fatalf("got %+v and no error, want an error", d)
			}
			if backend.ErrorCode(err) != backend.EINTERNAL || d.Allow {
				t.Errorf("got %+v, %v (code %q)", d, err, backend.ErrorCode(err))
			}
		})
	}
}

func TestNewRejectsPolicyWithoutEntryPoints(t *testing.T) {
	_, err := newEngine(context.Background(), Options{}, map[string]string{"p.rego": "package provgate.authz\n\nallow := true\n"})
	if err == nil || !strings.Contains(err.Error(), "data.provgate.authz.decision") {
		t.Errorf("err = %v", err)
	}
}

func writeFile(t *testing.T, dir, name, src string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
}

func allowed(t *testing.T, e *Engine, name string) bool {
	t.Helper()
	d, err := e.Decide(context.Background(), request(user(name), claim("machines", "get", "m1")))
	if err != nil {
		t.Fatal(err)
	}
	return d.Allow
}

func TestReload(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	writeFile(t, dir, "authz.rego", minimalPolicy)
	writeFile(t, dir, "authz_test.rego", minimalTest)
	e, err := New(ctx, Options{PolicyDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	rev, _ := e.Revisions()
	if !allowed(t, e, "yes") || allowed(t, e, "no") {
		t.Fatal("initial policy not in force")
	}

	t.Run("compile error keeps old policy", func(t *testing.T) {
		writeFile(t, dir, "broken.rego", "package provgate.authz\n\nbroken := [\n")
		defer os.Remove(filepath.Join(dir, "broken.rego"))
		err := e.Reload(ctx)
		if err == nil || !strings.Contains(err.Error(), "broken.rego") {
			t.Errorf("err = %v, want one naming broken.rego", err)
		}
		if now, _ := e.Revisions(); now != rev || !allowed(t, e, "yes") {
			t.Error("old policy not kept")
		}
	})

	t.Run("failing test keeps old policy", func(t *testing.T) {
		// The new policy compiles but breaks the directory's own test.
		writeFile(t, dir, "authz.rego", strings.Replace(minimalPolicy, `== "yes"`, `== "no"`, 1))
		err := e.Reload(ctx)
		if err == nil || !strings.Contains(err.Error(), "test_yes_allowed") {
			t.Errorf("err = %v, want one naming test_yes_allowed", err)
		}
		if now, _ := e.Revisions(); now != rev || !allowed(t, e, "yes") {
			t.Error("old policy not kept")
		}
	})

	t.Run("good change applies and invalidates the cache", func(t *testing.T) {
		writeFile(t, dir, "authz.rego", strings.Replace(minimalPolicy, `== "yes"`, `in {"yes", "also"}`, 1))
		_ = allowed(t, e, "also") // cached under the old policy
		if err := e.Reload(ctx); err != nil {
			t.Fatal(err)
		}
		if now, _ := e.Revisions(); now != rev+1 {
			t.Errorf("policy revision %d, want %d", now, rev+1)
		}
		if !allowed(t, e, "also") {
			t.Error("new policy not in force")
		}
	})

	t.Run("watcher reloads on change", func(t *testing.T) {
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		before, _ := e.Revisions()
		e.WatchDir(wctx, 10*time.Millisecond)
		time.Sleep(30 * time.Millisecond)
		writeFile(t, dir, "extra.rego", "package provgate.extra\n\nx := 1\n")
		deadline := time.Now().Add(5 * time.Second)
		for {
			if now, _ := e.Revisions(); now > before {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("no reload after a file change")
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

func TestNewFailsWhenDirTestsFail(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "authz.rego", minimalPolicy)
	writeFile(t, dir, "authz_test.rego", minimalTest+"\ntest_no_allowed if authz.decision.allow with input as {\"principal\": {\"name\": \"no\"}}\n")
	if _, err := New(context.Background(), Options{PolicyDir: dir}); err == nil || !strings.Contains(err.Error(), "test_no_allowed") {
		t.Errorf("err = %v", err)
	}
}

func TestEmbeddedReloadIsNoop(t *testing.T) {
	e := newTestEngine(t, Options{})
	before, _ := e.Revisions()
	if err := e.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	if after, _ := e.Revisions(); after != before {
		t.Error("embedded policy reloaded")
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func TestDecisionLog(t *testing.T) {
	var buf syncBuffer
	e := newTestEngine(t, Options{DecisionLog: &buf})
	in := request(user("olga", "operator"), claim("pools", "get", "p9"))
	in.Principal.Restrict = []backend.Claim{claim("pools", "get", "*")}
	for i := 0; i < 2; i++ {
		if _, err := e.Decide(context.Background(), in); err != nil {
			t.Fatal(err)
		}
	}
	_ = e.Close()
	lines := strings.Split(strings.TrimSpace(buf.b.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2:\n%s", len(lines), buf.b.String())
	}
	var entry struct {
		DecisionID string            `json:"decision_id"`
		Path       string            `json:"path"`
		Input      policies.Input    `json:"input"`
		Result     policies.Decision `json:"result"`
		Timestamp  time.Time         `json:"timestamp"`
		Metrics    map[string]int64  `json:"metrics"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &entry); err != nil {
		t.Fatal(err)
	}
	if len(entry.DecisionID) != 36 || entry.Path != "provgate/authz/decision" || entry.Timestamp.IsZero() {
		t.Errorf("entry %+v", entry)
	}
	if !reflect.DeepEqual(entry.Input, in) {
		t.Errorf("logged input %+v, want %+v", entry.Input, in)
	}
	if entry.Result.Allow || entry.Result.Reasons[0] != "Requires: pools get p9" {
		t.Errorf("logged result %+v", entry.Result)
	}
	if entry.Metrics["timer_rego_query_eval_ns"] <= 0 {
		t.Errorf("metrics %v", entry.Metrics)
	}
}

// Secrets are masked by what they are, never by words in field names: the
// credential fields of the addressed object, sealed values and strings
// shaped like credentials go; token_roles, machine_token and the token's
// jti stay, so that the line replays to the same decision.
func TestDecisionLogMasksSecretsByWhatTheyAre(t *testing.T) {
	jwt := "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJib2IifQ.c2lnbmF0dXJl"
	in := `{"principal":{"name":"bob","machine_token":"operations","token_roles":["ops"],"auth":{"method":"bearer","jti":"t-1"}},` +
		`"stored":{"Name":"bob","Secret":"s3cr3t-value","Params":{"api":{"Key":"k","Nonce":"n","Payload":"p"},"note":"Bearer abc.def"}},` +
		`"proposed":{"Password":{"masked":true},"PasswordHash":"16384$8$1$abcdef01$0123456789abcdef","Description":"` + jwt + `"}}`
	line, err := encodeLine(logEvent{input: []byte(in), at: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	s := string(line)
	for _, leaked := range []string{"s3cr3t-value", `"Payload":"p"`, "Bearer abc.def", "abcdef01", jwt} {
		if strings.Contains(s, leaked) {
			t.Errorf("%s leaked: %s", leaked, s)
		}
	}
	for _, kept := range []string{`"machine_token":"operations"`, `"token_roles":["ops"]`, `"jti":"t-1"`, `"Name":"bob"`} {
		if !strings.Contains(s, kept) {
			t.Errorf("%s masked: %s", kept, s)
		}
	}
	want := `"masked":["/input/proposed/Description","/input/proposed/PasswordHash","/input/stored/Params/api","/input/stored/Params/note","/input/stored/Secret"]`
	if !strings.Contains(s, want) {
		t.Errorf("masked list, want %s: %s", want, s)
	}
}

// A logged refusal of a token restricted to roles replays to the same
// refusal: token_roles, whose name holds "token", is logged as it was.
func TestDecisionLogReplaysRestrictedToken(t *testing.T) {
	var buf syncBuffer
	e := newTestEngine(t, Options{DecisionLog: &buf})
	p := user("u", "superuser", "m1reader")
	p.TokenRoles = []string{"m1reader"}
	in := request(p, claim("machines", "get", "m2"))
	d, err := e.Decide(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if d.Allow {
		t.Fatalf("decision %+v, want a refusal", d)
	}
	_ = e.Close()
	var line struct {
		Input  policies.Input    `json:"input"`
		Result policies.Decision `json:"result"`
	}
	if err := json.Unmarshal(buf.b.Bytes(), &line); err != nil {
		t.Fatal(err)
	}
	again := newTestEngine(t, Options{CacheSize: -1})
	replayed, err := again.Decide(context.Background(), line.Input)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(replayed, line.Result) {
		t.Errorf("replayed %+v, logged %+v", replayed, line.Result)
	}
}

// A decision with many claims (a large patch) logs a bounded line: lists
// keep their first entries and the line says how many it left out; long
// strings are cut.
func TestDecisionLogBoundsLongLists(t *testing.T) {
	var buf syncBuffer
	e := newTestEngine(t, Options{DecisionLog: &buf})
	const n = 1000
	in := request(user("olga", "operator"))
	for i := 0; i < n; i++ {
		in.Required = append(in.Required, claim("machines", fmt.Sprintf("update:/Params/p%d", i), "m1"))
	}
	in.Path = "/api/v3/machines/" + strings.Repeat("x", 5000)
	d, err := e.Decide(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if d.Allow || len(d.Reasons) != n {
		t.Fatalf("decision %v with %d reasons, want a refusal naming all %d claims", d.Allow, len(d.Reasons), n)
	}
	_ = e.Close()
	line := strings.TrimSpace(buf.b.String())
	if strings.Count(line, "\n") > 0 || len(line) > 16<<10 {
		t.Fatalf("one decision logged as %d bytes", len(line))
	}
	var entry struct {
		Input struct {
			Required []backend.Claim `json:"required"`
			Path     string          `json:"path"`
		} `json:"input"`
		Result    policies.Decision `json:"result"`
		Truncated map[string]int    `json:"truncated"`
	}
	if err := json.Unmarshal([]byte(line), &entry); err != nil {
		t.Fatal(err)
	}
	if got := len(entry.Input.Required); got != maxLogList || entry.Truncated["/input/required"] != n-maxLogList {
		t.Errorf("logged %d claims, truncated %v; want %d and %d left out", got, entry.Truncated, maxLogList, n-maxLogList)
	}
	if entry.Input.Required[0] != in.Required[0] || entry.Input.Required[maxLogList-1] != in.Required[maxLogList-1] {
		t.Errorf("kept claims %v are not the first ones", entry.Input.Required[:2])
	}
	if got := len(entry.Result.Reasons); got != maxLogList || entry.Truncated["/result/reasons"] != n-maxLogList {
		t.Errorf("logged %d reasons, truncated %v", got, entry.Truncated)
	}
	if !strings.HasPrefix(entry.Input.Path, "/api/v3/machines/xxx") || !strings.HasSuffix(entry.Input.Path, "more bytes)") ||
		len(entry.Input.Path) > maxLogString+32 {
		t.Errorf("long path logged as %d bytes: %.80s...", len(entry.Input.Path), entry.Input.Path)
	}
	// A small decision is logged whole, with no truncated member.
	small, err := encodeLine(logEvent{input: []byte(`{"required":[{"scope":"a"}]}`), at: time.Now()})
	if err != nil || strings.Contains(string(small), "truncated") {
		t.Errorf("small line %s, %v", small, err)
	}
}

type blockingWriter struct{ release chan struct{} }

func (w blockingWriter) Write(p []byte) (int, error) { <-w.release; return len(p), nil }

// A stuck log writer never blocks decisions; what does not fit is counted.
func TestDecisionLogDropsWhenFull(t *testing.T) {
	w := blockingWriter{release: make(chan struct{})}
	e := newTestEngine(t, Options{DecisionLog: w, DecisionLogBuffer: 1})
	in := request(user("root", "superuser"), claim("machines", "get", "m1"))
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 10; i++ {
			if _, err := e.Decide(context.Background(), in); err != nil {
				t.Error(err)
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Decide blocked on the decision log")
	}
	if n := e.DroppedDecisionLogs(); n < 8 {
		t.Errorf("dropped %d, want at least 8", n)
	}
	close(w.release)
}

func TestNewData(t *testing.T) {
	d := policies.NewData(
		[]backend.Role{{Name: "r", Claims: []backend.Claim{claim("machines", "get", "a,b")}}, {Name: "empty"}},
		[]backend.Tenant{
			{Name: "b", Members: map[string][]string{"machines": {"m1", "m2", "m1"}}, Users: []string{"u1", "u2"}},
			{Name: "a", Users: []string{"u2"}},
			{Name: "c", Members: map[string][]string{"machines": {"m2"}, "stages": {"m3"}}},
		},
		policies.LicenseData{},
	)
	want := policies.CompiledClaim{"machines": {"get": {Keys: map[string]bool{"a": true, "b": true}}}}
	if got := d.Roles["r"].Compiled; !reflect.DeepEqual(got, []policies.CompiledClaim{want}) {
		t.Errorf("compiled %v", got)
	}
	wantMT := map[string]map[string][]string{}
	for shard := range d.MachineTenants {
		wantMT[shard] = map[string][]string{}
	}
	wantMT[policies.MachineShard("m1")]["m1"] = []string{"b"}
	wantMT[policies.MachineShard("m2")]["m2"] = []string{"b", "c"}
	if len(d.MachineTenants) != policies.MachineShards || !reflect.DeepEqual(d.MachineTenants, wantMT) {
		t.Errorf("machine tenants %v", d.MachineTenants)
	}
	if !reflect.DeepEqual(d.Tenants["b"].MemberSet, map[string]map[string]bool{"machines": {"m1": true, "m2": true}}) {
		t.Errorf("member set %v", d.Tenants["b"].MemberSet)
	}
	if !reflect.DeepEqual(d.UserTenant, map[string]string{"u1": "b", "u2": "a"}) {
		t.Errorf("user tenant %v", d.UserTenant)
	}
	if d.Scopes == nil || d.License.Features == nil || d.Roles["empty"].Claims == nil {
		t.Error("defaults not filled")
	}
}

func TestErrorsAreDomainErrors(t *testing.T) {
	_, err := newEngine(context.Background(), Options{}, map[string]string{"p.rego": "package x\n\ny := [\n"})
	var be *backend.Error
	if !errors.As(err, &be) {
		t.Fatalf("err %T %v", err, err)
	}
}

func TestClaimContains(t *testing.T) {
	e, err := New(context.Background(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.SetData(context.Background(), policies.NewData(nil, nil, policies.LicenseData{})); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		have, want backend.Claim
		wantOK     bool
	}{
		{"superuser contains anything", backend.Claim{Scope: "*", Action: "*", Specific: "*"}, backend.Claim{Scope: "machines", Action: "get", Specific: "a"}, true},
		{"update contains update pointer", backend.Claim{Scope: "machines", Action: "update", Specific: "*"}, backend.Claim{Scope: "machines", Action: "update:/Params/x", Specific: "a"}, true},
		{"get does not contain list", backend.Claim{Scope: "machines", Action: "get", Specific: "*"}, backend.Claim{Scope: "machines", Action: "list", Specific: "*"}, false},
		{"narrow does not contain wide", backend.Claim{Scope: "machines", Action: "get", Specific: "a"}, backend.Claim{Scope: "machines", Action: "get", Specific: "*"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := e.ClaimContains(context.Background(), tt.have, tt.want); got != tt.wantOK {
				t.Fatalf("ClaimContains(%v, %v) = %v, want %v", tt.have, tt.want, got, tt.wantOK)
			}
		})
	}
}
