package opa

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/loader"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
	"github.com/open-policy-agent/opa/v1/tester"
	"github.com/open-policy-agent/opa/v1/util"

	"github.com/provgate/provgate/backend"
	"github.com/provgate/provgate/policies"
)

// Reload recompiles the policy directory and swaps it in, but only if
// every module compiles and every *_test.rego suite that applies passes
// (see loadDir); otherwise the served policy stays as it was and the error
// says why. With the embedded policy there is nothing to reload.
func (e *Engine) Reload(ctx context.Context) error { return e.reload(ctx, "call") }

// reload is Reload, logging its outcome in one message (docs/design.md
// §9.3) and counting it (ReloadCounts). trigger says what asked for it:
// start, watch, signal or call.
func (e *Engine) reload(ctx context.Context, trigger string) error {
	if e.dir == "" && e.bundle == nil {
		return nil
	}
	e.reloadMu.Lock()
	defer e.reloadMu.Unlock()
	var src *source
	var p *policy
	var err error
	if e.bundle != nil {
		src, p, err = e.prepareBundle(ctx)
		if errors.Is(err, errNotModified) {
			return nil
		}
	} else {
		src, p, err = e.prepareDir(ctx)
	}
	if err != nil {
		e.reloads.refused.Add(1)
		level := slog.LevelError
		if trigger == "poll" && err.Error() == e.lastPollErr {
			// A bundle URL failing the same way on every poll is logged
			// once, then at debug level until it changes.
			level = slog.LevelDebug
		}
		if trigger == "poll" {
			e.lastPollErr = err.Error()
		}
		if trigger != "start" {
			// At start the error stops the server and is reported there.
			e.logger.Log(ctx, level, "policy reload failed; keeping the current policy", "source", e.location(),
				"trigger", trigger, "revision", e.Revision(), "err", err.Error())
		}
		return err
	}
	e.lastPollErr = ""
	if err := e.setExtData(ctx, src.data); err != nil {
		e.reloads.refused.Add(1)
		return err
	}
	if src.revision != "" {
		p.revision = src.revision
	}
	e.install(p)
	e.activated(ctx, src)
	e.loaded = src.sums
	e.reloads.loaded.Add(1)
	e.logger.InfoContext(ctx, "policy loaded", "source", e.location(), "trigger", trigger, "mode", src.mode(),
		"modules", len(src.mods), "tests", len(src.tests), "revision", p.revision)
	return nil
}

// location names where the policy comes from, for logs.
func (e *Engine) location() string {
	if e.bundle != nil {
		return e.bundle.display
	}
	return e.dir
}

// prepareDir reads, compiles and tests the policy directory: what a reload
// would serve, without serving it.
func (e *Engine) prepareDir(ctx context.Context) (*source, *policy, error) {
	src, err := loadDir(e.dir)
	if err != nil {
		return nil, nil, err
	}
	p, err := e.build(ctx, src.modules(), src.data)
	if err != nil {
		return nil, nil, err
	}
	if err := src.test(ctx, e.verified); err != nil {
		return nil, nil, err
	}
	return src, p, nil
}

// source is what a policy directory holds. A directory whose modules all
// belong to packages under provgate.ext holds extensions (docs/design.md
// §9.6): they are served together with the embedded policy, their data
// files are loaded under data.provgate_ext, and both their own tests and
// the embedded suites must pass with them. A directory with any other
// module replaces the embedded policy and runs only its own tests.
type source struct {
	mods, tests map[string]string // the directory's .rego files, path → source
	extensions  bool
	data        map[string]any // documents of data.json / data.yaml files
	sums        map[string][sha256.Size]byte
	// revision is a bundle's manifest revision; empty for a directory,
	// whose revision is its content's.
	revision string
	// sequence orders a signed bundle (docs/design.md §9.7); nil otherwise.
	sequence *BundleSequence
}

func (s *source) mode() string {
	if s.extensions {
		return "extensions"
	}
	return "replace"
}

// modules are the served modules: the directory's, with the embedded
// policy under extensions.
func (s *source) modules() map[string]string {
	if !s.extensions {
		return s.mods
	}
	out := policies.Policies()
	for k, v := range s.mods {
		out[k] = v
	}
	return out
}

// test runs the suites a policy must pass before it is served: for a
// replacing directory its own; for extensions, their own tests with the
// embedded policy and the extensions together (docs/design.md §9.6). The
// embedded suites test the embedded policy alone, as the build does: an
// extension only narrows what the base allows, so a broad veto (a change
// freeze, a token age limit) is what it means to do, not a broken base;
// its effect is shown by the access explorer's policy diff instead (POST /api/v3/access/policy/diff, provgate access diff --policy). Every
// suite runs at TestClock.
func (s *source) test(ctx context.Context, v *Verified) error {
	if !s.extensions {
		return runSuites(ctx, v, s.mods, s.tests, s.data)
	}
	if err := runSuites(ctx, v, s.modules(), s.tests, s.data); err != nil {
		return fmt.Errorf("extension tests: %w", err)
	}
	return nil
}

// extPrefix is the package path extensions live under.
var extPrefix = ast.MustParseRef("data.provgate.ext")

// loadDir reads the .rego files under dir, split into policy and test
// modules, and its data files, and tells extensions from a replacement.
func loadDir(dir string) (*source, error) {
	src := &source{mods: map[string]string{}, tests: map[string]string{}}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return enterDir(dir, path, d)
		}
		if !strings.HasSuffix(path, ".rego") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if strings.HasSuffix(path, policies.TestSuffix) {
			src.tests[path] = string(b)
		} else {
			src.mods[path] = string(b)
		}
		return nil
	})
	if err != nil {
		return nil, policyError("read policy directory", err)
	}
	if len(src.mods) == 0 {
		return nil, policyError("read policy directory", fmt.Errorf("no .rego policy files in %s", dir))
	}
	if src.data, err = loadData(dir); err != nil {
		return nil, err
	}
	if err := src.classify(); err != nil {
		return nil, err
	}
	src.sums = sums(src.mods, src.tests)
	for path, sum := range dataSums(dir) {
		src.sums[path] = sum
	}
	return src, nil
}

// enterDir answers filepath.WalkDir for directory d of policy directory
// root: hidden directories below root (.git and the like) are skipped.
func enterDir(root, path string, d fs.DirEntry) error {
	if path != root && strings.HasPrefix(d.Name(), ".") {
		return filepath.SkipDir
	}
	return nil
}

// classify tells extensions from a replacement and checks the extensions'
// shape.
func (src *source) classify() error {
	parsed, err := parse(src.mods)
	if err != nil {
		return policyError("parse policy", err)
	}
	src.extensions = true
	for _, m := range parsed {
		if !m.Package.Path.HasPrefix(extPrefix) {
			src.extensions = false
		}
	}
	if src.extensions {
		return checkExtensions(parsed)
	}
	return nil
}

// checkExtensions refuses deny rules the base policy would never consult:
// it reads data.provgate.ext[_].deny, a set of messages.
func checkExtensions(mods map[string]*ast.Module) error {
	var errs []string
	for name, m := range mods {
		for _, r := range m.Rules {
			if r.Head.Ref().String() != "deny" {
				continue
			}
			if len(m.Package.Path) != len(extPrefix)+1 {
				errs = append(errs, fmt.Sprintf("%s: deny in package %s is never consulted: an extension is package provgate.ext.<name>",
					name, strings.TrimPrefix(m.Package.Path.String(), "data.")))
			}
			if r.Head.RuleKind() != ast.MultiValue {
				errs = append(errs, fmt.Sprintf("%s:%d: deny must be a set of messages (deny contains msg if ...)", name, r.Location.Row))
			}
		}
	}
	if len(errs) > 0 {
		sort.Strings(errs)
		return policyError("check extensions", errors.New(strings.Join(errs, "; ")))
	}
	return nil
}

// isDataFile names the data files of a policy directory.
func isDataFile(name string) bool {
	return name == "data.json" || name == "data.yaml" || name == "data.yml"
}

// loadData reads the directory's data.json and data.yaml files with OPA's
// loader, which nests each under the path of its directory (as opa eval -d
// and bundles do).
func loadData(dir string) (map[string]any, error) {
	res, err := loader.NewFileLoader().Filtered([]string{dir}, func(_ string, info fs.FileInfo, depth int) bool {
		if info.IsDir() {
			return depth > 0 && strings.HasPrefix(info.Name(), ".")
		}
		return !isDataFile(info.Name())
	})
	if err != nil {
		return nil, policyError("load policy data files", err)
	}
	if res.Documents == nil {
		return map[string]any{}, nil
	}
	return res.Documents, nil
}

// setExtData replaces data.provgate_ext with the extensions' data.
func (e *Engine) setExtData(ctx context.Context, doc map[string]any) error {
	if doc == nil {
		doc = map[string]any{}
	}
	raw, err := json.Marshal(doc)
	if err != nil {
		return internal("encode extension data", err)
	}
	var value any
	if err := util.UnmarshalJSON(raw, &value); err != nil {
		return internal("decode extension data", err)
	}
	e.dataMu.Lock()
	defer e.dataMu.Unlock()
	if err := storage.WriteOne(ctx, e.store, storage.AddOp, storage.Path{ExtDataKey}, value); err != nil {
		return internal("write extension data", err)
	}
	return nil
}

// compileMu runs one OPA compilation at a time in the process. OPA's type
// checker merges rule types into type values that separate compilations
// share, so two compilations at once (a reload beside a start, a bundle
// poll beside a directory watch, or several servers in one test process)
// race on them. Compiling is rare and evaluation is not affected.
var compileMu sync.Mutex

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
// extData is the data served with them under data.provgate_ext; with the
// modules it makes the policy's revision.
func (e *Engine) build(ctx context.Context, sources map[string]string, extData map[string]any) (*policy, error) {
	compileMu.Lock()
	defer compileMu.Unlock()
	compiler, err := e.compiled.compile(sources)
	if err != nil {
		return nil, err
	}
	p := &policy{needs: inputNeeds(compiler), nameBlind: principalNameBlind(compiler, sources), revision: contentRevision(sources, extData)}
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
	// The other entry points are optional. Without the explain trail the
	// access explorer shows the decision alone; without claim_contains a
	// custom policy cannot narrow restricted tokens further (ClaimContains
	// answers false); without the grant check every grant-bearing write is
	// refused (Ungranted). A policy defining the explanation is explained
	// through it, one defining only the trail through the trail.
	for _, q := range []struct {
		path, query string
		into        **rego.PreparedEvalQuery
	}{
		{policies.ExplanationPath, explanationQuery, &p.explain},
		{policies.ExplainPath, explainQuery, &p.explain},
		{RoleDiffPath, RoleDiffPath + "(input.a, input.b)", &p.roleDiff},
		{ClaimContainsPath, ClaimContainsPath + "(input.a, input.b)", &p.claimContains},
		{UngrantedPath, UngrantedPath, &p.ungranted},
	} {
		if len(compiler.GetRulesExact(ast.MustParseRef(q.path))) == 0 || (q.into == &p.explain && p.explain != nil) {
			continue
		}
		pq, err := rego.New(rego.Query(q.query), rego.Compiler(compiler), rego.Store(e.store)).PrepareForEval(ctx)
		if err != nil {
			return nil, policyError("prepare "+q.path, err)
		}
		*q.into = &pq
		if q.path == policies.ExplanationPath {
			p.explainPass = true
		}
	}
	if p.explainPass {
		pq, err := rego.New(rego.Query(LicensedPath), rego.Compiler(compiler), rego.Store(e.store)).PrepareForEval(ctx)
		if err != nil {
			return nil, policyError("prepare "+LicensedPath, err)
		}
		p.licensed = pq
		p.licensedByLicense = licenseOnly(compiler.GetRulesExact(ast.MustParseRef(LicensedPath)))
	}
	return p, nil
}

// licenseOnly reports whether rules read no input and no data but
// data.provgate.license, call no function of the policy and no
// non-deterministic built-in (time.now_ns...): their answer then depends
// on the license alone.
func licenseOnly(rules []*ast.Rule) bool {
	prefix := ast.MustParseRef("data.provgate.license")
	ok := true
	for _, r := range rules {
		ast.WalkRefs(r, func(ref ast.Ref) bool {
			switch {
			case ref[0].Equal(ast.InputRootDocument):
				ok = false
			case ref[0].Equal(ast.DefaultRootDocument) && !ref.HasPrefix(prefix):
				ok = false
			default:
				if b, found := ast.BuiltinMap[ref.String()]; found && b.Nondeterministic {
					ok = false
				}
			}
			return false
		})
		ast.WalkVars(r, func(v ast.Var) bool {
			if v.Equal(ast.InputRootDocument.Value) {
				ok = false
			}
			return false
		})
	}
	return ok
}

// runSuites runs the Rego tests over the policy modules on a store holding
// only the extensions' data (data.provgate_ext), as `opa test` would with
// the directory, and reports every failing test by name. A policy that v
// has seen pass is not run again.
func runSuites(ctx context.Context, v *Verified, sources, tests map[string]string, extData map[string]any) error {
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
	key, err := suiteKey(mods, tests, extData)
	if err != nil {
		return internal("name policy tests", err)
	}
	return v.run(key, func() error { return runParsedSuites(ctx, mods, tests, extData) })
}

// runParsedSuites is runSuites on the parsed modules; it sets the clock of
// the test modules.
func runParsedSuites(ctx context.Context, mods map[string]*ast.Module, tests map[string]string, extData map[string]any) error {
	for name := range tests {
		fixClock(mods[name], TestClock)
	}
	// RunTests compiles before it returns, under compileMu; the tests then
	// run without it, as queries on a compiled policy run beside any
	// compilation (a long suite does not hold up another engine's load).
	// A generous per-test timeout: the suites run on a busy server, and a
	// test that times out would block a good policy.
	compileMu.Lock()
	ch, err := tester.NewRunner().SetModules(mods).SetStore(inmem.NewFromObject(map[string]any{ExtDataKey: extData})).SetTimeout(time.Minute).RunTests(ctx, nil)
	compileMu.Unlock()
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

// inputNeeds finds which of input.stored and input.proposed the compiled
// policy reads. A reference to input as a whole, or by a computed key,
// counts as reading both.
func inputNeeds(c *ast.Compiler) policies.Needs {
	var n policies.Needs
	var vis *ast.GenericVisitor
	vis = ast.NewGenericVisitor(func(x any) bool {
		switch v := x.(type) {
		case ast.Ref:
			if !v[0].Equal(ast.InputRootDocument) {
				return false
			}
			if len(v) < 2 {
				n.Stored, n.Proposed = true, true
				return true
			}
			switch k := v[1].Value.(type) {
			case ast.String:
				n.Stored = n.Stored || k == "stored"
				n.Proposed = n.Proposed || k == "proposed"
			default:
				n.Stored, n.Proposed = true, true
			}
			for _, t := range v[1:] {
				vis.Walk(t)
			}
			return true
		case ast.Var:
			if ast.VarTerm(string(v)).Equal(ast.InputRootDocument) {
				n.Stored, n.Proposed = true, true
			}
		}
		return false
	})
	for _, m := range c.Modules {
		vis.Walk(m)
	}
	return n
}

// contentRevision names a policy by its content: the SHA-256 of its
// modules (sorted by name) and its extension data, so that replicas
// serving the same files report the same revision.
// writeSources writes each module's name (as shown by name) and text to h
// in name order, lengths first so that no two different sets hash alike.
func writeSources(h io.Writer, sources map[string]string, name func(string) string) {
	for _, n := range slices.Sorted(maps.Keys(sources)) {
		shown := name(n)
		fmt.Fprintf(h, "%d:%s%d:%s", len(shown), shown, len(sources[n]), sources[n])
	}
}

func contentRevision(sources map[string]string, extData map[string]any) string {
	h := sha256.New()
	writeSources(h, sources, filepath.Base)
	if len(extData) > 0 {
		b, _ := json.Marshal(extData) // maps encode with sorted keys
		h.Write(b)
	}
	return fmt.Sprintf("sha256:%x", h.Sum(nil)[:8])
}
