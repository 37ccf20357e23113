package main

import (
	"fmt"
	"math"
	"runtime"
	"strings"
	"time"
)

func atLeast(v float64) *target { return &target{AtLeast: true, Bound: v} }
func atMost(v float64) *target  { return &target{Bound: v} }

// figureSpecs names every figure once, with its target (from the issue),
// so that a part that could not run still prints what it would measure.
var figureSpecs = map[string]figure{
	"1":   {Name: "authorized GET (Bearer) / unauthenticated route, throughput", Target: atLeast(0.7)},
	"2a":  {Name: "Basic (warm cache) / Bearer, throughput", Target: atLeast(0.8)},
	"2b":  {Name: "Bearer under 16 wrong-Basic clients / Bearer alone, throughput", Target: atLeast(0.5)},
	"3a":  {Name: "decision / trivial policy, ns/op, 10 roles+tenants", Target: atMost(4)},
	"3b":  {Name: "decision / trivial policy, ns/op, 10,000 roles+tenants", Target: atMost(4)},
	"3c":  {Name: "decision / trivial policy, allocs/op, 10 roles+tenants", Target: atMost(2)},
	"3d":  {Name: "decision / trivial policy, allocs/op, 10,000 roles+tenants", Target: atMost(2)},
	"3e":  {Name: "decision ns/op, 10,000 / 10 roles+tenants (flatness)", Target: atMost(1.2)},
	"3f":  {Name: "decision allocs/op, 10,000 / 10 roles+tenants (flatness)", Target: atMost(1.2)},
	"3g":  {Name: "decision with a one-rule extension / embedded policy alone, ns/op", Target: atMost(1.2)},
	"4":   {Name: "tenant-restricted list / unrestricted list, time per request", Target: atMost(1.2)},
	"5a":  {Name: "pool allocations/s, 8 callers / 1 caller (PostgreSQL)", Target: atLeast(3)},
	"5b":  {Name: "duplicate allocations (PostgreSQL)", Target: atMost(0), Unit: "count"},
	"6":   {Name: "callbackDo / direct net/http call, time per request", Target: atMost(10)},
	"7a":  {Name: "p50 latency, unauthenticated route", Unit: "ms"},
	"7b":  {Name: "p50 latency, Bearer", Unit: "ms"},
	"7c":  {Name: "p50 latency, Basic (warm cache)", Unit: "ms"},
	"7d":  {Name: "p50 latency, Bearer under wrong-Basic load", Unit: "ms"},
	"7e":  {Name: "p99 latency, unauthenticated route", Unit: "ms"},
	"7f":  {Name: "p99 latency, Bearer", Unit: "ms"},
	"7g":  {Name: "p99 latency, Basic (warm cache)", Unit: "ms"},
	"7h":  {Name: "p99 latency, Bearer under wrong-Basic load", Unit: "ms"},
	"7i":  {Name: "peak memory of the SQLite server (VmHWM)", Unit: "MiB"},
	"7j":  {Name: "peak memory of the PostgreSQL server (VmHWM)", Unit: "MiB"},
	"7k":  {Name: "peak memory of the SQLite server under 7i's load, run with GOMAXPROCS=16 on this machine's CPUs (VmHWM)", Unit: "MiB", Target: &target{Bound: 300, Strict: true}},
	"8a":  {Name: "events delivered per second to 100 subscribers, each authorized per event", Unit: "events/s"},
	"8b":  {Name: "p50 latency, write to event at a subscriber (100 subscribers)", Unit: "ms"},
	"8c":  {Name: "p99 latency, write to event at a subscriber (100 subscribers)", Unit: "ms"},
	"8d":  {Name: "write p50 latency with 100 subscribers / with none", Target: atMost(1.5)},
	"9a":  {Name: "role create p50, large fleet / small", Target: atMost(1.5)},
	"9b":  {Name: "role patch p50, large fleet / small", Target: atMost(1.5)},
	"9c":  {Name: "user create p50, large fleet / small", Target: atMost(1.5)},
	"9d":  {Name: "user patch p50, large fleet / small", Target: atMost(1.5)},
	"9e":  {Name: "tenant create p50, large fleet / small", Target: atMost(1.5)},
	"9f":  {Name: "tenant patch p50, large fleet / small", Target: atMost(1.5)},
	"9g":  {Name: "authorized GET of one object / /healthz, throughput (large fleet)", Target: atLeast(0.5)},
	"9h":  {Name: "tenant-restricted list / unrestricted list, time per request (large fleet)", Target: atMost(1.2)},
	"9o":  {Name: "tenant-restricted list / unrestricted list, time per request (large fleet, tenant of 10,000 machines)", Target: atMost(1.2)},
	"9i":  {Name: "callbackDo minus authorized GET of the machine / direct call, time per request", Target: atMost(1.5)},
	"9j":  {Name: "start-up with the large fleet", Unit: "s", Target: &target{Bound: 5, Strict: true}},
	"9k":  {Name: "peak memory of the large-fleet server (VmHWM)", Unit: "MiB", Target: &target{Bound: 500, Strict: true}},
	"9l":  {Name: "filtered list of 50 p50, large fleet / small", Target: atMost(3)},
	"9m":  {Name: "pool status p50 (100-machine pool), large fleet / small", Target: atMost(3)},
	"9n":  {Name: "allocate and release 100 machines p50, large fleet's default pool / small fleet's pool", Target: atMost(1.5)},
	"10a": {Name: "p50 latency, role create with 10 claims (superuser)", Unit: "ms"},
	"10b": {Name: "p50 latency, user create with 5 roles (superuser)", Unit: "ms"},
	"10c": {Name: "role create with 10 claims p50, this build / -baseline-server build", Target: atMost(1.2)},
	"10d": {Name: "user create with 5 roles p50, this build / -baseline-server build", Target: atMost(1.2)},
	"13a": {Name: "list of 50 machines / authorized GET of one machine, throughput", Target: atLeast(0.1)},
	"13b": {Name: "list of 50 machines with slim=Params / authorized GET of one machine, throughput", Target: atLeast(0.1)},
	"13c": {Name: "filtered list of 50 machines / authorized GET of one machine, throughput", Target: atLeast(0.1)},
	"14a": {Name: "tenant-restricted list / unrestricted list, time per request (PostgreSQL, large fleet, tenant of 100)", Target: atMost(1.2)},
	"14b": {Name: "tenant-restricted list / unrestricted list, time per request (PostgreSQL, large fleet, tenant of 10,000)", Target: atMost(1.2)},
	"14c": {Name: "start-up with the start-up fleet (PostgreSQL)", Unit: "s", Target: &target{Bound: 5, Strict: true}},
	"14d": {Name: "peak memory of the start-up-fleet server (VmHWM, PostgreSQL)", Unit: "MiB", Target: &target{Bound: 1024, Strict: true}},
	"12a": {Name: "explain (decision and trail) / uncached decision, ns/op", Target: atMost(2)},
	"12b": {Name: "who can get one machine over the large fleet's users, p50", Unit: "ms", Target: atMost(200)},
	"12c": {Name: "a user's matrix, p50 (large fleet)", Unit: "ms", Target: atMost(100)},
	"12d": {Name: "AuthZEN evaluation / authorized GET, throughput", Target: atLeast(0.7)},
}

// spec returns the figure id with its name, unit and target filled in.
func spec(id string) figure {
	f, ok := figureSpecs[id]
	if !ok {
		panic("unknown figure " + id)
	}
	f.ID = id
	return f
}

func skippedFigures(why string, ids ...string) []figure {
	out := make([]figure, 0, len(ids))
	for _, id := range ids {
		f := spec(id)
		f.Skipped = why
		out = append(out, f)
	}
	return out
}

// ratioFigure is a figure that is the median over rounds of one leg against
// another: throughputRatios, costRatios or p50Ratios of first and second.
type ratioFigure struct {
	id            string
	of            func(first, second []legResult) []float64
	first, second []legResult
	note          string
}

func (r ratioFigure) figure() figure { return fromRounds(r.id, r.of(r.first, r.second), r.note) }

// fromRounds is the median of per-round values.
func fromRounds(id string, rounds []float64, note string) figure {
	f := spec(id)
	f.Value, f.Rounds, f.Note = median(rounds), rounds, note
	return f
}

var gatewayIDs = []string{"1", "2a", "2b", "4", "6", "7a", "7b", "7c", "7d", "7e", "7f", "7g", "7h", "13a", "13b", "13c"}

// gatewayFigures computes figures 1, 2, 4, 6 and the latencies of 7;
// listOnly: only the list legs ran (figures 4 and 13).
func gatewayFigures(g *gatewayResult, skipped string, listOnly bool) []figure {
	if g == nil {
		return skippedFigures(skipped, gatewayIDs...)
	}
	if listOnly {
		all := gatewayFigures(g, skipped, false)
		out := all[:0]
		for _, f := range all {
			switch f.ID {
			case "4", "13a", "13b", "13c":
			default:
				f = skippedFigures("-list-only", f.ID)[0]
			}
			out = append(out, f)
		}
		return out
	}
	a, l, c := g.Auth, g.List, g.Callback
	var figs []figure
	for _, r := range []ratioFigure{
		{"1", throughputRatios, a[legBearer], a[legBenchRoute], "GET /api/v3/pools/bench as a tenant user with a non-superuser role (Bearer) vs GET /bench/pools/bench (no auth, same store read)"},
		{"2a", throughputRatios, a[legBasic], a[legBearer], "the same GET with the same user's Basic credentials (verified once, then cached) vs its Bearer token"},
		{"2b", throughputRatios, a[legAttacked], a[legBearer], "Bearer clients' throughput while 16 more clients send Basic with a new wrong password each time (refused: 403, or 429 once over the failed-login limit), vs Bearer alone"},
		{"4", costRatios, l[legListTenant], l[legListAll], "GET /api/v3/machines?limit=50 by a tenant user who sees 1% of the machines vs a user outside any tenant; both get 50 rows"},
		{"13a", throughputRatios, l[legListAll], l[legGetOne], "GET /api/v3/machines?limit=50 vs GET /api/v3/machines/<uuid>, both by the user outside any tenant"},
		{"13b", throughputRatios, l[legListSlim], l[legGetOne], "GET /api/v3/machines?limit=50&slim=Params vs the same GET of one machine"},
		{"13c", throughputRatios, l[legListFilter], l[legGetOne], "GET /api/v3/machines?limit=50&Pool=bench (an indexed filter every machine matches) vs the same GET of one machine"},
		{"6", costRatios, c[legCallback], c[legDirect], "POST .../actions/callbackDo (gateway, auth, policy, machine load, render, outbound POST, attempt record) vs POSTing the same body to the same receiver directly"},
	} {
		figs = append(figs, r.figure())
	}
	latency := func(id, leg string, pick func(legResult) time.Duration) figure {
		f := spec(id)
		f.Value, f.Note = medianDuration(a[leg], pick), "median over rounds of each leg's percentile"
		return f
	}
	p50 := func(r legResult) time.Duration { return r.P50 }
	p99 := func(r legResult) time.Duration { return r.P99 }
	for i, leg := range []string{legBenchRoute, legBearer, legBasic, legAttacked} {
		figs = append(figs, latency(gatewayIDs[5+i], leg, p50), latency(gatewayIDs[9+i], leg, p99))
	}
	return figs
}

// poolFigures computes figure 5.
func poolFigures(p *poolResult, skipped string) []figure {
	if p == nil {
		return skippedFigures(skipped, "5a", "5b")
	}
	dup := spec("5b")
	dup.Value = float64(p.Duplicates + p.Lost)
	dup.Note = fmt.Sprintf("%d allocations checked: machines handed out twice between two releases (%d) plus allocations the store does not show as InUse (%d)",
		p.Allocated, p.Duplicates, p.Lost)
	return []figure{
		fromRounds("5a", throughputRatios(p.Legs[legAllocN], p.Legs[legAlloc1]),
			"POST /api/v3/pools/alloc/allocateMachines {pool/count: 1} by 8 concurrent callers vs 1, every machine released before each leg"),
		dup,
	}
}

// decideFigures computes figure 3.
func decideFigures(d *decideResult, skipped string) []figure {
	if d == nil {
		return skippedFigures(skipped, "3a", "3b", "3c", "3d", "3e", "3f", "3g", "12a")
	}
	type metric func(map[string]benchLine) float64
	ns := func(name string) metric { return func(r map[string]benchLine) float64 { return r[name].NsOp } }
	allocs := func(name string) metric { return func(r map[string]benchLine) float64 { return r[name].Allocs } }
	div := func(a, b metric) func(map[string]benchLine) float64 {
		return func(r map[string]benchLine) float64 { return ratio(a(r), b(r)) }
	}
	explain := fromRounds("12a", d.perRound(div(ns(explainOn), ns(explainOff))),
		"Engine.Explain (decision and explanation in one query, the trail written from the explanation's values) vs Engine.Decide uncached, the same allowed PATCH input, 10 roles+tenants, in the same benchmark binary and round")
	if d.ExplainOnly {
		return append(skippedFigures("-explorer-only", "3a", "3b", "3c", "3d", "3e", "3f", "3g"), explain)
	}
	note := "uncached decision (tenant visibility, role containment, license) for a tenant user's PATCH of a machine param, vs an allow-everything policy through the same prepared evaluation"
	return []figure{
		fromRounds("3a", d.perRound(div(ns(decideSmall), ns(trivialName))), note),
		fromRounds("3b", d.perRound(div(ns(decideLarge), ns(trivialName))), note),
		fromRounds("3c", d.perRound(div(allocs(decideSmall), allocs(trivialName))), note),
		fromRounds("3d", d.perRound(div(allocs(decideLarge), allocs(trivialName))), note),
		fromRounds("3e", d.perRound(div(ns(decideLarge), ns(decideSmall))), "both sizes in the same round and binary"),
		fromRounds("3f", d.perRound(div(allocs(decideLarge), allocs(decideSmall))), "both sizes in the same round and binary"),
		fromRounds("3g", d.perRound(div(ns(extOn), ns(extOff))),
			"uncached allowed PATCH, 10 roles+tenants; the extension (a change freeze read from data.provgate_ext) is evaluated and does not veto"),
		explain,
	}
}

// memFigures reports the peak memory of figure 7.
func memFigures(g *gatewayResult, p *poolResult, gwSkipped, pgSkipped string) []figure {
	mib := func(kib int64) float64 {
		if kib == 0 {
			return math.NaN()
		}
		return float64(kib) / 1024
	}
	peak := func(id string, m memPeak, note string) figure {
		f := spec(id)
		f.Value = mib(m.HWMKiB)
		f.Note = fmt.Sprintf("%slargest sampled VmRSS %.1f MiB", note, mib(m.MaxRSSKiB))
		return f
	}
	var out []figure
	if g != nil {
		out = append(out, peak("7i", g.Mem, "whole run of that server, loading the data set included; "))
	} else {
		out = append(out, skippedFigures(gwSkipped, "7i")...)
	}
	if p != nil {
		out = append(out, peak("7j", p.Mem, ""))
	} else {
		out = append(out, skippedFigures(pgSkipped, "7j")...)
	}
	return out
}

// procsMemFigure is figure 7k: the peak memory of the SQLite server run
// through figure 7i's data set and legs with GOMAXPROCS=procs. Only the
// runtime's core count is simulated: every pool, cache and worker count
// sized by GOMAXPROCS, the per-P runtime caches and the collector's
// workers are as on that many cores, while the CPU time is this machine's.
func procsMemFigure(g *gatewayResult, procs int, skipped string) figure {
	f := spec("7k")
	if g == nil {
		f.Skipped = skipped
		return f
	}
	if procs != 16 {
		f.Name = strings.Replace(f.Name, "GOMAXPROCS=16", fmt.Sprintf("GOMAXPROCS=%d", procs), 1)
	}
	f.Value = float64(g.Mem.HWMKiB) / 1024
	if g.Mem.HWMKiB == 0 {
		f.Value = math.NaN()
	}
	f.Note = fmt.Sprintf("a second SQLite server, started after 7i's stopped, with GOMAXPROCS=%d set in its environment on this machine's %d CPUs (a simulated core count), "+
		"through the same data set and legs as 7i; whole run of that server; largest sampled VmRSS %.1f MiB", procs, runtime.NumCPU(), float64(g.Mem.MaxRSSKiB)/1024)
	return f
}
