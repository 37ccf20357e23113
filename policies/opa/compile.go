package opa

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
	"github.com/open-policy-agent/opa/v1/tester"

	"github.com/provgate/provgate/backend"
	"github.com/provgate/provgate/policies"
)

// Reload recompiles the policy directory and swaps it in, but only if
// every module compiles and every *_test.rego suite in the directory
// passes; otherwise the served policy stays as it was and the error says
// why. With the embedded policy there is nothing to reload.
func (e *Engine) Reload(ctx context.Context) error {
	if e.dir == "" {
		return nil
	}
	e.reloadMu.Lock()
	defer e.reloadMu.Unlock()
	mods, tests, err := loadDir(e.dir)
	if err != nil {
		return err
	}
	p, err := e.build(ctx, mods)
	if err != nil {
		return err
	}
	if err := runSuites(ctx, mods, tests); err != nil {
		return err
	}
	e.install(p)
	e.loaded = sums(mods, tests)
	e.logger.InfoContext(ctx, "policy loaded", "dir", e.dir, "modules", len(mods), "tests", len(tests),
		"revision", p.rev)
	return nil
}

// loadDir reads the .rego files under dir, split into policy and test
// modules (file path → source).
func loadDir(dir string) (mods, tests map[string]string, err error) {
	mods, tests = map[string]string{}, map[string]string{}
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != dir && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".rego") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if strings.HasSuffix(path, policies.TestSuffix) {
			tests[path] = string(src)
		} else {
			mods[path] = string(src)
		}
		return nil
	})
	if err != nil {
		return nil, nil, policyError("read policy directory", err)
	}
	if len(mods) == 0 {
		return nil, nil, policyError("read policy directory", fmt.Errorf("no .rego policy files in %s", dir))
	}
	return mods, tests, nil
}

func parse(sources map[string]string) (map[string]*ast.Module, error) {
	out := make(map[string]*ast.Module, len(sources))
	for name, src := range sources {
		m, err := ast.ParseModuleWithOpts(name, src, ast.ParserOptions{RegoVersion: ast.RegoV1})
		if err != nil {
			return nil, err
		}
		out[name] = m
	}
	return out, nil
}

// build compiles the policy modules and prepares both entry points.
func (e *Engine) build(ctx context.Context, sources map[string]string) (*policy, error) {
	mods, err := parse(sources)
	if err != nil {
		return nil, policyError("parse policy", err)
	}
	compiler := ast.NewCompiler()
	if compiler.Compile(mods); compiler.Failed() {
		return nil, policyError("compile policy", compiler.Errors)
	}
	p := &policy{}
	for _, q := range []struct {
		path string
		into *rego.PreparedEvalQuery
	}{{DecisionPath, &p.decision}, {TokenRolesPath, &p.tokenRoles}} {
		if len(compiler.GetRulesExact(ast.MustParseRef(q.path))) == 0 {
			return nil, policyError("compile policy", fmt.Errorf("no rule defines %s", q.path))
		}
		pq, err := rego.New(rego.Query(q.path), rego.Compiler(compiler), rego.Store(e.store)).PrepareForEval(ctx)
		if err != nil {
			return nil, policyError("prepare "+q.path, err)
		}
		*q.into = pq
	}
	// claim_contains is optional: a custom policy without it simply cannot
	// narrow restricted tokens further (ClaimContains answers false).
	if len(compiler.GetRulesExact(ast.MustParseRef(ClaimContainsPath))) > 0 {
		pq, err := rego.New(rego.Query(ClaimContainsPath+"(input.a, input.b)"), rego.Compiler(compiler),
			rego.Store(e.store)).PrepareForEval(ctx)
		if err != nil {
			return nil, policyError("prepare "+ClaimContainsPath, err)
		}
		p.claimContains = &pq
	}
	return p, nil
}

// runSuites runs the Rego tests over the policy modules on an empty store,
// as `opa test` would, and reports every failing test by name.
func runSuites(ctx context.Context, sources, tests map[string]string) error {
	all := make(map[string]string, len(sources)+len(tests))
	for k, v := range sources {
		all[k] = v
	}
	for k, v := range tests {
		all[k] = v
	}
	mods, err := parse(all)
	if err != nil {
		return policyError("parse policy tests", err)
	}
	// A generous per-test timeout: the suites run on a busy server, and a
	// test that times out would block a good policy.
	ch, err := tester.NewRunner().SetModules(mods).SetStore(inmem.New()).SetTimeout(time.Minute).RunTests(ctx, nil)
	if err != nil {
		return policyError("run policy tests", err)
	}
	var failed []string
	for r := range ch {
		switch {
		case r.Error != nil:
			failed = append(failed, fmt.Sprintf("%s.%s: %v", r.Package, r.Name, r.Error))
		case r.Fail:
			failed = append(failed, fmt.Sprintf("%s.%s: FAIL", r.Package, r.Name))
		}
	}
	if len(failed) > 0 {
		sort.Strings(failed)
		return policyError("policy tests", fmt.Errorf("%d failed: %s", len(failed), strings.Join(failed, "; ")))
	}
	return nil
}

func policyError(what string, err error) error {
	return &backend.Error{Code: backend.EINVALID, Messages: []string{what + ": " + err.Error()}, Err: err}
}
