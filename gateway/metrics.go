package gateway

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/adaptor"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

type metrics struct {
	requests  *prometheus.CounterVec
	durations *prometheus.HistogramVec
	decisions *prometheus.CounterVec
	// poolOps counts pool operations by verb and result; poolMachines the
	// machines they moved (allocateMachines: allocations).
	poolOps      *prometheus.CounterVec
	poolMachines *prometheus.CounterVec
	// loginFailures counts refused authentications by reason.
	loginFailures *prometheus.CounterVec
}

// counterVec is a counter of name by labels.
func counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}

func newMetrics(reg *prometheus.Registry) *metrics {
	m := &metrics{
		requests: counterVec("provgate_http_requests_total", "HTTP requests by method, route and status.",
			"method", "route", "status"),
		durations: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "provgate_http_request_duration_seconds", Help: "HTTP request latency by method and route.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"method", "route"}),
		decisions: counterVec("provgate_authz_decisions_total", "Authorization decisions by outcome.", "outcome"),
		poolOps: counterVec("provgate_pool_operations_total", "Pool operations by verb and result (ok or error).",
			"verb", "result"),
		poolMachines: counterVec("provgate_pool_machines_total",
			"Machines moved by successful pool operations, by verb (allocateMachines: allocations).", "verb"),
		loginFailures: counterVec("provgate_login_failures_total",
			"Refused authentications by reason: invalid (wrong or unknown credentials), missing (none sent), throttled (too many failures).",
			"reason"),
	}
	for _, v := range poolVerbs {
		m.poolOps.WithLabelValues(v, "ok")
		m.poolOps.WithLabelValues(v, "error")
		m.poolMachines.WithLabelValues(v)
	}
	for _, r := range []string{"invalid", "missing", "throttled"} {
		m.loginFailures.WithLabelValues(r)
	}
	for _, o := range []string{"allow", "deny", "hidden", "error"} {
		m.decisions.WithLabelValues(o)
	}
	reg.MustRegister(m.requests, m.durations, m.decisions, m.poolOps, m.poolMachines, m.loginFailures)
	// Process and Go runtime figures; registering twice on a shared registry is harmless.
	_ = reg.Register(collectors.NewGoCollector())
	_ = reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// reloadCounter is implemented by deciders that reload their policy
// (policies/opa Engine.ReloadCounts).
type reloadCounter interface {
	ReloadCounts() (loaded, refused uint64)
}

// registerReloads exports the policy reload outcomes as
// provgate_policy_reloads_total{result="loaded"|"refused"}.
func registerReloads(reg *prometheus.Registry, rc reloadCounter) {
	const name, help = "provgate_policy_reloads_total", "Policy loads by result: loaded, or refused (the running policy stays)."
	_ = reg.Register(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: prometheus.Labels{"result": "loaded"}},
		func() float64 { l, _ := rc.ReloadCounts(); return float64(l) }))
	_ = reg.Register(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: prometheus.Labels{"result": "refused"}},
		func() float64 { _, r := rc.ReloadCounts(); return float64(r) }))
}

// Label values outlive the request (the registry keeps them), while Fiber's
// strings point into buffers the next request on the connection reuses: a
// label kept from c.Method() turns into another method later, and /metrics
// then fails. So labels are never request strings: methods are constants of
// a fixed set, routes are copied, statuses are formatted here.

// methodLabel is the label of method: a constant for the standard methods,
// "other" for any other, which also bounds the label's values.
func methodLabel(method string) string {
	if i := slices.Index(labelMethods, method); i >= 0 {
		return labelMethods[i]
	}
	return "other"
}

// labelMethods are the methods methodLabel names.
var labelMethods = []string{fiber.MethodGet, fiber.MethodHead, fiber.MethodPost, fiber.MethodPut,
	fiber.MethodPatch, fiber.MethodDelete, fiber.MethodOptions}

// poolVerbs are the pool operation labels: the four pool routes' verbs and
// releaseToPool.
var poolVerbs = []string{"addMachines", "removeMachines", "allocateMachines", "releaseMachines", "releaseToPool"}

// countPoolOp records one pool operation and the machines it moved.
func (m *metrics) countPoolOp(verb string, machines int, err error) {
	if err != nil {
		m.poolOps.WithLabelValues(verb, "error").Inc()
		return
	}
	m.poolOps.WithLabelValues(verb, "ok").Inc()
	m.poolMachines.WithLabelValues(verb).Add(float64(machines))
}

// routeLabel is the registered route that served the request, copied, or
// "unmatched". A request no route took keeps no route of its own: Fiber
// then reports the raw path, which must not become a label. A refused
// request counts under its route: the guard runs inside it. An /api/v3
// request no row took reached only the /api/v3 fallback.
func (s *Server) routeLabel(c *fiber.Ctx) string {
	r := c.Route()
	if r == nil || r.Path == "/" || r.Path == "" || r.Path == apiBase || len(r.Handlers) == 0 {
		return "unmatched"
	}
	return strings.Clone(r.Path)
}

func (m *metrics) observe(method, route string, status int, d time.Duration) {
	m.requests.WithLabelValues(method, route, strconv.Itoa(status)).Inc()
	m.durations.WithLabelValues(method, route).Observe(d.Seconds())
}

func (s *Server) metricsHandler() fiber.Handler {
	h := adaptor.HTTPHandler(promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}))
	return func(c *fiber.Ctx) error {
		err := h(c)
		c.Set(fiber.HeaderContentType, "text/plain; version=0.0.4; charset=utf-8")
		return err
	}
}
