package opa

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"

	"github.com/provgate/provgate/backend"
	"github.com/provgate/provgate/policies"
)

// The flat cache keeps what OPA's trie keeps: a value or "undefined" per
// reference, one frame at a time, and a key is the reference as it was
// put, whatever the caller does with its slice afterwards.
func TestFlatCacheFrames(t *testing.T) {
	c := getFlatCache()
	defer putFlatCache(c)
	ref := func(s string) ast.Ref { return ast.MustParseRef(s) }
	call := ast.Ref{ast.VarTerm("data"), ast.StringTerm("f"), ast.ObjectTerm(ast.Item(ast.StringTerm("a"), ast.IntNumberTerm(1)))}

	if v, undef := c.Get(ref("data.a.b")); v != nil || undef {
		t.Fatalf("empty cache: %v %v", v, undef)
	}
	c.Put(ref("data.a.b"), ast.StringTerm("x"))
	c.Put(ref("data.a.c"), nil)
	c.Put(call, ast.BooleanTerm(true))
	call[2] = ast.NullTerm() // the caller reuses its key
	if v, _ := c.Get(ref("data.a.b")); !v.Equal(ast.StringTerm("x")) {
		t.Errorf("data.a.b = %v", v)
	}
	if v, undef := c.Get(ref("data.a.c")); v != nil || !undef {
		t.Errorf("data.a.c: %v %v, want undefined", v, undef)
	}
	key := ast.Ref{ast.VarTerm("data"), ast.StringTerm("f"), ast.ObjectTerm(ast.Item(ast.StringTerm("a"), ast.IntNumberTerm(1)))}
	if v, _ := c.Get(key); !v.Equal(ast.BooleanTerm(true)) {
		t.Errorf("call = %v", v)
	}
	if v, _ := c.Get(call); v != nil {
		t.Errorf("the reused key's new form is cached: %v", v)
	}
	if got := len(c.Keys()); got != 2 {
		t.Errorf("%d keys with a value, want 2", got)
	}

	c.Push()
	if v, _ := c.Get(ref("data.a.b")); v != nil {
		t.Errorf("a pushed frame sees %v", v)
	}
	c.Put(ref("data.a.b"), ast.StringTerm("y"))
	if v, _ := c.Get(ref("data.a.b")); !v.Equal(ast.StringTerm("y")) {
		t.Errorf("pushed frame: data.a.b = %v", v)
	}
	c.Pop()
	if v, _ := c.Get(ref("data.a.b")); !v.Equal(ast.StringTerm("x")) {
		t.Errorf("after pop: data.a.b = %v", v)
	}

	// Many keys, some of one hash bucket or another: each is found.
	for i := range 2000 {
		c.Put(ref(fmt.Sprintf("data.n[%d]", i)), ast.IntNumberTerm(i))
	}
	for i := range 2000 {
		if v, _ := c.Get(ref(fmt.Sprintf("data.n[%d]", i))); !v.Equal(ast.IntNumberTerm(i)) {
			t.Fatalf("data.n[%d] = %v", i, v)
		}
	}

	// A cache handed back and taken again starts empty.
	putFlatCache(c)
	c = getFlatCache()
	if v, _ := c.Get(ref("data.a.b")); v != nil {
		t.Errorf("reused cache holds %v", v)
	}
}

// Evaluated with the flat cache, the explain query answers exactly as with
// OPA's own cache, for decisions and trails of every kind.
func TestFlatCacheAnswersAsOPAs(t *testing.T) {
	e := newTestEngine(t, Options{CacheSize: -1})
	ctx := context.Background()
	tokenRoles := user("u", "reader", "operator")
	tokenRoles.TokenRoles = []string{"operator"}
	restricted := user("olga", "operator")
	restricted.Restrict = []backend.Claim{claim("pools", "get", "*")}
	hidden := request(user("tina", "superuser"), claim("machines", "get", "m3"))
	hidden.Object = &policies.Object{Scope: "machines", Key: "m3"}
	list := request(user("tina", "reader"), claim("machines", "list", ""))
	list.List = &policies.ListRequest{Scope: "machines"}
	ins := []policies.Input{
		request(user("olga", "operator"), claim("machines", "get", "m1")),
		request(user("olga", "operator"), claim("pools", "update:/Description", "p3"), claim("machines", "get", "m1")),
		request(user("nobody"), claim("users", "password", "nobody")),
		request(tokenRoles, claim("machines", "get", "m1")),
		request(restricted, claim("pools", "get", "p1"), claim("machines", "get", "m1")),
		hidden, list,
		request(user("olga", "operator")),
		request(user("olga", "operator"), claim("machines", "get,list", "m1")),
		request(user("root", "superuser"), claim("roles", "create", "r")),
		request(policies.Principal{Kind: "machine", Name: "m1", MachineToken: "operations"}, claim("machines", "update:/Params/x", "m1")),
	}
	p := e.policy.Load()
	for i, in := range ins {
		v, err := inputValue(in)
		if err != nil {
			t.Fatal(err)
		}
		want, err := p.explain.Eval(ctx, rego.EvalParsedInput(v))
		if err != nil {
			t.Fatal(err)
		}
		vc := getFlatCache()
		got, err := p.explain.Eval(ctx, rego.EvalParsedInput(v), rego.EvalVirtualCache(vc))
		putFlatCache(vc)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("input %d: flat cache %+v, OPA's %+v", i, got, want)
		}
	}
}
