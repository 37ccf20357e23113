package gateway

import (
	"database/sql"
	"sort"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// The services count what they do in plain counters (backend.Counts,
// atomics) and know nothing of Prometheus; the gateway exports them
// (docs/design.md §15.4). Each source is an optional interface of a Deps
// service, so a partially wired server exports what it has.

// cacheCounter is implemented by deciders with a decision cache
// (policies/opa Engine.CacheCounts).
type cacheCounter interface {
	CacheCounts() (hits, misses uint64)
}

// decisionLogDrops is implemented by deciders with a decision log
// (policies/opa Engine.DecisionLogDrops): entries dropped by sink.
type decisionLogDrops interface {
	DecisionLogDrops() map[string]uint64
}

// queryStatser is implemented by stores that time their statements
// (backend/store Store.QueryStats, Store.SQLDB).
type queryStatser interface {
	QueryStats() (bounds []float64, cumulative []uint64, count uint64, sum float64, failed uint64)
	SQLDB() *sql.DB
}

// streamCounter is implemented by event stream hubs (gateway/stream Hub).
type streamCounter interface {
	Open() int
	Dropped() map[string]uint64
}

// CallbackCounter reports callback attempts and jobfail deliveries by
// outcome (backend/callback Service.Counts).
type CallbackCounter interface {
	Counts() (attempts, deliveries map[string]uint64)
}

// workerRounder is implemented by callback services whose jobfail worker
// counts its finished rounds (backend/callback Service.Rounds).
type workerRounder interface {
	Rounds() uint64
}

// countsCollector exports a map of counts as one counter with one label.
type countsCollector struct {
	desc  *prometheus.Desc
	kind  prometheus.ValueType
	read  func() map[string]uint64
	fixed []string // label values always exported, 0 until counted
}

func newCounts(name, help, label string, read func() map[string]uint64, fixed ...string) *countsCollector {
	return &countsCollector{desc: prometheus.NewDesc(name, help, []string{label}, nil),
		kind: prometheus.CounterValue, read: read, fixed: fixed}
}

func (c *countsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *countsCollector) Collect(ch chan<- prometheus.Metric) {
	m := c.read()
	for _, f := range c.fixed {
		if _, ok := m[f]; !ok {
			m[f] = 0
		}
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		ch <- prometheus.MustNewConstMetric(c.desc, c.kind, float64(m[k]), k)
	}
}

// storeCollector exports the store's statement latency histogram and failed
// statements.
type storeCollector struct {
	s              queryStatser
	latency, fails *prometheus.Desc
}

func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.latency; ch <- c.fails }

func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	bounds, cum, n, sum, failed := c.s.QueryStats()
	b := make(map[float64]uint64, len(cum))
	for i, v := range cum {
		if i < len(bounds) {
			b[bounds[i]] = v
		}
	}
	ch <- prometheus.MustNewConstHistogram(c.latency, n, sum, b)
	ch <- prometheus.MustNewConstMetric(c.fails, prometheus.CounterValue, float64(failed))
}

// registerSources exports what the Deps services count.
func (s *Server) registerSources(reg *prometheus.Registry) {
	if cc, ok := s.policy.(cacheCounter); ok {
		_ = reg.Register(newCounts("provgate_authz_decision_cache_total",
			"Policy evaluations by decision cache result: hit (answered from the cache) or miss (evaluated).", "result",
			func() map[string]uint64 {
				h, m := cc.CacheCounts()
				return map[string]uint64{"hit": h, "miss": m}
			}))
	}
	if dl, ok := s.policy.(decisionLogDrops); ok {
		if dl.DecisionLogDrops() != nil {
			_ = reg.Register(newCounts("provgate_decision_log_dropped_total",
				"Decision log entries dropped, by stage: queue (the writer fell behind), http (the --decision-log-url buffer was full).", "stage",
				dl.DecisionLogDrops, "queue"))
		}
	}
	if qs, ok := s.store.(queryStatser); ok {
		_ = reg.Register(&storeCollector{s: qs,
			latency: prometheus.NewDesc("provgate_store_query_duration_seconds", "Latency of the store's database statements.", nil, nil),
			fails:   prometheus.NewDesc("provgate_store_query_errors_total", "Store statements that failed (not found excluded).", nil, nil)})
		if db := qs.SQLDB(); db != nil {
			// go_sql_* with db_name="provgate": open, in use and idle
			// connections, waits for a free one (database/sql DBStats).
			_ = reg.Register(collectors.NewDBStatsCollector(db, "provgate"))
		}
	}
	if sc, ok := s.streams.(streamCounter); ok {
		_ = reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "provgate_event_streams_open",
			Help: "Open event streams (GET /api/v3/ws)."}, func() float64 { return float64(sc.Open()) }))
		_ = reg.Register(newCounts("provgate_event_streams_dropped_total",
			"Event streams the server closed, by reason: slow_consumer, credentials, expired, shutdown, write_failed.", "reason",
			sc.Dropped, "slow_consumer", "credentials", "expired", "shutdown", "write_failed"))
	}
	if s.callbacks != nil {
		cb := s.callbacks
		_ = reg.Register(newCounts("provgate_callback_attempts_total",
			"Callback requests sent, by outcome: ok, client_error (4xx), server_error (5xx), error (no answer).", "outcome",
			func() map[string]uint64 { a, _ := cb.Counts(); return a }, "ok", "client_error", "server_error", "error"))
		_ = reg.Register(newCounts("provgate_jobfail_deliveries_total",
			"Jobfail deliveries finished, by outcome: done, retry (due again later), failed (for good).", "outcome",
			func() map[string]uint64 { _, d := cb.Counts(); return d }, "done", "retry", "failed"))
		if wr, ok := cb.(workerRounder); ok {
			_ = reg.Register(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "provgate_jobfail_worker_rounds_total",
				Help: "Finished rounds of the jobfail delivery worker: each claims the due deliveries and finishes them."},
				func() float64 { return float64(wr.Rounds()) }))
		}
	}
}
