package opa

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/provgate/provgate/backend"
	"github.com/provgate/provgate/policies"
)

// benchData has n roles and n tenants; user-i holds role-i and is in
// tenant-i, which lists machine m-i.
func benchData(n int) policies.Data {
	roles := make([]backend.Role, 0, n+1)
	tenants := make([]backend.Tenant, 0, n)
	for i := 0; i < n; i++ {
		roles = append(roles, backend.Role{Name: fmt.Sprintf("role-%d", i), Claims: []backend.Claim{
			claim("machines", "get,list,update:/Params", fmt.Sprintf("m-%d", i)),
			claim("pools", "*", fmt.Sprintf("p-%d", i)),
		}})
		tenants = append(tenants, backend.Tenant{Name: fmt.Sprintf("tenant-%d", i),
			Members: map[string][]string{"machines": {fmt.Sprintf("m-%d", i)}}, Users: []string{fmt.Sprintf("user-%d", i)}})
	}
	roles = append(roles, backend.Role{Name: "superuser", Claims: []backend.Claim{claim("*", "*", "*")}})
	return policies.NewData(roles, tenants, policies.LicenseData{Valid: true, Features: []string{"rbac"}})
}

func benchInput() policies.Input {
	in := request(user("user-3", "role-3", "role-4"), claim("machines", "update:/Params/foo", "m-3"))
	in.Object = &policies.Object{Scope: "machines", Key: "m-3"}
	in.Method, in.Operation = "PATCH", "patch"
	return in
}

func benchDecide(b *testing.B, e *Engine, in policies.Input, wantAllow bool) {
	b.Helper()
	ctx := context.Background()
	if d, err := e.Decide(ctx, in); err != nil || d.Allow != wantAllow {
		b.Fatalf("%+v %v", d, err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := e.Decide(ctx, in); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecide evaluates the embedded policy without the cache (every
// iteration is a full evaluation) and with it, for 10 and 10,000 roles and
// tenants: the cost must not grow with their number.
func BenchmarkDecide(b *testing.B) {
	for _, n := range []int{10, 10000} {
		for _, cached := range []bool{false, true} {
			size := -1
			if cached {
				size = 0
			}
			e, err := New(context.Background(), Options{CacheSize: size})
			if err != nil {
				b.Fatal(err)
			}
			if err := e.SetData(context.Background(), benchData(n)); err != nil {
				b.Fatal(err)
			}
			b.Run(fmt.Sprintf("roles=%d/cached=%v/patch", n, cached), func(b *testing.B) {
				benchDecide(b, e, benchInput(), true)
			})
			b.Run(fmt.Sprintf("roles=%d/cached=%v/token-roles", n, cached), func(b *testing.B) {
				in := benchInput()
				in.Principal.TokenRoles = []string{"role-3"}
				benchDecide(b, e, in, true)
			})
			b.Run(fmt.Sprintf("roles=%d/cached=%v/superuser", n, cached), func(b *testing.B) {
				benchDecide(b, e, request(user("root", "superuser"), claim("machines", "get", "m-1")), true)
			})
			b.Run(fmt.Sprintf("roles=%d/cached=%v/denied", n, cached), func(b *testing.B) {
				benchDecide(b, e, request(user("user-3", "role-3"), claim("machines", "delete", "m-3")), false)
			})
			b.Run(fmt.Sprintf("roles=%d/cached=%v/list", n, cached), func(b *testing.B) {
				in := request(user("user-3", "role-3"), claim("machines", "list", ""))
				in.List = &policies.ListRequest{Scope: "machines"}
				benchDecide(b, e, in, true)
			})
			b.Run(fmt.Sprintf("roles=%d/cached=%v/machine", n, cached), func(b *testing.B) {
				m := policies.Principal{Kind: "machine", Name: "m-3", MachineToken: "operations"}
				benchDecide(b, e, request(m, claim("jobs", "update:/State", "m-3")), true)
			})
			_ = e.Close()
		}
	}
}

// BenchmarkTrivial is the floor: an always-allow policy through the same
// prepared-evaluation path (input conversion, evaluation, result reading).
func BenchmarkTrivial(b *testing.B) {
	policy := "package provgate.authz\n\ndecision := {\"allow\": true, \"reasons\": [], \"not_found\": false}\n\ntoken_roles := []\n"
	e, err := newEngine(context.Background(), Options{CacheSize: -1}, map[string]string{"trivial.rego": policy})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	benchDecide(b, e, benchInput(), true)
}

// extBenchRule is a one-rule extension, a change freeze read from data
// (testdata/policy/extensions/freeze): what a security team typically adds.
const extBenchRule = `package provgate.ext.freeze

deny contains "change freeze" if {
	input.principal.name in data.provgate_ext.freeze.users
	input.method != "GET"
}
`

// BenchmarkDecideExtension measures an uncached decision with the embedded
// policy alone and with a one-rule extension loaded beside it, for the
// same allowed request (the extension's rule is evaluated and does not
// veto): the cost of layering (provgate-bench figure 3g).
func BenchmarkDecideExtension(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "freeze.rego"), []byte(extBenchRule), 0o600); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "data.json"), []byte(`{"freeze": {"users": ["carol"]}}`), 0o600); err != nil {
		b.Fatal(err)
	}
	for _, ext := range []bool{false, true} {
		opts := Options{CacheSize: -1}
		if ext {
			opts.PolicyDir = dir
		}
		e, err := New(ctx, opts)
		if err != nil {
			b.Fatal(err)
		}
		if err := e.SetData(ctx, benchData(10)); err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("ext=%v", ext), func(b *testing.B) {
			benchDecide(b, e, benchInput(), true)
		})
		if ext {
			in := benchInput()
			in.Principal.Name = "carol"
			if d, err := e.Decide(ctx, in); err != nil || d.Allow {
				b.Fatalf("the extension does not veto: %+v %v", d, err)
			}
		}
	}
}

// BenchmarkExplain evaluates the decision with its explain trail (the
// access explorer's explain) for the input of BenchmarkDecide's uncached
// patch case; explain=false is that uncached decision alone, in the same
// run, so that the two compare (figure 10a of cmd/provgate-bench).
func BenchmarkExplain(b *testing.B) {
	e, err := New(context.Background(), Options{CacheSize: -1})
	if err != nil {
		b.Fatal(err)
	}
	if err := e.SetData(context.Background(), benchData(10)); err != nil {
		b.Fatal(err)
	}
	in := benchInput()
	ctx := context.Background()
	b.Run("explain=false", func(b *testing.B) { benchDecide(b, e, in, true) })
	b.Run("explain=true", func(b *testing.B) {
		if x, err := e.Explain(ctx, in); err != nil || !x.Decision.Allow || x.Trail == nil {
			b.Fatalf("%+v %v", x, err)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := e.Explain(ctx, in); err != nil {
				b.Fatal(err)
			}
		}
	})
}
