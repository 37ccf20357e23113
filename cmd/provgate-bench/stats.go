package main

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// median of xs; NaN when xs is empty. The median rather than the mean
// because one round disturbed by another process on a shared machine must
// not move the headline figure.
func median(xs []float64) float64 {
	s := sortedNumbers(xs)
	if len(s) == 0 {
		return math.NaN()
	}
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// sortedNumbers returns the values of xs that are not NaN, sorted.
func sortedNumbers(xs []float64) []float64 {
	var s []float64
	for _, x := range xs {
		if !math.IsNaN(x) {
			s = append(s, x)
		}
	}
	slices.Sort(s)
	return s
}

// quantile returns the q-quantile (0..1) of xs by linear interpolation
// between closest ranks, ignoring NaN; NaN when nothing is left.
func quantile(xs []float64, q float64) float64 {
	s := sortedNumbers(xs)
	if len(s) == 0 {
		return math.NaN()
	}
	pos := q * float64(len(s)-1)
	lo := int(math.Floor(pos))
	hi := min(lo+1, len(s)-1)
	return s[lo] + (s[hi]-s[lo])*(pos-float64(lo))
}

// spread is the interquartile range of a figure's per-round values, shown
// beside the median so that a reader can tell a clear miss from noise.
func (f figure) spread() string {
	if len(f.Rounds) < 2 || f.Skipped != "" {
		return "-"
	}
	return fmt.Sprintf("%.2f–%.2f", quantile(f.Rounds, 0.25), quantile(f.Rounds, 0.75))
}

// percentile returns the nearest-rank p-th percentile (0 < p <= 100) of
// sorted; zero when sorted is empty.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	rank = max(1, min(rank, len(sorted)))
	return sorted[rank-1]
}

// ratio is a/b, NaN when b is zero so that a failed leg never reads as a
// huge or zero ratio.
func ratio(a, b float64) float64 {
	if b == 0 || math.IsNaN(a) || math.IsNaN(b) {
		return math.NaN()
	}
	return a / b
}

// target is a figure's goal: the value must be >= (AtLeast) or <= the
// bound, or strictly below it (Strict).
type target struct {
	AtLeast bool
	Strict  bool
	Bound   float64
}

func (t target) String() string {
	switch {
	case t.AtLeast:
		return fmt.Sprintf(">= %s", trimFloat(t.Bound))
	case t.Strict:
		return fmt.Sprintf("< %s", trimFloat(t.Bound))
	}
	return fmt.Sprintf("<= %s", trimFloat(t.Bound))
}

func (t target) met(v float64) bool {
	if math.IsNaN(v) {
		return false
	}
	switch {
	case t.AtLeast:
		return v >= t.Bound
	case t.Strict:
		return v < t.Bound
	}
	return v <= t.Bound
}

// figure is one printed result. Target is nil for figures that are
// reported without a goal (latencies, memory); Skipped, when set, replaces
// the value.
type figure struct {
	ID      string
	Name    string
	Value   float64
	Unit    string // "" for a ratio
	Target  *target
	Skipped string
	Rounds  []float64 // the per-round values the median was taken of
	Note    string    // one line on how the value is defined
}

func (f figure) valueString() string {
	if f.Skipped != "" {
		return "skipped: " + f.Skipped
	}
	if math.IsNaN(f.Value) {
		return "n/a"
	}
	switch f.Unit {
	case "":
		return fmt.Sprintf("%.2f", f.Value)
	case "ms":
		return fmt.Sprintf("%.2f ms", f.Value)
	case "MiB":
		return fmt.Sprintf("%.1f MiB", f.Value)
	case "count":
		return fmt.Sprintf("%.0f", f.Value)
	default:
		return fmt.Sprintf("%s %s", trimFloat(f.Value), f.Unit)
	}
}

func (f figure) targetString() string {
	if f.Target == nil {
		return "reported"
	}
	return f.Target.String()
}

// status is "met", "NOT met", "skipped" or "" (no target).
func (f figure) status() string {
	switch {
	case f.Skipped != "":
		return "skipped"
	case f.Target == nil:
		return ""
	case f.Target.met(f.Value):
		return "met"
	default:
		return "NOT met"
	}
}

// line is the figure as printed on stdout: name: value (target: ...) [met].
func (f figure) line() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s. %s: %s (target: %s)", f.ID, f.Name, f.valueString(), f.targetString())
	if s := f.status(); s != "" && s != "skipped" {
		fmt.Fprintf(&b, " [%s]", s)
	}
	return b.String()
}

// trimFloat prints v with at most two decimals and no trailing zeros.
func trimFloat(v float64) string {
	s := fmt.Sprintf("%.2f", v)
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

// ms converts d to fractional milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
