package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrape is one reading of /metrics: every sample by name and labels.
type scrape struct {
	fams map[string]*dto.MetricFamily
	raw  string
}

func (s *tserver) scrape(t testing.TB) scrape {
	t.Helper()
	r := s.DoURL(t, "GET", s.root()+"/metrics", nil, "")
	if r.Status != 200 {
		t.Fatalf("/metrics: %s", r)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(r.Body))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return scrape{fams: fams, raw: string(r.Body)}
}

// value is the sample of family name whose labels include all of labels
// (name, value pairs), summed over the matching samples: a counter's or
// gauge's value, a histogram's count. Absent is 0.
func (m scrape) value(name string, labels ...string) float64 {
	fam := m.fams[name]
	if fam == nil {
		return 0
	}
	var sum float64
next:
	for _, s := range fam.GetMetric() {
		have := map[string]string{}
		for _, l := range s.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for i := 0; i+1 < len(labels); i += 2 {
			if have[labels[i]] != labels[i+1] {
				continue next
			}
		}
		switch {
		case s.Counter != nil:
			sum += s.Counter.GetValue()
		case s.Gauge != nil:
			sum += s.Gauge.GetValue()
		case s.Histogram != nil:
			sum += float64(s.Histogram.GetSampleCount())
		}
	}
	return sum
}

// names is every sample name the scrape holds (histograms with their
// _bucket, _sum and _count series).
func (m scrape) names() map[string]bool {
	out := map[string]bool{}
	for _, line := range strings.Split(m.raw, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		out[strings.FieldsFunc(line, func(r rune) bool { return r == '{' || r == ' ' })[0]] = true
	}
	return out
}

// routeOf is the route label of the requests to method and status seen in
// after but not before (one route gained exactly one such request; the
// scrapes' own requests to /metrics aside).
func routeOf(t testing.TB, before, after scrape, method, status string) string {
	t.Helper()
	var routes []string
	for _, s := range after.fams["provgate_http_requests_total"].GetMetric() {
		have := map[string]string{}
		for _, l := range s.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		if have["method"] != method || have["status"] != status || have["route"] == "/metrics" {
			continue
		}
		if after.value("provgate_http_requests_total", "method", method, "route", have["route"], "status", status) >
			before.value("provgate_http_requests_total", "method", method, "route", have["route"], "status", status) {
			routes = append(routes, have["route"])
		}
	}
	if len(routes) != 1 {
		t.Fatalf("%s %s requests gained on routes %v, want one route", method, status, routes)
	}
	return routes[0]
}

// TestE2EMetrics: the metrics a platform team alerts on move as the
// requests that drive them are made (docs/design.md §15.4).
func TestE2EMetrics(t *testing.T) {
	forEachDB(t, func(t *testing.T, s *tserver) {
		adm := admin()
		s.AddRole("metrics-none", [3]string{"profiles", "get", "*"})
		s.AddUser("metrics-u", "metrics-Pa55word", "metrics-none")
		user := basic("metrics-u", "metrics-Pa55word")
		m1 := s.AddMachine("metrics-m1", nil)

		// Route labels: a refused request counts under the route it asked
		// for, as an allowed one does, never under the /api/v3 group.
		m0 := s.scrape(t)
		s.Must(200, "GET", "/machines/"+m1, nil, adm)
		a := s.scrape(t)
		allowed := routeOf(t, m0, a, "GET", "200")
		s.Must(403, "GET", "/machines/"+m1, nil, basic("rocketskates", "wrong-password"))
		s.Must(401, "GET", "/machines/"+m1, nil, "")
		s.Must(403, "GET", "/machines/"+m1, nil, user)
		b := s.scrape(t)
		if r := routeOf(t, a, b, "GET", "401"); r != allowed {
			t.Errorf("a 401 counts under route %q, the allowed request under %q", r, allowed)
		}
		if r := routeOf(t, a, b, "GET", "403"); r != allowed {
			t.Errorf("a 403 counts under route %q, the allowed request under %q", r, allowed)
		}
		if v := b.value("provgate_http_requests_total", "route", "/api/v3"); v != 0 {
			t.Errorf("%v requests count under the /api/v3 group", v)
		}

		// Failed logins by reason, decisions by result.
		for _, c := range []struct {
			reason string
			want   float64
		}{{"invalid", 1}, {"missing", 1}, {"throttled", 0}} {
			if d := b.value("provgate_login_failures_total", "reason", c.reason) - a.value("provgate_login_failures_total", "reason", c.reason); d != c.want {
				t.Errorf("login failures %s grew by %v, want %v", c.reason, d, c.want)
			}
		}
		if d := b.value("provgate_authz_decisions_total", "outcome", "deny") - a.value("provgate_authz_decisions_total", "outcome", "deny"); d != 1 {
			t.Errorf("deny decisions grew by %v, want 1", d)
		}

		// The decision cache: the same request decided twice is a hit.
		s.Must(201, "POST", "/profiles", map[string]any{"Name": "metrics-p"}, adm)
		s.Must(200, "GET", "/profiles/metrics-p", nil, user)
		c0 := s.scrape(t)
		s.Must(200, "GET", "/profiles/metrics-p", nil, user)
		c1 := s.scrape(t)
		if d := c1.value("provgate_authz_decision_cache_total", "result", "hit") - c0.value("provgate_authz_decision_cache_total", "result", "hit"); d < 1 {
			t.Errorf("decision cache hits grew by %v, want at least 1", d)
		}
		if d := c1.value("provgate_authz_decisions_total", "outcome", "allow") - c0.value("provgate_authz_decisions_total", "outcome", "allow"); d != 1 {
			t.Errorf("allow decisions grew by %v, want 1", d)
		}

		// Pool operations and allocations.
		s.Must(201, "POST", "/pools", map[string]any{"Id": "metrics-pool"}, adm)
		p0 := s.scrape(t)
		s.Must(200, "POST", "/pools/metrics-pool/addMachines", map[string]any{"pool/machine-list": []string{m1}}, adm)
		s.Must(200, "POST", "/pools/metrics-pool/allocateMachines", map[string]any{"pool/count": 1}, adm)
		r := s.Do("POST", "/pools/metrics-pool/allocateMachines", map[string]any{"pool/count": 1}, adm)
		if r.Status < 400 {
			t.Fatalf("allocating from an empty pool: %s", r)
		}
		p1 := s.scrape(t)

		// The store: the pool operations' statements timed, connections
		// of the pool.
		if p1.value("provgate_store_query_duration_seconds") <= p0.value("provgate_store_query_duration_seconds") {
			t.Errorf("no store statement timed during pool operations")
		}
		if v := p1.value("go_sql_open_connections", "db_name", "provgate"); v < 1 {
			t.Errorf("go_sql_open_connections %v, want at least 1", v)
		}
		if v := p1.value("go_sql_max_open_connections", "db_name", "provgate"); v < 1 {
			t.Errorf("go_sql_max_open_connections %v", v)
		}
		for _, c := range []struct {
			name, verb, result string
			want               float64
		}{
			{"provgate_pool_operations_total", "addMachines", "ok", 1},
			{"provgate_pool_operations_total", "allocateMachines", "ok", 1},
			{"provgate_pool_operations_total", "allocateMachines", "error", 1},
			{"provgate_pool_machines_total", "allocateMachines", "", 1},
			{"provgate_pool_machines_total", "addMachines", "", 1},
		} {
			labels := []string{"verb", c.verb}
			if c.result != "" {
				labels = append(labels, "result", c.result)
			}
			if d := p1.value(c.name, labels...) - p0.value(c.name, labels...); d != c.want {
				t.Errorf("%s %v grew by %v, want %v", c.name, labels, d, c.want)
			}
		}

		// Callback attempts and jobfail deliveries by outcome.
		rc := newReceiver(t)
		rc.handle("/fail", func(w http.ResponseWriter, r *http.Request) bool {
			w.WriteHeader(500)
			return false
		})
		mkPlugin(t, s, "metrics-cb", map[string]any{
			"ok":   map[string]any{"Url": rc.URL + "/ok"},
			"fail": map[string]any{"Url": rc.URL + "/fail", "Retry": 0},
		}, nil)
		k0 := s.scrape(t)
		runCallback(s, m1, "metrics-cb", map[string]any{"callback/action": "ok"})
		runCallback(s, m1, "metrics-cb", map[string]any{"callback/action": "fail"})
		jobfailPlugin(t, s, rc)
		failJob(t, s, jobMachine(t, s, "metrics-jf"))
		rc.waitFor(t, "/jobfail", 1, 10*time.Second)
		var k1 scrape
		for deadline := time.Now().Add(10 * time.Second); ; {
			k1 = s.scrape(t)
			if k1.value("provgate_jobfail_deliveries_total", "outcome", "done") > k0.value("provgate_jobfail_deliveries_total", "outcome", "done") ||
				time.Now().After(deadline) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if d := k1.value("provgate_jobfail_deliveries_total", "outcome", "done") - k0.value("provgate_jobfail_deliveries_total", "outcome", "done"); d != 1 {
			t.Errorf("jobfail deliveries done grew by %v, want 1", d)
		}
		if d := k1.value("provgate_callback_attempts_total", "outcome", "ok") - k0.value("provgate_callback_attempts_total", "outcome", "ok"); d != 2 {
			t.Errorf("ok callback attempts grew by %v, want 2 (the ok action and the jobfail delivery)", d)
		}
		if d := k1.value("provgate_callback_attempts_total", "outcome", "server_error") - k0.value("provgate_callback_attempts_total", "outcome", "server_error"); d < 1 {
			t.Errorf("server_error callback attempts grew by %v, want at least 1", d)
		}

		// Event streams open and dropped: a stream whose token expires is
		// dropped by the server.
		e0 := s.scrape(t)
		tok := s.Token("rocketskates", adm, "?ttl=2s")
		ws := s.mustWS(t, bearer(tok))
		ws.register("machines.*.*")
		if v := s.scrape(t).value("provgate_event_streams_open"); v != e0.value("provgate_event_streams_open")+1 {
			t.Errorf("provgate_event_streams_open %v with one more stream open, was %v", v, e0.value("provgate_event_streams_open"))
		}
		ws.closed(10 * time.Second)
		var e1 scrape
		for deadline := time.Now().Add(5 * time.Second); ; {
			e1 = s.scrape(t)
			if e1.value("provgate_event_streams_open") == e0.value("provgate_event_streams_open") || time.Now().After(deadline) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if d := e1.value("provgate_event_streams_dropped_total", "reason", "expired") - e0.value("provgate_event_streams_dropped_total", "reason", "expired"); d != 1 {
			t.Errorf("event streams dropped (expired) grew by %v, want 1", d)
		}
		if v := e1.value("provgate_event_streams_open"); v != e0.value("provgate_event_streams_open") {
			t.Errorf("provgate_event_streams_open %v after the stream ended, want %v", v, e0.value("provgate_event_streams_open"))
		}

		// The request log's duration_ms is a number.
		var logged bool
		for _, line := range strings.Split(s.Stderr.String(), "\n") {
			var l map[string]any
			if json.Unmarshal([]byte(line), &l) != nil || l["msg"] != "request" {
				continue
			}
			if _, ok := l["duration_ms"].(float64); !ok {
				t.Fatalf("duration_ms is %T in %s", l["duration_ms"], line)
			}
			logged = true
		}
		if !logged {
			t.Error("no request line logged")
		}
	}, append(licenseArgs(t), receiverArgs...)...)
}

// dashboardMetric finds the metric names a PromQL expression reads.
var dashboardMetric = regexp.MustCompile(`\b(?:provgate|go_sql|go|process)_[a-z_]+\b`)

// TestE2EGrafanaDashboard: every metric deploy/grafana-dashboard.json
// queries is served by /metrics, so the dashboard never shows a panel of
// nothing because of a misspelt or renamed metric.
func TestE2EGrafanaDashboard(t *testing.T) {
	raw, err := os.ReadFile("../../deploy/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	// With a decision log, as the dashboard shows its drops.
	s := startE2E(t, dbCase{Name: "sqlite"}, "--decision-log", filepath.Join(t.TempDir(), "decisions.log"))
	// Every histogram and labelled counter gets a sample first.
	s.Must(200, "GET", "/info", nil, admin())
	s.Must(401, "GET", "/info", nil, "")
	have := s.scrape(t).names()
	var queried []string
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			continue
		}
		for _, tg := range p.Targets {
			names := dashboardMetric.FindAllString(tg.Expr, -1)
			if len(names) == 0 {
				t.Errorf("panel %q: query %q reads no metric", p.Title, tg.Expr)
			}
			for _, n := range names {
				queried = append(queried, n)
				if !have[n] {
					t.Errorf("panel %q queries %s, which /metrics does not serve", p.Title, n)
				}
			}
		}
	}
	sort.Strings(queried)
	if len(queried) < 10 {
		t.Fatalf("the dashboard queries only %v", queried)
	}
}

// TestE2EMemoryLimit: --memory-limit sets the Go runtime's soft memory
// limit, which /metrics reports (go_gc_gomemlimit_bytes). The limit is the
// process's, here the test binary's, so it is one no test run reaches and
// is put back after.
func TestE2EMemoryLimit(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })
	const limit = 64 << 30
	s := startE2E(t, dbCase{Name: "sqlite"}, "--memory-limit", "64GiB")
	if got := debug.SetMemoryLimit(-1); got != limit {
		t.Errorf("runtime memory limit %d, want %d", got, limit)
	}
	if got := s.scrape(t).value("go_gc_gomemlimit_bytes"); got != limit {
		t.Errorf("go_gc_gomemlimit_bytes %v, want %d", got, limit)
	}
}
