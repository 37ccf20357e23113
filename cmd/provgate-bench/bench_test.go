package main

import (
	"io"
	"math"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

func TestMedian(t *testing.T) {
	tests := []struct {
		name string
		in   []float64
		want float64
	}{
		{"odd", []float64{3, 1, 2}, 2},
		{"even", []float64{4, 1, 3, 2}, 2.5},
		{"one", []float64{7}, 7},
		{"NaN ignored", []float64{math.NaN(), 1, 3}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := median(tt.in); got != tt.want {
				t.Errorf("median(%v) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
	if got := median(nil); !math.IsNaN(got) {
		t.Errorf("median(nil) = %v, want NaN", got)
	}
}

func TestQuantile(t *testing.T) {
	xs := []float64{5, 1, 4, 2, 3}
	tests := []struct{ q, want float64 }{{0, 1}, {0.25, 2}, {0.5, 3}, {0.75, 4}, {1, 5}}
	for _, tt := range tests {
		if got := quantile(xs, tt.q); got != tt.want {
			t.Errorf("quantile(%v, %v) = %v, want %v", xs, tt.q, got, tt.want)
		}
	}
	if got := quantile([]float64{1, 2}, 0.25); got != 1.25 {
		t.Errorf("interpolated quantile = %v, want 1.25", got)
	}
	f := figure{Rounds: []float64{0.5, 0.9, 0.7, 0.6, 0.8}}
	if got := f.spread(); got != "0.60–0.80" {
		t.Errorf("spread = %q, want 0.60–0.80", got)
	}
}

func TestPercentile(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	tests := []struct {
		p    float64
		want time.Duration
	}{{50, 50 * time.Millisecond}, {99, 99 * time.Millisecond}, {100, 100 * time.Millisecond}, {0.1, time.Millisecond}}
	for _, tt := range tests {
		if got := percentile(d, tt.p); got != tt.want {
			t.Errorf("percentile(1..100ms, %v) = %v, want %v", tt.p, got, tt.want)
		}
	}
	if got := percentile(nil, 50); got != 0 {
		t.Errorf("percentile(nil) = %v, want 0", got)
	}
	if got := percentile([]time.Duration{5}, 99); got != 5 {
		t.Errorf("percentile of one = %v, want 5", got)
	}
}

func leg(ok int, secs float64) legResult {
	return legResult{OK: ok, Elapsed: time.Duration(secs * float64(time.Second))}
}

func TestRatios(t *testing.T) {
	a := []legResult{leg(800, 2), leg(900, 2), leg(0, 2)}
	b := []legResult{leg(1000, 2), leg(1000, 2), leg(1000, 2)}
	got := throughputRatios(a, b)
	if len(got) != 3 || got[0] != 0.8 || got[1] != 0.9 || got[2] != 0 {
		t.Errorf("throughputRatios = %v, want [0.8 0.9 0]", got)
	}
	// a costs 1.25x b per request when it completes 800 against 1000.
	if got := costRatios(a[:1], b[:1]); got[0] != 1.25 {
		t.Errorf("costRatios = %v, want [1.25]", got)
	}
	// A leg that completed nothing has no defined cost ratio.
	if got := costRatios(a[2:], b[2:]); !math.IsNaN(got[0]) {
		t.Errorf("costRatios of an empty leg = %v, want NaN", got)
	}
	if got := median(throughputRatios(a, b)); got != 0.8 {
		t.Errorf("median ratio = %v, want 0.8", got)
	}
}

func TestFigureLine(t *testing.T) {
	tests := []struct {
		name string
		f    figure
		want string
	}{
		{"met at least", figure{ID: "1", Name: "r", Value: 0.83, Target: atLeast(0.7)}, "1. r: 0.83 (target: >= 0.7) [met]"},
		{"not met at most", figure{ID: "4", Name: "r", Value: 1.214, Target: atMost(1.2)}, "4. r: 1.21 (target: <= 1.2) [NOT met]"},
		{"boundary met", figure{ID: "5a", Name: "r", Value: 3, Target: atLeast(3)}, "5a. r: 3.00 (target: >= 3) [met]"},
		{"NaN never met", figure{ID: "6", Name: "r", Value: math.NaN(), Target: atMost(1.2)}, "6. r: n/a (target: <= 1.2) [NOT met]"},
		{"no target", figure{ID: "7b", Name: "p50", Value: 1.234, Unit: "ms"}, "7b. p50: 1.23 ms (target: reported)"},
		{"memory", figure{ID: "7i", Name: "m", Value: 183.04, Unit: "MiB"}, "7i. m: 183.0 MiB (target: reported)"},
		{"count", figure{ID: "5b", Name: "d", Value: 0, Unit: "count", Target: atMost(0)}, "5b. d: 0 (target: <= 0) [met]"},
		{"skipped", figure{ID: "5a", Name: "r", Skipped: "PROVGATE_TEST_DATABASE not set", Target: atLeast(3)},
			"5a. r: skipped: PROVGATE_TEST_DATABASE not set (target: >= 3)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.f.line(); got != tt.want {
				t.Errorf("line() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestParseBench(t *testing.T) {
	out := `goos: linux
pkg: github.com/provgate/provgate/policies/opa
BenchmarkDecide/roles=10/cached=false/patch-2         	    3674	    693064 ns/op	   51941 B/op	    1210 allocs/op
BenchmarkTrivial-2   	   52062	     34425.5 ns/op	    7436 B/op	     151 allocs/op
BenchmarkNoMem 	 100	 12 ns/op
PASS
`
	got := parseBench([]byte(out))
	if len(got) != 3 {
		t.Fatalf("parsed %d lines, want 3: %+v", len(got), got)
	}
	want := benchLine{Name: "BenchmarkDecide/roles=10/cached=false/patch", N: 3674, NsOp: 693064, BOp: 51941, Allocs: 1210}
	if got[0] != want {
		t.Errorf("got %+v, want %+v", got[0], want)
	}
	if got[1].Name != "BenchmarkTrivial" || got[1].NsOp != 34425.5 || got[1].Allocs != 151 {
		t.Errorf("got %+v", got[1])
	}
	if got[2].Name != "BenchmarkNoMem" || got[2].Allocs != 0 {
		t.Errorf("got %+v", got[2])
	}
}

func TestStrictTarget(t *testing.T) {
	tg := target{Strict: true, Bound: 5}
	if tg.met(5) || !tg.met(4.99) || tg.String() != "< 5" {
		t.Errorf("strict target: met(5)=%v met(4.99)=%v %q", tg.met(5), tg.met(4.99), tg.String())
	}
}

func TestP50Ratios(t *testing.T) {
	a := []legResult{{P50: 4 * time.Millisecond}, {P50: 6 * time.Millisecond}}
	b := []legResult{{P50: 2 * time.Millisecond}, {P50: 2 * time.Millisecond}, {P50: time.Millisecond}}
	got := p50Ratios(a, b)
	if len(got) != 2 || got[0] != 2 || got[1] != 3 {
		t.Errorf("p50Ratios = %v, want [2 3]", got)
	}
}

func TestFigureOrder(t *testing.T) {
	ids := []string{"10a", "2b", "9n", "1", "10c", "2a"}
	sort.Slice(ids, func(i, j int) bool { return figureLess(ids[i], ids[j]) })
	if want := []string{"1", "2a", "2b", "9n", "10a", "10c"}; !slices.Equal(ids, want) {
		t.Errorf("ordered %v, want %v", ids, want)
	}
}

func TestParseStatus(t *testing.T) {
	hwm, rss, err := parseStatus("Name:\tprovgate\nVmPeak:\t 999 kB\nVmHWM:\t  187412 kB\nVmRSS:\t  150000 kB\n")
	if err != nil || hwm != 187412 || rss != 150000 {
		t.Errorf("parseStatus = %d, %d, %v; want 187412, 150000, nil", hwm, rss, err)
	}
	if _, _, err := parseStatus("Name:\tx\n"); err == nil {
		t.Error("parseStatus without Vm lines: want an error")
	}
}

func TestMarkdownListsEveryFigure(t *testing.T) {
	figs := append(gatewayFigures(nil, "x", false), decideFigures(nil, "x")...)
	figs = append(figs, poolFigures(nil, "PROVGATE_TEST_DATABASE not set")...)
	figs = append(figs, memFigures(nil, nil, "x", "y")...)
	figs = append(figs, procsMemFigure(nil, 16, "x"))
	figs = append(figs, eventFigures(nil, "z")...)
	figs = append(figs, scaleFigures(nil, "w")...)
	figs = append(figs, pgScaleFigures(nil, "u")...)
	figs = append(figs, grantFigures(nil, "v")...)
	r := &report{Config: config{Command: "make bench", Rounds: 5}, Figures: figs}
	md := r.markdown()
	for id := range figureSpecs {
		if !strings.Contains(md, "| "+id+" | ") {
			t.Errorf("figure %s missing from the table", id)
		}
	}
	if !strings.Contains(md, "make bench") {
		t.Error("command missing")
	}
}

// TestMarkdownSetupNotes: the setup notes of the parts that ran are listed
// in report order; a part that did not run adds none.
func TestMarkdownSetupNotes(t *testing.T) {
	r := &report{
		Gateway: &gatewayResult{setup: setup{Notes: []string{"gateway note"}}},
		Events:  &eventsResult{setup: setup{Notes: []string{"events note"}}},
		Grants:  &grantsResult{setup: setup{Notes: []string{"grants note one", "grants note two"}}},
	}
	md := r.markdown()
	want := "Setup of this run:\n\n- gateway note\n- events note\n- grants note one\n- grants note two\n\n"
	if !strings.Contains(md, want) {
		t.Errorf("markdown lacks %q:\n%s", want, md)
	}
	if md := (&report{}).markdown(); strings.Contains(md, "Setup of this run") {
		t.Error("setup section without notes")
	}
}

// TestOnlyFlag: -only names the figures whose parts run; unknown numbers
// and the other -only flags are refused.
func TestOnlyFlag(t *testing.T) {
	env := func(string) string { return "" }
	c, err := parseConfig([]string{"-only", "6, 8"}, env, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !c.wants("6") || !c.wants("8", "9") || c.wants("5") || c.wants("1", "2", "7") || c.wants("14") {
		t.Fatalf("wants: %v", c.Only)
	}
	if c, err = parseConfig(nil, env, io.Discard); err != nil || !c.wants("5") {
		t.Fatalf("without -only every part runs: %v %v", c.Only, err)
	}
	for _, args := range [][]string{{"-only", "11"}, {"-only", "6", "-scale-only"}, {"-only", "6", "-skip-decide"}} {
		if _, err := parseConfig(args, env, io.Discard); err == nil {
			t.Errorf("%v: want an error", args)
		}
	}
}

// TestChildEnv: the servers get neither the bench's PROVGATE_ settings nor
// its runtime settings, so that only figure 7k's GOMAXPROCS differs from the
// defaults; startServerEnv's additions come after and win.
func TestChildEnv(t *testing.T) {
	t.Setenv("PROVGATE_DATABASE", "postgres://elsewhere")
	t.Setenv("GOMAXPROCS", "3")
	t.Setenv("GOGC", "50")
	t.Setenv("GOMEMLIMIT", "1GiB")
	t.Setenv("BENCH_KEPT", "yes")
	env := childEnv("pw")
	joined := "\n" + strings.Join(env, "\n") + "\n"
	for _, gone := range []string{"PROVGATE_DATABASE=", "GOMAXPROCS=", "GOGC=", "GOMEMLIMIT="} {
		if strings.Contains(joined, "\n"+gone) {
			t.Errorf("%s passed on to the server", gone)
		}
	}
	for _, kept := range []string{"\nBENCH_KEPT=yes\n", "\nPROVGATE_ADMIN_PASSWORD=pw\n"} {
		if !strings.Contains(joined, kept) {
			t.Errorf("%q missing from the server's environment", strings.TrimSpace(kept))
		}
	}
}

// TestMemProcsFigure: 7k names the GOMAXPROCS it ran with and is skipped
// with the reason when it did not run.
func TestMemProcsFigure(t *testing.T) {
	f := procsMemFigure(&gatewayResult{Mem: memPeak{HWMKiB: 200 << 10, MaxRSSKiB: 190 << 10}}, 16, "")
	if f.Value != 200 || !strings.Contains(f.Name, "GOMAXPROCS=16") || !strings.Contains(f.Note, "GOMAXPROCS=16") || f.status() != "met" {
		t.Errorf("7k = %+v (status %s)", f, f.status())
	}
	if f := procsMemFigure(&gatewayResult{Mem: memPeak{HWMKiB: 310 << 10}}, 8, ""); !strings.Contains(f.Name, "GOMAXPROCS=8") || f.status() == "met" {
		t.Errorf("7k at 8 procs over the bound = %+v (status %s)", f, f.status())
	}
	if f := procsMemFigure(nil, 16, "-mem-procs 0"); f.Skipped != "-mem-procs 0" {
		t.Errorf("skipped 7k = %+v", f)
	}
	if _, err := parseConfig([]string{"-mem-procs", "-1"}, func(string) string { return "" }, io.Discard); err == nil {
		t.Error("-mem-procs -1: want an error")
	}
}
