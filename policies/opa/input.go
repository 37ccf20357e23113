package opa

import (
	"fmt"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"

	"github.com/provgate/provgate/backend"
	"github.com/provgate/provgate/policies"
)

// inputValue builds the AST of in directly. Handing OPA the Go struct
// would make it round-trip the input through JSON on every decision; the
// result here is the same document, field for field (omitempty fields are
// left out exactly as encoding/json leaves them out).
func inputValue(in policies.Input) (ast.Value, error) {
	p := in.Principal
	principal := ast.NewObject(
		ast.Item(ast.InternedTerm("kind"), ast.StringTerm(p.Kind)),
		ast.Item(ast.InternedTerm("name"), ast.StringTerm(p.Name)),
		ast.Item(ast.InternedTerm("roles"), stringsTerm(p.Roles)),
		ast.Item(ast.InternedTerm("token_roles"), stringsTerm(p.TokenRoles)),
		ast.Item(ast.InternedTerm("claims"), claimsTerm(p.Claims)),
	)
	if len(p.Restrict) > 0 {
		principal.Insert(ast.InternedTerm("restrict"), claimsTerm(p.Restrict))
	}
	if p.MachineToken != "" {
		principal.Insert(ast.InternedTerm("machine_token"), ast.StringTerm(p.MachineToken))
	}
	if p.Grantor != "" {
		principal.Insert(ast.InternedTerm("grantor"), ast.StringTerm(p.Grantor))
	}
	if a := p.Auth; a != nil {
		auth := ast.NewObject(ast.Item(ast.InternedTerm("method"), ast.StringTerm(a.Method)))
		if a.Kind != "" {
			auth.Insert(ast.InternedTerm("kind"), ast.StringTerm(a.Kind))
		}
		if a.IssuedAt != 0 {
			auth.Insert(ast.InternedTerm("iat"), ast.IntNumberTerm(int(a.IssuedAt)))
		}
		if a.ExpiresAt != 0 {
			auth.Insert(ast.InternedTerm("exp"), ast.IntNumberTerm(int(a.ExpiresAt)))
		}
		if a.ID != "" {
			auth.Insert(ast.InternedTerm("jti"), ast.StringTerm(a.ID))
		}
		principal.Insert(ast.InternedTerm("auth"), ast.NewTerm(auth))
	}
	obj := ast.NewObject(
		ast.Item(ast.InternedTerm("principal"), ast.NewTerm(principal)),
		ast.Item(ast.InternedTerm("required"), requiredTerm(in.Required)),
		ast.Item(ast.InternedTerm("operation"), ast.StringTerm(in.Operation)),
		ast.Item(ast.InternedTerm("method"), ast.StringTerm(in.Method)),
		ast.Item(ast.InternedTerm("path"), ast.StringTerm(in.Path)),
	)
	if in.Object != nil {
		obj.Insert(ast.InternedTerm("object"), ast.ObjectTerm(
			ast.Item(ast.InternedTerm("scope"), ast.StringTerm(in.Object.Scope)),
			ast.Item(ast.InternedTerm("key"), ast.StringTerm(in.Object.Key)),
		))
	}
	if in.List != nil {
		obj.Insert(ast.InternedTerm("list"), ast.ObjectTerm(
			ast.Item(ast.InternedTerm("scope"), ast.StringTerm(in.List.Scope)),
		))
	}
	for _, doc := range []struct {
		name string
		v    map[string]any
	}{{"stored", in.Stored}, {"proposed", in.Proposed}} {
		if doc.v == nil {
			continue
		}
		v, err := ast.InterfaceToValue(doc.v)
		if err != nil {
			return nil, fmt.Errorf("input.%s: %w", doc.name, err)
		}
		obj.Insert(ast.InternedTerm(doc.name), ast.NewTerm(v))
	}
	if in.Grants != nil {
		obj.Insert(ast.InternedTerm("grants"), grantsTerm(in.Grants))
	}
	return obj, nil
}

// grantsTerm encodes grants as encoding/json would (omitempty fields left
// out).
func grantsTerm(gs []backend.Grant) *ast.Term {
	terms := make([]*ast.Term, len(gs))
	for i, g := range gs {
		obj := ast.NewObject()
		if len(g.Claims) > 0 {
			obj.Insert(ast.InternedTerm("claims"), claimsTerm(g.Claims))
		}
		if len(g.Had) > 0 {
			obj.Insert(ast.InternedTerm("had"), claimsTerm(g.Had))
		}
		if g.Role != "" {
			obj.Insert(ast.InternedTerm("role"), ast.StringTerm(g.Role))
		}
		if len(g.Roles) > 0 {
			obj.Insert(ast.InternedTerm("roles"), stringsTerm(g.Roles))
		}
		if g.Via != nil {
			// In the wanted form, as required claims are sent.
			obj.Insert(ast.InternedTerm("via"), requiredTerm([]backend.Claim{*g.Via}).Value.(*ast.Array).Elem(0))
		}
		if g.Subject != nil {
			obj.Insert(ast.InternedTerm("subject"), subjectTerm(g.Subject))
		}
		if g.To != nil {
			obj.Insert(ast.InternedTerm("to"), subjectTerm(g.To))
		}
		terms[i] = ast.NewTerm(obj)
	}
	return ast.ArrayTerm(terms...)
}

func subjectTerm(s *backend.Subject) *ast.Term {
	return ast.ObjectTerm(
		ast.Item(ast.InternedTerm("kind"), ast.StringTerm(s.Kind)),
		ast.Item(ast.InternedTerm("name"), ast.StringTerm(s.Name)),
	)
}

func tokenRolesInput(userRoles, requested []string) ast.Value {
	return ast.NewObject(
		ast.Item(ast.InternedTerm("user_roles"), stringsTerm(userRoles)),
		ast.Item(ast.InternedTerm("requested"), stringsTerm(requested)),
	)
}

// stringsTerm encodes a nil slice as null, as encoding/json does.
func stringsTerm(ss []string) *ast.Term {
	if ss == nil {
		return ast.NullTerm()
	}
	terms := make([]*ast.Term, len(ss))
	for i, s := range ss {
		terms[i] = ast.StringTerm(s)
	}
	return ast.ArrayTerm(terms...)
}

func claimsTerm(cs []backend.Claim) *ast.Term {
	if cs == nil {
		return ast.NullTerm()
	}
	terms := make([]*ast.Term, len(cs))
	for i, c := range cs {
		terms[i] = claimTerm(c)
	}
	return ast.ArrayTerm(terms...)
}

func claimTerm(c backend.Claim) *ast.Term {
	return ast.ObjectTerm(
		ast.Item(ast.InternedTerm("scope"), ast.StringTerm(c.Scope)),
		ast.Item(ast.InternedTerm("action"), ast.StringTerm(c.Action)),
		ast.Item(ast.InternedTerm("specific"), ast.StringTerm(c.Specific)),
	)
}

// requiredTerm encodes the required claims like claimsTerm, and gives each
// claim naming one scope and one action the keys the policy looks its action
// up by (data.provgate.claims.wanted): "base", the action before any ':',
// and "fallback", policies.ActionFallback. The specific is left exactly as
// the request gave it: the policy compares it as one key, never split or
// trimmed. The policy derives the same fields from a plain claim; doing it
// here spares every decision the string work.
func requiredTerm(cs []backend.Claim) *ast.Term {
	if cs == nil {
		return ast.NullTerm()
	}
	terms := make([]*ast.Term, len(cs))
	for i, c := range cs {
		obj := ast.NewObject(
			ast.Item(ast.InternedTerm("scope"), ast.StringTerm(c.Scope)),
			ast.Item(ast.InternedTerm("action"), ast.StringTerm(c.Action)),
			ast.Item(ast.InternedTerm("specific"), ast.StringTerm(c.Specific)),
		)
		if single(c.Scope) && single(c.Action) {
			base, _, _ := strings.Cut(c.Action, ":")
			fallback := policies.ActionFallback(c.Action)
			keys := make([]*ast.Term, len(fallback))
			for j, k := range fallback {
				keys[j] = ast.StringTerm(k)
			}
			obj.Insert(ast.InternedTerm("base"), ast.StringTerm(base))
			obj.Insert(ast.InternedTerm("fallback"), ast.ArrayTerm(keys...))
		}
		terms[i] = ast.NewTerm(obj)
	}
	return ast.ArrayTerm(terms...)
}

// single is data.provgate.claims.single, for scopes and actions: one value,
// not "*", no list, nothing to trim.
func single(s string) bool {
	return s != "*" && !strings.Contains(s, ",") && strings.TrimSpace(s) == s
}

// decisionFrom reads the decision strictly: anything but the documented
// shape is an error, so a broken policy cannot allow by accident.
func decisionFrom(rs rego.ResultSet) (policies.Decision, error) {
	if len(rs) != 1 || len(rs[0].Expressions) != 1 {
		return policies.Decision{}, internal("evaluate policy", errUndefined)
	}
	return decisionValue(rs[0].Expressions[0].Value)
}

// decisionValue reads one decision value (see decisionFrom).
func decisionValue(v any) (policies.Decision, error) {
	if v == nil {
		return policies.Decision{}, internal("evaluate policy", errUndefined)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return policies.Decision{}, malformed("decision is %T, not an object", v)
	}
	var d policies.Decision
	if d.Allow, ok = m["allow"].(bool); !ok {
		return policies.Decision{}, malformed("allow is %T, not a boolean", m["allow"])
	}
	if v, present := m["not_found"]; present {
		if d.NotFound, ok = v.(bool); !ok {
			return policies.Decision{}, malformed("not_found is %T, not a boolean", v)
		}
	}
	var err error
	if d.Reasons, err = stringList("reasons", m["reasons"]); err != nil {
		return policies.Decision{}, err
	}
	if d.NotFound && d.Allow {
		return policies.Decision{}, malformed("decision both allows and hides")
	}
	if v, present := m["visible"]; present {
		vm, ok := v.(map[string]any)
		if !ok {
			return policies.Decision{}, malformed("visible is %T, not an object", v)
		}
		vis := &policies.Visible{}
		if vis.Restricted, ok = vm["restricted"].(bool); !ok {
			return policies.Decision{}, malformed("visible.restricted is %T, not a boolean", vm["restricted"])
		}
		if vis.Restricted {
			if vis.Keys, err = stringList("visible.keys", vm["keys"]); err != nil {
				return policies.Decision{}, err
			}
		}
		d.Visible = vis
	}
	return d, nil
}

func stringList(field string, v any) ([]string, error) {
	if v == nil {
		return []string{}, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, malformed("%s is %T, not a list", field, v)
	}
	out := make([]string, len(list))
	for i, x := range list {
		if out[i], ok = x.(string); !ok {
			return nil, malformed("%s holds a %T, not a string", field, x)
		}
	}
	return out, nil
}

func malformed(format string, args ...any) error {
	return internal("evaluate policy", fmt.Errorf("malformed decision: "+format, args...))
}
