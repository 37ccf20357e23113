package opa

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"

	"github.com/provgate/provgate/policies"
)

// The explain trail is read straight from the policy's value, without a
// JSON round trip (docs/design.md §9.8): the query hands back OPA's terms
// (rego.EvalGenerateJSON returning the term itself) and trailFrom reads the
// fields of policies.Trail. A field of the wrong type is an error (the
// trail is malformed); an absent one reads as its zero value, as JSON
// decoding would.

// asTerm makes an evaluation return its results as OPA terms.
func asTerm(t *ast.Term, _ *rego.EvalContext) (any, error) { return t, nil }

// trailFrom reads a trail term.
func trailFrom(v any) (*policies.Trail, error) {
	t, ok := v.(*ast.Term)
	if !ok {
		return nil, fmt.Errorf("trail is %T, not a term", v)
	}
	return trailValue(t.Value)
}

// explanationFrom reads an explanation term (policies.ExplanationPath) of
// the input in: {"trail": trail} is read as trailFrom reads a trail;
// {"pass": values}, for a request the decision allowed in its one pass, is
// written out as the policy's trail writes it for such a request (the
// first body of data.provgate.explain.trail): the user's tenants, the
// license as licensed answers it (Engine.explainLicensed; with no
// failures: no claim needs one), the one required claim,
// held and licensed, with what covers it (the self claims, the role
// claims, the direct claims, as the values name them), and no veto. Only
// the values are worked out in Rego; TestExplainTrailIsTheStepsTrail
// compares the trail written here with the step rules' (docs/design.md
// §9.8).
func explanationFrom(v any, in policies.Input, licensed func() (bool, error)) (*policies.Trail, error) {
	t, ok := v.(*ast.Term)
	if !ok {
		return nil, fmt.Errorf("explanation is %T, not a term", v)
	}
	r := &astReader{}
	o := r.object(t.Value, "explanation")
	if tr := r.field(o, "trail"); tr != nil {
		return trailValue(tr)
	}
	pass := r.object(r.field(o, "pass"), "explanation.pass")
	if r.err != nil {
		return nil, fmt.Errorf("malformed explanation: %w", r.err)
	}
	if pass == nil {
		return nil, errors.New("malformed explanation: neither a trail nor the values of one")
	}
	if len(in.Required) != 1 {
		return nil, fmt.Errorf("malformed explanation: the values of a one-claim trail for %d claims", len(in.Required))
	}
	covers := []policies.Cover{}
	if r.any(r.field(pass, "self"), "pass.self") {
		covers = append(covers, policies.Cover{Source: "self"})
	}
	r.each(r.field(pass, "roles"), "pass.roles", func(v ast.Value) {
		a, ok := v.(*ast.Array)
		if !ok || a.Len() != 2 {
			r.fail("pass.roles[]", v, "a [role, claim] pair")
			return
		}
		covers = append(covers, policies.Cover{Source: "role", Role: r.string(a.Elem(0).Value, "pass.roles[].role"),
			Claim: r.claimText(a.Elem(1).Value, "pass.roles[].claim")})
	})
	r.each(r.field(pass, "claims"), "pass.claims", func(v ast.Value) {
		covers = append(covers, policies.Cover{Source: "claim", Claim: r.claimText(v, "pass.claims[]")})
	})
	c := in.Required[0]
	lic, err := licensed()
	if err != nil {
		return nil, fmt.Errorf("license check: %w", err)
	}
	out := &policies.Trail{
		Tenant:  policies.TenantStep{Tenants: r.strings(r.field(pass, "tenants"), "pass.tenants"), HiddenBy: []string{}},
		License: policies.LicenseStep{Licensed: lic, Failures: []string{}},
		Claims: []policies.ClaimStep{{
			Claim:       policies.ClaimText{Scope: c.Scope, Action: c.Action, Specific: c.Specific},
			Held:        true,
			Licensed:    true,
			CoveredBy:   sortCovers(covers),
			TokenRoles:  policies.TokenRolesStep{CoveredBy: []string{}},
			Restriction: policies.RestrictionStep{Covered: true},
			GrantedBy:   []string{},
		}},
		VetoesConsulted: true,
		Vetoes:          []policies.Veto{},
	}
	if r.err != nil {
		return nil, fmt.Errorf("malformed explanation: %w", r.err)
	}
	return out, nil
}

// trailValue reads a trail value.
func trailValue(v ast.Value) (*policies.Trail, error) {
	r := &astReader{}
	o := r.object(v, "trail")
	var out policies.Trail
	if ten := r.object(r.field(o, "tenant"), "tenant"); ten != nil {
		out.Tenant = policies.TenantStep{
			Tenants:      r.strings(r.field(ten, "tenants"), "tenant.tenants"),
			Hidden:       r.bool(r.field(ten, "hidden"), "tenant.hidden"),
			HiddenBy:     r.strings(r.field(ten, "hidden_by"), "tenant.hidden_by"),
			OtherMachine: r.bool(r.field(ten, "other_machine"), "tenant.other_machine"),
		}
	}
	if lic := r.object(r.field(o, "license"), "license"); lic != nil {
		out.License = policies.LicenseStep{Licensed: r.bool(r.field(lic, "licensed"), "license.licensed"),
			Failures: r.strings(r.field(lic, "failures"), "license.failures")}
	}
	out.Claims = []policies.ClaimStep{}
	if !r.each(r.field(o, "claims"), "claims", func(v ast.Value) {
		c := r.object(v, "claims[]")
		if c == nil {
			return
		}
		st := policies.ClaimStep{
			Held:          r.bool(r.field(c, "held"), "held"),
			Licensed:      r.bool(r.field(c, "licensed"), "licensed"),
			OwnCredential: r.bool(r.field(c, "own_credential"), "own_credential"),
			GrantedBy:     r.strings(r.field(c, "granted_by"), "granted_by"),
		}
		if cl := r.object(r.field(c, "claim"), "claim"); cl != nil {
			st.Claim = policies.ClaimText{Scope: r.string(r.field(cl, "scope"), "claim.scope"),
				Action: r.string(r.field(cl, "action"), "claim.action"), Specific: r.string(r.field(cl, "specific"), "claim.specific")}
		}
		st.CoveredBy = r.covers(r.field(c, "covered_by"))
		if tr := r.object(r.field(c, "token_roles"), "token_roles"); tr != nil {
			st.TokenRoles = policies.TokenRolesStep{Restricted: r.bool(r.field(tr, "restricted"), "token_roles.restricted"),
				CoveredBy: r.strings(r.field(tr, "covered_by"), "token_roles.covered_by")}
		}
		if rs := r.object(r.field(c, "restriction"), "restriction"); rs != nil {
			st.Restriction = policies.RestrictionStep{Restricted: r.bool(r.field(rs, "restricted"), "restriction.restricted"),
				Covered: r.bool(r.field(rs, "covered"), "restriction.covered")}
		}
		out.Claims = append(out.Claims, st)
	}) {
		out.Claims = nil
	}
	out.VetoesConsulted = r.bool(r.field(o, "vetoes_consulted"), "vetoes_consulted")
	out.Vetoes = []policies.Veto{}
	if !r.each(r.field(o, "vetoes"), "vetoes", func(v ast.Value) {
		if vo := r.object(v, "vetoes[]"); vo != nil {
			out.Vetoes = append(out.Vetoes, policies.Veto{Package: r.string(r.field(vo, "package"), "package"),
				Message: r.string(r.field(vo, "message"), "message")})
		}
	}) {
		out.Vetoes = nil
	}
	if r.err != nil {
		return nil, fmt.Errorf("malformed trail: %w", r.err)
	}
	return &out, nil
}

// covers reads a claim's covered_by, ordered by sortCovers.
func (r *astReader) covers(v ast.Value) []policies.Cover {
	out := []policies.Cover{}
	if !r.each(v, "covered_by", func(v ast.Value) {
		if cv := r.object(v, "covered_by[]"); cv != nil {
			out = append(out, policies.Cover{Source: r.string(r.field(cv, "source"), "source"),
				Role: r.string(r.field(cv, "role"), "role"), Claim: r.claimText(r.field(cv, "claim"), "claim")})
		}
	}) {
		out = nil
	}
	return sortCovers(out)
}

// claimText reads the claim that covers a required claim: the claim
// itself ({scope, action, specific}, as a role or the principal lists it),
// written "scope action specific", or a string as it is ("" where no
// single claim covers it: the self claims, a machine token's set).
func (r *astReader) claimText(v ast.Value, what string) string {
	o, ok := v.(ast.Object)
	if !ok {
		return r.string(v, what)
	}
	return r.string(r.field(o, "scope"), what+".scope") + " " + r.string(r.field(o, "action"), what+".action") +
		" " + r.string(r.field(o, "specific"), what+".specific")
}

// sortCovers orders covers as the policy's sort would order them with
// their claims written out (by claim, role, then source) and drops
// repeats: two claims written alike name one cover.
func sortCovers(cs []policies.Cover) []policies.Cover {
	slices.SortFunc(cs, func(a, b policies.Cover) int {
		return cmp.Or(cmp.Compare(a.Claim, b.Claim), cmp.Compare(a.Role, b.Role), cmp.Compare(a.Source, b.Source))
	})
	return slices.Compact(cs)
}

// astReader reads OPA values into Go, keeping the first type error.
type astReader struct{ err error }

func (r *astReader) fail(what string, v ast.Value, want string) {
	if r.err == nil {
		r.err = fmt.Errorf("%s is %s, not %s", what, ast.ValueName(v), want)
	}
}

// trailKeys are the field names of the trail as terms, made once: a term
// made per lookup would cost every explanation an allocation per field.
var trailKeys = func() map[string]*ast.Term {
	out := map[string]*ast.Term{}
	for _, k := range []string{"action", "claim", "claims", "covered", "covered_by", "failures", "granted_by", "held",
		"hidden", "hidden_by", "license", "licensed", "message", "other_machine", "own_credential", "package",
		"pass", "restricted", "restriction", "role", "roles", "scope", "self", "source", "specific", "tenant", "tenants",
		"token_roles", "trail", "vetoes", "vetoes_consulted"} {
		out[k] = ast.StringTerm(k)
	}
	return out
}()

// field is o's value under key, nil when o is nil or lacks it.
func (r *astReader) field(o ast.Object, key string) ast.Value {
	if o == nil {
		return nil
	}
	k, ok := trailKeys[key]
	if !ok {
		k = ast.StringTerm(key)
	}
	if t := o.Get(k); t != nil {
		return t.Value
	}
	return nil
}

func (r *astReader) object(v ast.Value, what string) ast.Object {
	if v == nil {
		return nil
	}
	o, ok := v.(ast.Object)
	if !ok {
		if _, null := v.(ast.Null); !null {
			r.fail(what, v, "an object")
		}
		return nil
	}
	return o
}

func (r *astReader) string(v ast.Value, what string) string {
	switch s := v.(type) {
	case nil, ast.Null:
		return ""
	case ast.String:
		return string(s)
	}
	r.fail(what, v, "a string")
	return ""
}

func (r *astReader) bool(v ast.Value, what string) bool {
	switch b := v.(type) {
	case nil, ast.Null:
		return false
	case ast.Boolean:
		return bool(b)
	}
	r.fail(what, v, "a boolean")
	return false
}

// each calls f with every element of an array (or set, in its order) and
// reports whether there was one: an empty array reads as an empty list, an
// absent one as none, as JSON decoding would.
func (r *astReader) each(v ast.Value, what string, f func(ast.Value)) bool {
	switch a := v.(type) {
	case nil, ast.Null:
		return false
	case *ast.Array:
		for i := 0; i < a.Len(); i++ {
			f(a.Elem(i).Value)
		}
	case ast.Set:
		sorted := a.Sorted() // as JSON would order it
		for i := 0; i < sorted.Len(); i++ {
			f(sorted.Elem(i).Value)
		}
	default:
		r.fail(what, v, "an array")
		return false
	}
	return true
}

// any reports whether a set (or array) has an element.
func (r *astReader) any(v ast.Value, what string) bool {
	switch a := v.(type) {
	case ast.Set:
		return a.Len() > 0
	case *ast.Array:
		return a.Len() > 0
	case nil, ast.Null:
		return false
	}
	r.fail(what, v, "a set")
	return false
}

func (r *astReader) strings(v ast.Value, what string) []string {
	out := []string{}
	if !r.each(v, what, func(e ast.Value) { out = append(out, r.string(e, what+"[]")) }) {
		return nil
	}
	return out
}
