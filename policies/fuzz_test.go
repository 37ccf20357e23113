package policies

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/provgate/provgate/backend"
)

// refCompile is a deliberately naive restatement of the claim rules
// (Scope, Specific, Action; docs/design.md §5.1): split each field on
// commas, trim, expand "*", drop what the scope table does not know.
// CompileClaim is checked against it.
func refCompile(c backend.Claim, scopes map[string][]string) map[string]map[string]SpecNode {
	trimmed := func(s string) []string {
		var out []string
		for _, p := range strings.Split(s, ",") {
			out = append(out, strings.TrimSpace(p))
		}
		return out
	}
	node := SpecNode{Keys: map[string]bool{}}
	if strings.TrimSpace(c.Specific) == "*" {
		node.All = true
	} else {
		for _, k := range trimmed(c.Specific) {
			node.Keys[k] = true
		}
	}
	var scopeNames []string
	if strings.TrimSpace(c.Scope) == "*" {
		for s := range scopes {
			scopeNames = append(scopeNames, s)
		}
	} else {
		scopeNames = trimmed(c.Scope)
	}
	out := map[string]map[string]SpecNode{}
	for _, s := range scopeNames {
		valid, ok := scopes[s]
		if !ok {
			continue
		}
		acts := map[string]SpecNode{}
		if strings.TrimSpace(c.Action) == "*" {
			for _, a := range valid {
				acts[a] = node
			}
		} else {
			for _, a := range trimmed(c.Action) {
				base := a
				if i := strings.IndexByte(a, ':'); i >= 0 {
					base = a[:i]
				}
				for _, v := range valid {
					if v == base {
						acts[a] = node
					}
				}
			}
		}
		out[s] = acts
	}
	return out
}

// FuzzCompileClaim checks CompileClaim against refCompile on arbitrary
// claims, and that it never yields a scope or action the scope table does
// not define.
func FuzzCompileClaim(f *testing.F) {
	for _, c := range [][3]string{
		{"*", "*", "*"}, {"", "", ""}, {"machines", "get,list,action:callbackDo", "*"},
		{" machines , pools,bogus", " * ", " a , b "}, {"machines", "update:/Params,update:,bogus", ""},
		{"info,users", "get,token", "bob"}, {"*", "get", "x,"}, {"jobs", "update:/Machine~1x", "m1,m1"},
		{"users,users", "action:,action", ",*"}, {"\u202e", "get\x00", "\n"},
	} {
		f.Add(c[0], c[1], c[2])
	}
	f.Fuzz(func(t *testing.T, scope, action, specific string) {
		c := backend.Claim{Scope: scope, Action: action, Specific: specific}
		got := CompileClaim(c, testScopes)
		want := refCompile(c, testScopes)
		gj, _ := json.Marshal(got)
		wj, _ := json.Marshal(want)
		if !reflect.DeepEqual(gj, wj) {
			t.Fatalf("CompileClaim(%q)\n got %s\nwant %s", c, gj, wj)
		}
		for s, acts := range got {
			valid, ok := testScopes[s]
			if !ok {
				t.Fatalf("unknown scope %q compiled from %q", s, c)
			}
			for a, n := range acts {
				base, _, _ := strings.Cut(a, ":")
				if !contains(valid, base) {
					t.Fatalf("action %q not valid in %s, compiled from %q", a, s, c)
				}
				if n.All && len(n.Keys) != 0 {
					t.Fatalf("node both all and keyed: %+v", n)
				}
			}
		}
	})
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// testScopes are the scopes of the kind catalog, as the policy data holds
// them.
var testScopes = backend.NewCatalog().ScopeActions()
