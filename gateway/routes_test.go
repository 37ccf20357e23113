package gateway

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gofiber/fiber/v2"
	dto "github.com/prometheus/client_model/go"

	"github.com/provgate/provgate/backend"
	"github.com/provgate/provgate/gateway/auth"
	"github.com/provgate/provgate/gateway/claims"
)

// samplePath turns a row's pattern into a concrete path.
func samplePath(pattern string) string {
	segs := strings.Split(pattern, "/")
	for i, s := range segs {
		switch {
		case strings.HasSuffix(s, "...}"):
			segs[i] = "a/b"
		case s == "{cmd}":
			segs[i] = "someCmd"
		case strings.HasPrefix(s, "{"):
			segs[i] = "k1"
		}
	}
	return strings.Join(segs, "/")
}

// TestRoutesReachTheirRow: the router takes each row's request to that
// row's own route (no earlier row shadows it), and an /api/v3 path no row
// takes reaches no route.
func TestRoutesReachTheirRow(t *testing.T) {
	s := New(Options{Logger: slog.New(slog.DiscardHandler), Deps: everyService()})
	for _, rt := range claims.Routes() {
		before := count(t, s, rt.Method, rt.FiberPath(), "503")
		resp, err := s.App().Test(httptest.NewRequest(rt.Method, samplePath(rt.Pattern), nil), -1)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		after := count(t, s, rt.Method, rt.FiberPath(), "503")
		if resp.StatusCode != 503 || after != before+1 {
			t.Errorf("%s %s: status %d, counted %v times under its route", rt.Method, rt.Pattern, resp.StatusCode, after-before)
		}
	}
	before := count(t, s, "GET", "unmatched", "503")
	resp, err := s.App().Test(httptest.NewRequest("GET", apiBase+"/machines/k1/frobs", nil), -1)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if after := count(t, s, "GET", "unmatched", "503"); after != before+1 {
		t.Errorf("an unrouted request counted %v times as unmatched", after-before)
	}
}

// TestRoutesEveryHandlerHasRows: a handler no row names would never run.
func TestRoutesEveryHandlerHasRows(t *testing.T) {
	d := everyService()
	d.BenchRoute = true
	s := New(Options{Logger: slog.New(slog.DiscardHandler), Deps: d})
	named := map[claims.Serve]bool{}
	for _, rt := range claims.Table() {
		named[rt.Serve] = true
	}
	for name, h := range s.handlers(d, &uiPages{}) {
		if h == nil {
			t.Errorf("%q has no handler with every service present", name)
		}
		if !named[name] {
			t.Errorf("%q serves no row of the route table", name)
		}
	}
}

// TestRouterIsTheTable: the router serves the rows of the route table and
// nothing else, each row once; the only other entry is the middleware every
// request runs through (New's app.Use). Every row says its access, and the
// AuthZEN rows come after the USE row that authenticates their caller.
func TestRouterIsTheTable(t *testing.T) {
	d := everyService()
	d.BenchRoute = true
	s := New(Options{Logger: slog.New(slog.DiscardHandler), Deps: d})
	type key struct{ method, path string }
	want := map[key]*claims.Route{}
	for _, rt := range claims.Table() {
		k := key{rt.Method, rt.FiberPath()}
		if want[k] != nil {
			t.Errorf("%s %s: two rows", rt.Method, rt.Pattern)
		}
		want[k] = rt
	}
	got := map[key]int{}
	for _, r := range s.App().GetRoutes(true) {
		got[key{r.Method, r.Path}]++
	}
	// Fiber lists a USE route under every method, among the routes
	// GetRoutes(true) leaves out.
	routes := 0
	for _, r := range s.App().GetRoutes() {
		if r.Method == fiber.MethodConnect {
			routes++
			got[key{claims.MethodUse, r.Path}]++
		}
	}
	if n := len(s.App().GetRoutes()) - len(s.App().GetRoutes(true)); n != routes*len(fiber.DefaultMethods) {
		t.Errorf("%d USE entries, want %d USE routes under %d methods", n, routes, len(fiber.DefaultMethods))
	}
	delete(got, key{claims.MethodUse, "/"})
	for k, n := range got {
		if want[k] == nil || n != 1 {
			t.Errorf("router: %s %s registered %d times, row %v", k.method, k.path, n, want[k] != nil)
		}
	}
	for k := range want {
		if got[k] == 0 {
			t.Errorf("row %s %s not in the router", k.method, k.path)
		}
	}
	authenticated := map[string]bool{}
	for _, rt := range claims.Table() {
		switch {
		case rt.Access == claims.AccessCaller && rt.Method == claims.MethodUse:
			authenticated[rt.Pattern] = true
		case rt.Access == claims.AccessCaller && !authenticated[authzenBase]:
			t.Errorf("%s %s: no USE row authenticates its caller before it", rt.Method, rt.Pattern)
		case rt.Access == claims.AccessClaims && rt.Method != claims.MethodUse && !strings.HasPrefix(rt.Pattern, apiBase+"/"):
			t.Errorf("%s %s: claims outside %s", rt.Method, rt.Pattern, apiBase)
		case rt.Access != claims.AccessClaims && strings.HasPrefix(rt.Pattern, apiBase):
			t.Errorf("%s %s: an %s row without claims", rt.Method, rt.Pattern, apiBase)
		}
	}
}

// TestRoutesWithoutService: a server built without a service has no rows
// for its handlers; the other rows stay.
func TestRoutesWithoutService(t *testing.T) {
	d := everyService()
	d.Pools = nil
	s := New(Options{Logger: slog.New(slog.DiscardHandler), Deps: d})
	for path, want := range map[string]string{
		apiBase + "/pools/k1/status": "unmatched",
		apiBase + "/pools-active":    "unmatched",
		apiBase + "/pools/k1":        "/api/v3/pools/:key",
	} {
		before := count(t, s, "GET", want, "503")
		resp, err := s.App().Test(httptest.NewRequest("GET", path, nil), -1)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if after := count(t, s, "GET", want, "503"); after != before+1 {
			t.Errorf("GET %s: not counted under %s", path, want)
		}
	}
}

// everyService is Deps with every service the routes call present (and
// unusable: the guard refuses first without Auth).
func everyService() Deps {
	type users struct{ Users }
	type pools struct{ Pools }
	type jobs struct{ Jobs }
	type actions struct{ Actions }
	type license struct{ Licenser }
	type events struct{ Events }
	type objects struct{ Objects }
	type streams struct{ Streams }
	return Deps{Users: users{}, Pools: pools{}, Jobs: jobs{}, JobActions: stubJobActions{}, Actions: actions{},
		Params: stubParams{}, License: license{}, Prefs: stubPrefs{}, Events: events{}, Objects: objects{}, Streams: streams{},
		Candidates: func(context.Context, []byte) (CandidatePolicy, error) { return nil, nil }}
}

// count is the number of requests counted under method, route and status.
func count(t *testing.T, s *Server, method, route, status string) float64 {
	t.Helper()
	var m dto.Metric
	if err := s.metrics.requests.WithLabelValues(method, route, status).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// TestRoutesHeadWithGet: every GET route also answers HEAD (DRP clients
// use HEAD for exists and counts).
func TestRoutesHeadWithGet(t *testing.T) {
	heads := map[string]bool{}
	routes := New(Options{}).App().GetRoutes(true)
	for _, r := range routes {
		if r.Method == fiber.MethodHead {
			heads[r.Path] = true
		}
	}
	for _, r := range routes {
		if r.Method == fiber.MethodGet && strings.HasPrefix(r.Path, "/api/v3/") && !heads[r.Path] {
			t.Errorf("GET %s has no HEAD", r.Path)
		}
	}
}

type stubJobActions struct{}

func (stubJobActions) JobActions(context.Context, string, string) ([]backend.JobAction, error) {
	return nil, nil
}

type stubPrefs struct{}

func (stubPrefs) Prefs(context.Context) (map[string]string, error) { return nil, nil }
func (stubPrefs) SetPrefs(context.Context, map[string]string) (map[string]string, error) {
	return nil, nil
}

type stubParams struct{ *memParams }

func (stubParams) PublicKey(context.Context, string, string) ([]byte, error) { return nil, nil }

// refuseAll refuses every caller.
type refuseAll struct{}

func (refuseAll) Authenticate(context.Context, string, string) (*auth.Principal, error) {
	return nil, backend.Errorf(backend.EUNAUTHORIZED, "refused")
}

// TestRoutesAccess: each row is authorized as its Access says: public rows
// answer without credentials, every other row, and any path under an
// authenticating USE row, asks for them.
func TestRoutesAccess(t *testing.T) {
	d := everyService()
	d.BenchRoute = true
	d.Auth, d.Policy, d.Resolver = refuseAll{}, &allowAll{}, keyResolver{}
	s := New(Options{Logger: slog.New(slog.DiscardHandler), Deps: d})
	status := func(method, path string) int {
		resp, err := s.App().Test(httptest.NewRequest(method, path, nil), -1)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	for _, rt := range claims.Table() {
		if rt.Method == claims.MethodUse {
			continue
		}
		got := status(rt.Method, samplePath(rt.Pattern))
		if public := rt.Access == claims.AccessPublic; public != (got != 401) {
			t.Errorf("%s %s (access %d): status %d without credentials", rt.Method, rt.Pattern, rt.Access, got)
		}
	}
	for _, path := range []string{authzenBase + "/nothing", apiBase + "/nothing"} {
		if got := status("POST", path); got != 401 {
			t.Errorf("POST %s: status %d without credentials", path, got)
		}
	}
	if got := status("GET", "/ui/static/nothing"); got != 404 {
		t.Errorf("GET /ui/static/nothing: status %d", got)
	}
}
