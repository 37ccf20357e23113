package opa

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
	"github.com/open-policy-agent/opa/v1/tester"

	"github.com/provgate/provgate/backend"
	"github.com/provgate/provgate/policies"
)

func embeddedModules(t testing.TB) map[string]*ast.Module {
	t.Helper()
	all := policies.Policies()
	for k, v := range policies.Tests() {
		all[k] = v
	}
	mods, err := parse(all)
	if err != nil {
		t.Fatal(err)
	}
	// As on load: every suite at the fixed test clock.
	for name := range policies.Tests() {
		fixClock(mods[name], TestClock)
	}
	return mods
}

// TestRegoSuites runs the embedded *_test.rego suites, one subtest per Rego
// test, exactly as `opa test policies/` does.
func TestRegoSuites(t *testing.T) {
	ch, err := tester.NewRunner().SetModules(embeddedModules(t)).SetStore(inmem.New()).SetTimeout(2*time.Minute).
		RunTests(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var results []*tester.Result
	for r := range ch {
		results = append(results, r)
	}
	sort.Slice(results, func(i, j int) bool {
		return results[i].Package+results[i].Name < results[j].Package+results[j].Name
	})
	if len(results) < 100 {
		t.Errorf("got %d Rego tests, want the whole suite (at least 100)", len(results))
	}
	for _, r := range results {
		t.Run(r.Package+"."+r.Name, func(t *testing.T) {
			if r.Error != nil {
				t.Fatalf("error: %v", r.Error)
			}
			if r.Fail {
				t.Fatalf("fail at %v", r.FailedAt)
			}
		})
	}
}

// TestEmbeddedPolicyStrict holds the embedded Rego to `opa check --strict`.
func TestEmbeddedPolicyStrict(t *testing.T) {
	c := ast.NewCompiler().WithStrict(true)
	if c.Compile(embeddedModules(t)); c.Failed() {
		t.Fatal(c.Errors)
	}
}

func evalTest(t *testing.T, query string, opts ...func(*rego.Rego)) any {
	t.Helper()
	c := embeddedCompiler(t)
	rs, err := rego.New(append([]func(*rego.Rego){rego.Query(query), rego.Compiler(c)}, opts...)...).Eval(context.Background())
	if err != nil || len(rs) != 1 {
		t.Fatalf("eval %s: %v %v", query, rs, err)
	}
	return rs[0].Expressions[0].Value
}

// embedded is the embedded policy with its tests, compiled once for the
// package's tests: evalTest's queries only read it, as the queries of an
// engine read its compiled policy.
var embedded struct {
	once sync.Once
	c    *ast.Compiler
	err  error
}

func embeddedCompiler(t testing.TB) *ast.Compiler {
	t.Helper()
	embedded.once.Do(func() {
		// Should parsing fail, embeddedModules fails the first caller;
		// the later ones fail on this.
		embedded.err = errors.New("the embedded policy does not parse")
		mods := embeddedModules(t)
		embedded.err = nil
		c := ast.NewCompiler()
		compileMu.Lock()
		defer compileMu.Unlock()
		if c.Compile(mods); c.Failed() {
			embedded.err = c.Errors
			return
		}
		embedded.c = c
	})
	if embedded.err != nil {
		t.Fatal(embedded.err)
	}
	return embedded.c
}

// The Rego fixtures carry their own scope table; it must stay the one the
// server uses.
func TestFixtureScopesMatchBackend(t *testing.T) {
	got, _ := json.Marshal(evalTest(t, "data.provgate.fixtures.scopes"))
	want, _ := json.Marshal(testScopes)
	if string(got) != string(want) {
		t.Errorf("fixtures_test.rego scopes differ from the catalog's:\n got %s\nwant %s", got, want)
	}
}

// policies.CompileClaim (Go, used for role data) and claims.compile (Rego,
// used for input claims and plain data) must agree.
func TestCompileClaimMatchesRego(t *testing.T) {
	claims := []backend.Claim{
		{Scope: "*", Action: "*", Specific: "*"},
		{Scope: "", Action: "", Specific: ""},
		{Scope: "machines", Action: "get,list,action:callbackDo", Specific: "*"},
		{Scope: " machines , pools,bogus", Action: " * ", Specific: " a , b "},
		{Scope: "machines", Action: "update:/Params,update:,bogus", Specific: ""},
		{Scope: "info,users", Action: "get,token", Specific: "bob"},
		{Scope: "*", Action: "get", Specific: "x,"},
	}
	store := inmem.NewFromObject(map[string]any{"provgate": map[string]any{"scopes": scopesAny()}})
	for _, c := range claims {
		t.Run(c.String(), func(t *testing.T) {
			in, _ := json.Marshal(c)
			var v any
			_ = json.Unmarshal(in, &v)
			got := evalTest(t, "data.provgate.claims.compile(input)", rego.Input(v), rego.Store(store))
			gotJSON, _ := json.Marshal(got)
			wantJSON, _ := json.Marshal(policies.CompileClaim(c, testScopes))
			var g, w any
			_ = json.Unmarshal(gotJSON, &g)
			_ = json.Unmarshal(wantJSON, &w)
			if !reflect.DeepEqual(g, w) {
				t.Errorf("rego %s\n  go %s", gotJSON, wantJSON)
			}
		})
	}
}

// policies.CompileWanted and claims.compile_wanted (required claims) must
// agree, and both take the specific as one exact key.
func TestCompileWantedMatchesRego(t *testing.T) {
	claims := []backend.Claim{
		{Scope: "users", Action: "password", Specific: "alice"},
		{Scope: "users", Action: "password", Specific: "alice "},
		{Scope: "users", Action: "get", Specific: " alice"},
		{Scope: "users,info", Action: "get", Specific: "alice\t"},
		{Scope: "machines", Action: "get", Specific: "a,b"},
		{Scope: "machines", Action: "get", Specific: "*"},
		{Scope: "*", Action: "get", Specific: " * "},
		{Scope: "machines", Action: "list", Specific: ""},
		{Scope: " machines , bogus", Action: "get, bogus", Specific: "m1"},
	}
	store := inmem.NewFromObject(map[string]any{"provgate": map[string]any{"scopes": scopesAny()}})
	for _, c := range claims {
		t.Run(c.String(), func(t *testing.T) {
			in, _ := json.Marshal(c)
			var v any
			_ = json.Unmarshal(in, &v)
			got := evalTest(t, "data.provgate.claims.compile_wanted(input)", rego.Input(v), rego.Store(store))
			gotJSON, _ := json.Marshal(got)
			want := policies.CompileWanted(c, testScopes)
			wantJSON, _ := json.Marshal(want)
			var g, w any
			_ = json.Unmarshal(gotJSON, &g)
			_ = json.Unmarshal(wantJSON, &w)
			if !reflect.DeepEqual(g, w) {
				t.Errorf("rego %s\n  go %s", gotJSON, wantJSON)
			}
			for _, actions := range want {
				for a, n := range actions {
					if n.All || len(n.Keys) != 1 || !n.Keys[c.Specific] {
						t.Errorf("%s: node %+v, want exactly the key %q", a, n, c.Specific)
					}
				}
			}
		})
	}
}

func scopesAny() map[string]any {
	out := map[string]any{}
	for s, as := range testScopes {
		list := make([]any, len(as))
		for i, a := range as {
			list[i] = a
		}
		out[s] = list
	}
	return out
}

// testScopes are the scopes of the kind catalog, as the policy data holds
// them.
var testScopes = backend.NewCatalog().ScopeActions()

// compileFiles parses and compiles Rego files (name to source) together.
func compileFiles(t *testing.T, files map[string]string) *ast.Compiler {
	t.Helper()
	mods, err := parse(files)
	if err != nil {
		t.Fatal(err)
	}
	c := ast.NewCompiler()
	if c.Compile(mods); c.Failed() {
		t.Fatal(c.Errors)
	}
	return c
}
