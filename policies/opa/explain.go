package opa

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/open-policy-agent/opa/v1/topdown/builtins"

	"github.com/provgate/provgate/backend"
	"github.com/provgate/provgate/policies"
)

// explainQuery evaluates the decision and its trail in one query, so that
// both read the same input, data snapshot and clock, and the trail's rules
// share the decision's evaluations (docs/design.md §9.8).
const explainQuery = "decision = " + DecisionPath + "; trail = " + policies.ExplainPath

// explanationQuery is explainQuery for a policy defining the explanation
// (policies.ExplanationPath): a request the decision allowed in its one
// pass has its trail written out in Go from a few values, never built in
// Rego (explanationFrom).
const explanationQuery = "decision = " + DecisionPath + "; trail = " + policies.ExplanationPath

// LicensedPath is the license check whose answer is the license step of a
// trail written from an explanation's pass values.
const LicensedPath = "data.provgate.authz.licensed"

// licensedAnswer is the answer of a policy's licensed rule for one
// license value (Engine.explainLicensed).
type licensedAnswer struct {
	policy   *policy
	license  ast.Value // nil: no license in the data
	licensed bool
}

// Explain evaluates the decision for in together with its trail, without
// the cache and without a decision log line: it answers "what would this
// request get, and why", not a request that happened. A policy without
// the explain entry point gives the decision alone (Trail nil).
func (e *Engine) Explain(ctx context.Context, in policies.Input) (policies.Explanation, error) {
	return e.explain(ctx, in, policies.Replay{})
}

// ExplainReplay is Explain for a logged input, evaluated as it was logged
// (at its time, with its non-deterministic built-ins' answers).
func (e *Engine) ExplainReplay(ctx context.Context, in policies.Input, r policies.Replay) (policies.Explanation, error) {
	return e.explain(ctx, in, r)
}

func (e *Engine) explain(ctx context.Context, in policies.Input, r policies.Replay) (policies.Explanation, error) {
	p := e.policy.Load()
	out := policies.Explanation{DecisionID: newDecisionID(), Revision: p.revision}
	value, err := inputValue(in)
	if err != nil {
		return out, internal("encode policy input", err)
	}
	opts := []rego.EvalOption{rego.EvalParsedInput(value)}
	switch {
	case r.At != 0:
		opts = append(opts, rego.EvalTime(time.Unix(0, r.At)))
	case e.now != nil:
		opts = append(opts, rego.EvalTime(e.now()))
	}
	if len(r.NDBuiltins) > 0 {
		var nd builtins.NDBCache
		if err := json.Unmarshal(r.NDBuiltins, &nd); err != nil {
			return out, internal("read logged nd_builtin_cache", err)
		}
		opts = append(opts, rego.EvalNDBuiltinCache(nd))
	}
	if p.explain == nil {
		rs, err := p.decision.Eval(ctx, opts...)
		if err != nil {
			return out, internal("evaluate policy", err)
		}
		out.Decision, err = decisionFrom(rs)
		return out, err
	}
	// The results come back as OPA's terms: the decision is converted as
	// Decide converts it, the trail read without a JSON round trip.
	vc := getFlatCache()
	defer putFlatCache(vc)
	opts = append(opts, rego.EvalGenerateJSON(asTerm), rego.EvalVirtualCache(vc))
	var txn storage.Transaction
	if p.explainPass {
		// One transaction for the explanation and its license check, so
		// that both read the same data.
		if txn, err = e.store.NewTransaction(ctx); err != nil {
			return out, internal("evaluate policy", err)
		}
		defer e.store.Abort(ctx, txn)
		opts = append(opts, rego.EvalTransaction(txn))
	}
	rs, err := p.explain.Eval(ctx, opts...)
	if err != nil {
		return out, internal("evaluate policy", err)
	}
	if len(rs) != 1 {
		return out, internal("evaluate policy", errUndefined)
	}
	dt, ok := rs[0].Bindings["decision"].(*ast.Term)
	if !ok {
		return out, internal("evaluate policy", errUndefined)
	}
	dv, err := ast.JSON(dt.Value)
	if err != nil {
		return out, internal("read decision", err)
	}
	if out.Decision, err = decisionValue(dv); err != nil {
		return out, err
	}
	if p.explainPass {
		out.Trail, err = explanationFrom(rs[0].Bindings["trail"], in, func() (bool, error) {
			return e.explainLicensed(ctx, p, txn, opts)
		})
	} else {
		out.Trail, err = trailFrom(rs[0].Bindings["trail"])
	}
	if err != nil {
		return out, internal("read explain trail", err)
	}
	return out, nil
}

// explainLicensed answers the policy's license check (LicensedPath) in
// txn, for a trail written from an explanation's pass values. A check
// that reads the license alone (policy.licensedByLicense) is evaluated
// once per license and policy: the answer is kept with the license value
// it was evaluated for and reused while txn reads the same value
// (docs/design.md §9.8). Any other is evaluated with the explanation's
// options (its input, clock and transaction).
func (e *Engine) explainLicensed(ctx context.Context, p *policy, txn storage.Transaction, opts []rego.EvalOption) (bool, error) {
	var license ast.Value
	if p.licensedByLicense {
		v, err := e.store.Read(ctx, txn, storage.Path{"provgate", "license"})
		switch {
		case storage.IsNotFound(err):
		case err != nil:
			return false, err
		default:
			if license, err = ast.InterfaceToValue(v); err != nil {
				return false, err
			}
		}
		if a := e.licensed.Load(); a != nil && a.policy == p && sameValue(a.license, license) {
			return a.licensed, nil
		}
		opts = []rego.EvalOption{rego.EvalTransaction(txn)}
	}
	rs, err := p.licensed.Eval(ctx, opts...)
	if err != nil {
		return false, err
	}
	licensed := false
	if len(rs) == 1 && len(rs[0].Expressions) == 1 {
		// A term where the explanation's options ask for terms.
		switch v := rs[0].Expressions[0].Value.(type) {
		case bool:
			licensed = v
		case *ast.Term:
			licensed = v.Value.Compare(ast.Boolean(true)) == 0
		}
	}
	if p.licensedByLicense {
		e.licensed.Store(&licensedAnswer{policy: p, license: license, licensed: licensed})
	}
	return licensed, nil
}

// sameValue: a and b are the same value (nil for none).
func sameValue(a, b ast.Value) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	if x, ok := a.(ast.Object); ok {
		if y, ok := b.(ast.Object); ok && x == y {
			return true
		}
	}
	return a.Compare(b) == 0
}

// RoleDiffPath is the policy's role diff function (policies/explain.rego).
const RoleDiffPath = "data.provgate.explain.role_diff"

// RoleDiff returns the atomic claims of a that no claim of b covers and the
// other way round, by the policy's own containment. A policy without the
// function answers an error.
func (e *Engine) RoleDiff(ctx context.Context, a, b []backend.Claim) (onlyA, onlyB []string, err error) {
	p := e.policy.Load()
	if p.roleDiff == nil {
		return nil, nil, internal("role diff", fmt.Errorf("the served policy defines no %s", RoleDiffPath))
	}
	in := map[string]any{"a": claimList(a), "b": claimList(b)}
	v, err := evalOne(ctx, p.roleDiff, "role diff", rego.EvalInput(in))
	if err != nil {
		return nil, nil, err
	}
	var out struct {
		OnlyA []string `json:"only_a"`
		OnlyB []string `json:"only_b"`
	}
	raw, err := json.Marshal(v)
	if err == nil {
		err = json.Unmarshal(raw, &out)
	}
	if err != nil {
		return nil, nil, internal("role diff", err)
	}
	return out.OnlyA, out.OnlyB, nil
}

func claimList(cs []backend.Claim) []any {
	out := make([]any, len(cs))
	for i, c := range cs {
		out[i] = map[string]any{"scope": c.Scope, "action": c.Action, "specific": c.Specific}
	}
	return out
}
