package gateway

import (
	"bytes"
	"net"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttputil"
)

// TestMetricsLabelsSurviveKeepAlive sends requests of mixed methods and
// routes over one keep-alive connection; Fiber reuses that connection's
// buffers for each request, so a label kept from a request string would
// change under the registry. /metrics must then still answer, with only
// real methods and registered routes as labels.
func TestMetricsLabelsSurviveKeepAlive(t *testing.T) {
	s := New(Options{})
	ln := fasthttputil.NewInmemoryListener()
	defer ln.Close()
	go func() { _ = s.App().Listener(ln) }()
	defer func() { _ = s.App().ShutdownWithTimeout(time.Second) }()
	dials := 0
	client := &fasthttp.HostClient{Addr: "gateway", MaxConns: 1,
		Dial: func(string) (net.Conn, error) { dials++; return ln.Dial() }}

	do := func(method, path string) *fasthttp.Response {
		req, res := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(req)
		req.Header.SetMethod(method)
		req.SetRequestURI("http://gateway" + path)
		if err := client.DoTimeout(req, res, 5*time.Second); err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		return res
	}
	paths := []struct{ method, path string }{
		{"GET", "/healthz"}, {"PATCH", "/api/v3/machines/m1"}, {"HEAD", "/api/v3/machines"},
		{"DELETE", "/api/v3/profiles/p1"}, {"POST", "/nowhere/at/all/" + string(bytes.Repeat([]byte("x"), 64))},
		{"PUT", "/api/v3/profiles/p1"}, {"OPTIONS", "/api/v3/info"}, {"PROPFIND", "/healthz"},
	}
	for i := 0; i < 20; i++ {
		for _, p := range paths {
			fasthttp.ReleaseResponse(do(p.method, p.path))
		}
	}
	res := do("GET", "/metrics")
	defer fasthttp.ReleaseResponse(res)
	if dials != 1 {
		t.Fatalf("%d connections, want one kept alive", dials)
	}
	if res.StatusCode() != 200 {
		t.Fatalf("/metrics: %d %s", res.StatusCode(), res.Body())
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(res.Body()))
	if err != nil {
		t.Fatal(err)
	}
	routes := map[string]bool{"unmatched": true}
	for _, r := range s.App().GetRoutes() {
		routes[r.Path] = true
	}
	counts := map[string]float64{}
	fam := fams["provgate_http_requests_total"]
	if fam == nil {
		t.Fatal("no provgate_http_requests_total")
	}
	for _, m := range fam.GetMetric() {
		for _, l := range m.GetLabel() {
			switch l.GetName() {
			case "method":
				if methodLabel(l.GetValue()) != l.GetValue() && l.GetValue() != "other" {
					t.Errorf("method label %q", l.GetValue())
				}
				counts[l.GetValue()] += m.GetCounter().GetValue()
			case "route":
				if !routes[l.GetValue()] {
					t.Errorf("route label %q is no route", l.GetValue())
				}
			}
		}
	}
	for _, m := range []string{"GET", "PATCH", "HEAD", "DELETE", "POST", "PUT", "OPTIONS"} {
		if counts[m] < 20 {
			t.Errorf("%s counted %v times, want at least 20 (%v)", m, counts[m], counts)
		}
	}
}
