package opa

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage/inmem"

	"github.com/provgate/provgate/backend"
	"github.com/provgate/provgate/policies"
)

// refCovers restates the containment rules (docs/design.md §5.2:
// ordering rules; special Action forms) over compiled claims, in plain Go: every
// scope and action of b needs a node in a (the exact action, else
// action:<x> → action, else update:<ptr> → the nearest ancestor pointer,
// then update) whose specifics include b's.
func refCovers(a, b policies.CompiledClaim) bool {
	for scope, wanted := range b {
		granted, ok := a[scope]
		if !ok {
			return false
		}
		for action, n := range wanted {
			m, ok := refMatched(granted, action)
			if !ok || !refNodeCovers(m, n) {
				return false
			}
		}
	}
	return true
}

func refMatched(actions map[string]policies.SpecNode, key string) (policies.SpecNode, bool) {
	if n, ok := actions[key]; ok {
		return n, true
	}
	if strings.HasPrefix(key, "action:") {
		n, ok := actions["action"]
		return n, ok
	}
	ptr, ok := strings.CutPrefix(key, "update:")
	if !ok {
		return policies.SpecNode{}, false
	}
	if ptr == "" {
		n, ok := actions["update"]
		return n, ok
	}
	if !strings.HasPrefix(ptr, "/") {
		return policies.SpecNode{}, false
	}
	// Drop the last segment repeatedly: /p/q/r → /p/q → /p → "".
	for p := ptr; ; {
		i := strings.LastIndexByte(p, '/')
		if i < 0 {
			break
		}
		p = p[:i]
		if n, ok := actions["update:"+p]; ok {
			return n, true
		}
	}
	n, ok := actions["update"]
	return n, ok
}

func refNodeCovers(a, b policies.SpecNode) bool {
	if a.All {
		return true
	}
	if !b.All && len(b.Keys) == 1 && b.Keys[""] {
		return true
	}
	if b.All || len(b.Keys) == 0 {
		return false
	}
	for k := range b.Keys {
		if !a.Keys[k] {
			return false
		}
	}
	return true
}

// canon round-trips v through JSON so Rego and Go values compare.
func canon(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// FuzzClaimContains compiles two arbitrary claims in Rego and in Go, a as a
// grant and b as a required claim, checks both compilations agree, and checks the Rego containment (claims.covers,
// what every decision uses) against refCovers, plus two laws: the
// superuser claim contains everything and every claim contains itself.
func FuzzClaimContains(f *testing.F) {
	seeds := [][6]string{
		{"*", "*", "*", "machines", "get", "m1"},
		{"machines", "update:/Params", "m1", "machines", "update:/Params/a~1b", "m1"},
		{"machines", "update:/Par", "m1", "machines", "update:/Params", "m1"},
		{"machines", "update", "*", "machines", "update:", "x"},
		{"machines", "action", "m1", "machines", "action:callbackDo", "m1"},
		{"machines", "action:callbackDo", "m1", "machines", "action", "m1"},
		{"machines,pools", "get, list", "a,b", "pools", "list", ""},
		{"", "", "", "", "", ""},
		{"users", "get", "bob", "users", "get", "bob,alice"},
		{"bogus", "get", "*", "bogus", "get", "x"},
		{"machines", "update:Params", "*", "machines", "update:Params/x", "m"},
		{"jobs", "*", " * ", "jobs", "log", "j1"},
		{"users", "get", "alice", "users", "get", "alice "},
		{"users", "get", " alice , bob ", "users", "get", " alice"},
		{"machines", "get", "a,*", "machines", "get", "*"},
	}
	for _, s := range seeds {
		f.Add(s[0], s[1], s[2], s[3], s[4], s[5])
	}
	c := ast.NewCompiler()
	if c.Compile(embeddedModules(f)); c.Failed() {
		f.Fatal(c.Errors)
	}
	store := inmem.NewFromObject(map[string]any{"provgate": map[string]any{"scopes": scopesAny()}})
	pq, err := rego.New(
		rego.Query(`ca := data.provgate.claims.compile(input.a)
			cb := data.provgate.claims.compile_wanted(input.b)
			cov := [x | data.provgate.claims.covers(ca, cb); x := true]
			su := [x | data.provgate.claims.covers(data.provgate.claims.compile({"scope": "*", "action": "*", "specific": "*"}), cb); x := true]
			self := [x | data.provgate.claims.covers(ca, ca); x := true]`),
		rego.Compiler(c), rego.Store(store),
	).PrepareForEval(context.Background())
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, as, aa, asp, bs, ba, bsp string) {
		// Claims reach the policy from JSON (roles) or from validated,
		// UTF-8 request paths, so they are always valid UTF-8. Outside that
		// domain the comparison is meaningless: canon's JSON round trip
		// turns every invalid byte into U+FFFD, making different strings
		// equal for Rego but not for the Go reference.
		if !validUTF8(as, aa, asp, bs, ba, bsp) {
			return
		}
		a := backend.Claim{Scope: as, Action: aa, Specific: asp}
		b := backend.Claim{Scope: bs, Action: ba, Specific: bsp}
		rs, err := pq.Eval(context.Background(), rego.EvalInput(map[string]any{"a": canon(t, a), "b": canon(t, b)}))
		if err != nil {
			t.Fatalf("eval: %v", err)
		}
		if len(rs) != 1 {
			t.Fatalf("no result for %q ⊇ %q", a, b)
		}
		bind := rs[0].Bindings
		ga, gb := policies.CompileClaim(a, testScopes), policies.CompileWanted(b, testScopes)
		if !reflect.DeepEqual(canon(t, bind["ca"]), canon(t, ga)) {
			t.Fatalf("compile(%q): rego %v, go %v", a, canon(t, bind["ca"]), canon(t, ga))
		}
		if !reflect.DeepEqual(canon(t, bind["cb"]), canon(t, gb)) {
			t.Fatalf("compile_wanted(%q): rego %v, go %v", b, canon(t, bind["cb"]), canon(t, gb))
		}
		got := len(bind["cov"].([]any)) > 0
		if want := refCovers(ga, gb); got != want {
			t.Fatalf("covers(%q, %q) = %v, reference says %v", a, b, got, want)
		}
		if len(bind["su"].([]any)) == 0 {
			t.Fatalf("superuser does not contain %q", b)
		}
		if len(bind["self"].([]any)) == 0 {
			t.Fatalf("%q does not contain itself", a)
		}
	})
}

func validUTF8(ss ...string) bool {
	for _, s := range ss {
		if !utf8.ValidString(s) {
			return false
		}
	}
	return true
}
