package opa

import (
	"strconv"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
)

// TestClock is the time every Rego suite runs at when provgate loads a
// policy (docs/policies.md, "Testing"): Monday 5 January 2026, 12:00 UTC.
// A suite that reads the clock (time.now_ns) thus passes or fails the same
// on every day; a test that needs another time mocks it with
// `with time.now_ns as ...`, which wins over this one.
var TestClock = time.Date(2026, time.January, 5, 12, 0, 0, 0, time.UTC)

var nowNs = ast.MustParseRef("time.now_ns")

// fixClock makes every test rule of m see now: each expression of a
// test's body gets `with time.now_ns as <now>`, unless it mocks the clock
// itself. OPA's test runner has no clock of its own to set, and with
// applies to everything the expression evaluates.
func fixClock(m *ast.Module, now time.Time) {
	if m == nil {
		return
	}
	mock := ast.MustParseExpr("true with time.now_ns as " + strconv.FormatInt(now.UnixNano(), 10)).With[0]
	for _, r := range m.Rules {
		if name := r.Head.Ref().String(); len(name) < 5 || name[:5] != "test_" {
			continue
		}
		for _, expr := range r.Body {
			switch expr.Terms.(type) {
			case *ast.SomeDecl, *ast.Every:
				continue
			}
			mocked := false
			for _, w := range expr.With {
				mocked = mocked || w.Target.Value.Compare(ast.Ref(nowNs)) == 0
			}
			if !mocked {
				w := mock.Copy()
				w.Location = expr.Location
				expr.With = append(expr.With, w)
			}
		}
	}
}
