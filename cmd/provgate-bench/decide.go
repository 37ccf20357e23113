package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// The decision micro-benchmarks live beside the engine in policies/opa
// (bench_test.go). The headline case is an uncached decision (every
// iteration a full evaluation) for a user whose tenant and roles must both
// be consulted; the cached case is reported for reference.
const (
	decidePkg      = "./policies/opa/"
	decidePattern  = "^BenchmarkDecide$/^roles=(10|10000)$/^cached=(false|true)$/^patch$"
	trivialPattern = "^BenchmarkTrivial$"
	decideSmall    = "BenchmarkDecide/roles=10/cached=false/patch"
	decideLarge    = "BenchmarkDecide/roles=10000/cached=false/patch"
	cachedSmall    = "BenchmarkDecide/roles=10/cached=true/patch"
	cachedLarge    = "BenchmarkDecide/roles=10000/cached=true/patch"
	trivialName    = "BenchmarkTrivial"
	extPattern     = "^BenchmarkDecideExtension$"
	extOff         = "BenchmarkDecideExtension/ext=false"
	extOn          = "BenchmarkDecideExtension/ext=true"
	explainPattern = "^BenchmarkExplain$"
	explainOff     = "BenchmarkExplain/explain=false"
	explainOn      = "BenchmarkExplain/explain=true"
)

// benchLine is one parsed `go test -bench` result.
type benchLine struct {
	Name   string
	N      int
	NsOp   float64
	BOp    float64
	Allocs float64
}

var benchRE = regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?\s+(\d+)\s+([\d.]+) ns/op(?:\s+([\d.]+) B/op)?(?:\s+([\d.]+) allocs/op)?`)

// parseBench reads the result lines of go test -bench output.
func parseBench(out []byte) []benchLine {
	var res []benchLine
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		m := benchRE.FindStringSubmatch(strings.TrimSpace(sc.Text()))
		if m == nil {
			continue
		}
		l := benchLine{Name: m[1]}
		l.N, _ = strconv.Atoi(m[2])
		l.NsOp, _ = strconv.ParseFloat(m[3], 64)
		if m[4] != "" {
			l.BOp, _ = strconv.ParseFloat(m[4], 64)
		}
		if m[5] != "" {
			l.Allocs, _ = strconv.ParseFloat(m[5], 64)
		}
		res = append(res, l)
	}
	return res
}

// decideResult is figure 3: every round's results by benchmark name.
type decideResult struct {
	Command string
	Rounds  []map[string]benchLine
	// ExplainOnly: only the explain benchmark ran (-explorer-only).
	ExplainOnly bool
}

// runDecide compiles the policy engine's test binary once, then runs the
// decision benchmarks and the trivial-policy benchmark in turn, rounds
// times (-decide-rounds): A B A B, like the HTTP legs, rather than -count n, which would
// repeat each benchmark back to back.
func runDecide(ctx context.Context, cfg config, tmp string, logf func(string, ...any)) (*decideResult, error) {
	bin := filepath.Join(tmp, "opa.test")
	build := exec.CommandContext(ctx, "go", "test", "-c", "-o", bin, decidePkg)
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go test -c %s: %v: %s", decidePkg, err, truncate(out, 2000))
	}
	args := func(pattern string) []string {
		return []string{"-test.run", "^$", "-test.bench", pattern, "-test.benchmem", "-test.benchtime", cfg.DecideBenchtime.String()}
	}
	res := &decideResult{Command: fmt.Sprintf("go test -c -o opa.test %s; then per round: opa.test %s; opa.test %s; opa.test %s; opa.test %s",
		decidePkg, shellJoin(args(decidePattern)), shellJoin(args(trivialPattern)), shellJoin(args(extPattern)), shellJoin(args(explainPattern)))}
	patterns := []string{decidePattern, trivialPattern, extPattern, explainPattern}
	names := []string{decideSmall, decideLarge, trivialName, extOff, extOn, explainOff, explainOn}
	if cfg.ExplorerOnly {
		res.ExplainOnly = true
		res.Command = fmt.Sprintf("go test -c -o opa.test %s; then per round: opa.test %s", decidePkg, shellJoin(args(explainPattern)))
		patterns, names = []string{explainPattern}, []string{explainOff, explainOn}
	}
	for round := 1; round <= cfg.DecideRounds; round++ {
		got := map[string]benchLine{}
		for _, pattern := range patterns {
			t0 := time.Now()
			c := exec.CommandContext(ctx, bin, args(pattern)...)
			c.Dir = decidePkg
			out, err := c.CombinedOutput()
			if err != nil {
				return nil, fmt.Errorf("%s %s: %v: %s", bin, pattern, err, truncate(out, 2000))
			}
			for _, l := range parseBench(out) {
				got[l.Name] = l
			}
			logf("decide round %d %s: %.1f s", round, pattern, time.Since(t0).Seconds())
		}
		for _, name := range names {
			if _, ok := got[name]; !ok {
				return nil, fmt.Errorf("benchmark %s missing from the output of round %d", name, round)
			}
		}
		res.Rounds = append(res.Rounds, got)
	}
	return res, nil
}

// perRound returns f of every round.
func (d *decideResult) perRound(f func(map[string]benchLine) float64) []float64 {
	out := make([]float64, 0, len(d.Rounds))
	for _, r := range d.Rounds {
		out = append(out, f(r))
	}
	return out
}

func shellJoin(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		if strings.ContainsAny(a, "^$|()*? ") {
			a = "'" + a + "'"
		}
		q[i] = a
	}
	return strings.Join(q, " ")
}
