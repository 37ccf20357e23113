package gateway

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gofiber/fiber/v2"
	dto "github.com/prometheus/client_model/go"

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
	s := New(Options{})
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
