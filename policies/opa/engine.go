// Package opa evaluates provgate's Rego policies with the Open Policy
// Agent. It is the only package that imports OPA (docs/design.md §1.2): it compiles
// the policy once, prepares its queries once, keeps the policy data in an
// OPA in-memory store updated by transactions, caches decisions, logs them
// asynchronously, and reloads a policy directory or OPA bundle (extensions
// of the embedded policy, or a replacement) only when its Rego tests pass
// (docs/design.md §9).
package opa

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
	"github.com/open-policy-agent/opa/v1/topdown/builtins"
	"github.com/open-policy-agent/opa/v1/util"

	"github.com/provgate/provgate/backend"
	"github.com/provgate/provgate/policies"
)

// Query paths of the policy's entry points.
const (
	DecisionPath   = "data.provgate.authz.decision"
	TokenRolesPath = "data.provgate.authz.token_roles"
	// ClaimContainsPath is the claim containment function on plain claims.
	ClaimContainsPath = "data.provgate.authz.claim_contains"
	// UngrantedPath is the grant check (docs/design.md §5.9).
	UngrantedPath = "data.provgate.grants.ungranted"
)

// ExtDataKey is where the data files of a policy directory are loaded:
// data.provgate_ext (docs/design.md §9.6).
const ExtDataKey = "provgate_ext"

// DefaultCacheSize bounds the decision cache when Options.CacheSize is 0.
const DefaultCacheSize = 10000

// Options configure an Engine.
type Options struct {
	// PolicyDir, when set, replaces the embedded policy with the Rego files
	// of this directory; they are compiled and their *_test.rego suites must
	// pass, at start and on every Reload.
	PolicyDir string
	// Logger receives reload and decision-log problems. Nil discards them.
	Logger *slog.Logger
	// DecisionLog, when set, receives one JSON line per decision in OPA's
	// decision-log shape, written by a background goroutine.
	DecisionLog io.Writer
	// DecisionLogBuffer is how many decisions may wait to be written before
	// new ones are dropped (and counted); 0 means 1024.
	DecisionLogBuffer int
	// CacheSize bounds the decision cache: 0 means DefaultCacheSize, a
	// negative value turns the cache off.
	CacheSize int
	// Now, when set, is the time policies see (time.now_ns); tests move it.
	Now func() time.Time
	// Bundle, when its Location is set, serves an OPA bundle instead of the
	// embedded policy or PolicyDir (docs/design.md §9.7).
	Bundle BundleOptions
	// Verified remembers the policies whose suites passed; engines of one
	// process may share one. Nil gives the engine its own.
	Verified *Verified
	// Compiled, when set, shares compiled policies with the other engines
	// given it (a test process's servers); nil compiles at every load.
	Compiled *Compiled
}

// Engine decides requests with the compiled policy. It is safe for
// concurrent use.
type Engine struct {
	logger *slog.Logger
	dir    string
	bundle *bundleConfig // nil unless serving a bundle
	store  storage.Store

	policy  atomic.Pointer[policy]
	policyN atomic.Uint64 // source of policy revisions
	dataRev atomic.Uint64
	// dataSeq is odd while SetData or PatchData writes: Questions checks that its
	// batch saw one data revision throughout.
	dataSeq  atomic.Uint64
	reloadMu sync.Mutex // one Reload at a time
	dataMu   sync.Mutex // one SetData at a time

	// loaded sums the files of the policy dir the served policy was read
	// from (guarded by reloadMu); WatchDir starts from it.
	loaded map[string][sha256.Size]byte
	// lastPollErr is the last bundle URL poll's error (guarded by reloadMu).
	lastPollErr string

	cache *cache[policies.Decision] // nil when off
	// grants caches grant checks (Ungranted) under the same keys and
	// rules; nil when off.
	grants *cache[[]backend.Claim]
	dlog   *decisionLog

	reloads struct{ loaded, refused atomic.Uint64 }
	// lookups counts decision cache hits and misses (CacheCounts).
	lookups struct{ hits, misses atomic.Uint64 }
	now     func() time.Time // nil: OPA's own clock
	// licensed is the last answer of a policy's licensed rule
	// (explainLicensed), kept with the license it was evaluated for.
	licensed atomic.Pointer[licensedAnswer]
	verified *Verified
	compiled *Compiled // nil: compile at every load
}

// policy is one compiled policy with its prepared queries.
type policy struct {
	rev        uint64
	decision   rego.PreparedEvalQuery
	tokenRoles rego.PreparedEvalQuery
	// claimContains is nil when the policy does not define claim_contains.
	claimContains *rego.PreparedEvalQuery
	// ungranted is nil when the policy does not define the grant check.
	ungranted *rego.PreparedEvalQuery
	// explain evaluates the decision with its trail; nil when the policy
	// defines no explain entry point.
	explain *rego.PreparedEvalQuery
	// explainPass: explain evaluates the policy's explanation
	// (policies.ExplanationPath) rather than its trail.
	explainPass bool
	// licensed evaluates data.provgate.authz.licensed (LicensedPath), the
	// license step of a trail written from an explanation's pass values;
	// licensedByLicense: its rules read data.provgate.license and nothing
	// else (licenseOnly), so its answer holds for a license until the
	// license changes.
	licensed          rego.PreparedEvalQuery
	licensedByLicense bool
	// roleDiff is nil when the policy defines no role diff function.
	roleDiff *rego.PreparedEvalQuery
	// needs are the costly input parts the policy reads.
	needs policies.Needs
	// nameBlind: the policy reads a user's name only as the embedded
	// policy does (principalNameBlind), so Questions may group users.
	nameBlind bool
	// revision names the policy's content (contentRevision) or its
	// bundle's manifest revision.
	revision string
}

// New compiles the policy (embedded, or opts.PolicyDir after its tests
// pass), prepares its queries and starts the decision log writer. The data
// starts empty (no roles, no tenants, no license) until SetData.
func New(ctx context.Context, opts Options) (*Engine, error) {
	var modules map[string]string
	if opts.PolicyDir == "" && opts.Bundle.Location == "" {
		modules = policies.Policies()
	}
	return newEngine(ctx, opts, modules)
}

// newEngine builds an engine from modules, or from opts.PolicyDir when
// modules is nil. Tests and benchmarks pass their own modules.
func newEngine(ctx context.Context, opts Options, modules map[string]string) (*Engine, error) {
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	e := &Engine{
		logger:   logger,
		dir:      opts.PolicyDir,
		now:      opts.Now,
		verified: opts.Verified,
		compiled: opts.Compiled,
		store: inmem.NewFromObjectWithOpts(map[string]any{"provgate": map[string]any{}, ExtDataKey: map[string]any{}},
			inmem.OptRoundTripOnWrite(false), inmem.OptReturnASTValuesOnRead(true)),
	}
	if e.verified == nil {
		e.verified = NewVerified()
	}
	if opts.Bundle.Location != "" {
		if opts.PolicyDir != "" {
			return nil, policyError("configure policy", errors.New("a policy directory and a bundle exclude each other"))
		}
		e.bundle = newBundleConfig(opts.Bundle)
	}
	if opts.CacheSize >= 0 {
		size := opts.CacheSize
		if size == 0 {
			size = DefaultCacheSize
		}
		e.cache = newCache[policies.Decision](size, size)
		// Grant checks come with writes, which change the data and clear
		// the caches: a map sized for a full cache would be allocated
		// at every role write.
		e.grants = newCache[[]backend.Claim](size, 0)
	}
	if err := e.SetData(ctx, policies.Data{}); err != nil {
		return nil, err
	}
	if modules != nil {
		p, err := e.build(ctx, modules, nil)
		if err != nil {
			return nil, err
		}
		e.install(p)
	} else if err := e.reload(ctx, "start"); err != nil {
		return nil, err
	}
	if opts.DecisionLog != nil {
		size := opts.DecisionLogBuffer
		if size <= 0 {
			size = 1024
		}
		e.dlog = startDecisionLog(opts.DecisionLog, size, logger)
	}
	return e, nil
}

// Close stops the decision log writer after it has written what it holds.
func (e *Engine) Close() error {
	if e.dlog != nil {
		e.dlog.close()
	}
	return nil
}

// install makes p the served policy. Cached decisions of the old policy
// become unreachable because the key carries the policy revision.
func (e *Engine) install(p *policy) {
	p.rev = e.policyN.Add(1)
	e.policy.Store(p)
	e.cache.clear()
	e.grants.clear()
}

// Needs says which costly parts of the input the served policy reads:
// input.stored and input.proposed cost the gateway an object read (and a
// patch), so it fills them only for a policy that looks at them.
func (e *Engine) Needs() policies.Needs { return e.policy.Load().needs }

// Revision names the served policy by its content (a SHA-256 of its
// modules and extension data): replicas serving the same policy report the
// same revision. /api/v3/info and every decision log line show it.
func (e *Engine) Revision() string {
	if p := e.policy.Load(); p != nil {
		return p.revision
	}
	return ""
}

// ReloadCounts reports how many policy directory loads succeeded and how
// many were refused, start included.
func (e *Engine) ReloadCounts() (loaded, refused uint64) {
	return e.reloads.loaded.Load(), e.reloads.refused.Load()
}

// Revisions reports the current policy and data revisions.
func (e *Engine) Revisions() (policyRev, dataRev uint64) {
	return e.policy.Load().rev, e.dataRev.Load()
}

// SetData replaces data.provgate with d (normalized, see
// policies.Data.Normalized) in one store transaction. The next Decide sees
// the new data; no cached decision from older data is served again.
func (e *Engine) SetData(ctx context.Context, d policies.Data) error {
	raw, err := json.Marshal(d.Normalized())
	if err != nil {
		return internal("encode policy data", err)
	}
	var value any
	if err := util.UnmarshalJSON(raw, &value); err != nil {
		return internal("decode policy data", err)
	}
	return e.writeData(ctx, func(txn storage.Transaction) error {
		return e.store.Write(ctx, txn, storage.ReplaceOp, storage.Path{"provgate"}, value)
	})
}

// writeData runs write on data.provgate in one store transaction, one
// writer at a time, with dataSeq odd meanwhile (Questions notices the
// write), then bumps the data revision and clears the caches. On error
// nothing is changed.
func (e *Engine) writeData(ctx context.Context, write func(storage.Transaction) error) error {
	e.dataMu.Lock()
	defer e.dataMu.Unlock()
	e.dataSeq.Add(1)
	defer e.dataSeq.Add(1)
	txn, err := e.store.NewTransaction(ctx, storage.WriteParams)
	if err != nil {
		return internal("open policy data transaction", err)
	}
	if err := write(txn); err != nil {
		e.store.Abort(ctx, txn)
		return internal("write policy data", err)
	}
	if err := e.store.Commit(ctx, txn); err != nil {
		return internal("commit policy data", err)
	}
	// Bumped only after the commit: a decision keyed with the new revision
	// has necessarily read the new data.
	e.dataRev.Add(1)
	e.cache.clear()
	e.grants.clear()
	return nil
}

// Decide evaluates data.provgate.authz.decision for in. It fails closed: an
// evaluation error or an undefined or malformed decision is an error
// (EINTERNAL), never an allow.
func (e *Engine) Decide(ctx context.Context, in policies.Input) (policies.Decision, error) {
	return e.decide(ctx, in, e.dlog)
}

// Question is Decide for a question about access rather than a request
// (the access explorer's matrices, who-can lists and searches): the same
// evaluation and cache, but no decision log line, since no request was
// made (docs/design.md §9.8).
func (e *Engine) Question(ctx context.Context, in policies.Input) (policies.Decision, error) {
	return e.decide(ctx, in, nil)
}

func (e *Engine) decide(ctx context.Context, in policies.Input, dlog *decisionLog) (policies.Decision, error) {
	return e.decideKeyed(ctx, in, dlog, nil)
}

// decideKeyed is decide, cached under group instead of the input's own
// hash when group is set (Questions: the key of every input its decision
// holds for).
func (e *Engine) decideKeyed(ctx context.Context, in policies.Input, dlog *decisionLog, group *[sha256.Size]byte) (policies.Decision, error) {
	p := e.policy.Load()
	dataRev := e.dataRev.Load()

	var raw []byte
	if (e.cache != nil && group == nil) || dlog != nil {
		var err error
		if raw, err = json.Marshal(in); err != nil {
			return policies.Decision{}, internal("encode policy input", err)
		}
	}
	var key cacheKey
	if e.cache != nil {
		key = cacheKey{policy: p.rev, data: dataRev}
		if group != nil {
			key.input = *group
		} else {
			key.input = sha256.Sum256(raw)
		}
		if d, ok := e.cache.get(key); ok {
			e.lookups.hits.Add(1)
			dlog.add(logEvent{input: raw, result: d, requestID: policies.RequestID(ctx), revision: p.revision, cached: true})
			return d.Clone(), nil
		}
	}

	if e.cache != nil {
		e.lookups.misses.Add(1)
	}
	start := time.Now()
	value, err := inputValue(in)
	if err != nil {
		return policies.Decision{}, internal("encode policy input", err)
	}
	// OPA records every call of a non-deterministic built-in (time.now_ns,
	// rand.intn, http.send...) in the NDBCache: a decision that made one may
	// not hold for the same input a moment later, so it is never cached
	// (docs/design.md §9.4).
	var nd builtins.NDBCache
	opts := []rego.EvalOption{rego.EvalParsedInput(value)}
	if e.now != nil {
		opts = append(opts, rego.EvalTime(e.now()))
	}
	if e.cache != nil || dlog != nil {
		nd = builtins.NDBCache{}
		opts = append(opts, rego.EvalNDBuiltinCache(nd))
	}
	rs, err := p.decision.Eval(ctx, opts...)
	if err != nil {
		return policies.Decision{}, internal("evaluate policy", err)
	}
	d, err := decisionFrom(rs)
	if err != nil {
		return policies.Decision{}, err
	}
	elapsed := time.Since(start)

	if e.cache != nil && len(nd) == 0 {
		e.cache.put(key, d)
	}
	if dlog != nil {
		ev := logEvent{input: raw, result: d, eval: elapsed, requestID: policies.RequestID(ctx), revision: p.revision}
		if len(nd) > 0 {
			ev.nd, _ = ast.JSON(nd.AsValue())
		}
		dlog.add(ev)
	}
	return d.Clone(), nil
}

// TokenRoles returns the requested roles a token of a user holding
// userRoles may carry (docs/design.md §5.6): each kept role exists and is
// contained by one single role of the user. The order of requested is kept.
func (e *Engine) TokenRoles(ctx context.Context, userRoles, requested []string) ([]string, error) {
	p := e.policy.Load()
	v, err := evalOne(ctx, &p.tokenRoles, "evaluate token roles", rego.EvalParsedInput(tokenRolesInput(userRoles, requested)))
	if err != nil {
		return nil, err
	}
	list, ok := v.([]any)
	if !ok {
		return nil, internal("evaluate token roles", fmt.Errorf("result is %T, not a list", v))
	}
	out := make([]string, 0, len(list))
	for _, v := range list {
		s, ok := v.(string)
		if !ok {
			return nil, internal("evaluate token roles", fmt.Errorf("role name is %T", v))
		}
		out = append(out, s)
	}
	return out, nil
}

// ClaimContains reports whether claim have contains claim want, by the
// policy's own rules (used when a restricted token mints a narrower one).
// Any evaluation problem answers false, which keeps the wider restriction
// out of the new token.
func (e *Engine) ClaimContains(ctx context.Context, have, want backend.Claim) bool {
	p := e.policy.Load()
	if p.claimContains == nil {
		return false
	}
	in := map[string]any{
		"a": map[string]any{"scope": have.Scope, "action": have.Action, "specific": have.Specific},
		"b": map[string]any{"scope": want.Scope, "action": want.Action, "specific": want.Specific},
	}
	v, err := evalOne(ctx, p.claimContains, "claim contains", rego.EvalInput(in))
	if err != nil {
		return false
	}
	ok, _ := v.(bool)
	return ok
}

// Ungranted evaluates the grant check (data.provgate.grants.ungranted,
// docs/design.md §5.9) for in.Principal handing out in.Grants: the atomic
// claims it does not hold, empty when it may hand out everything. One
// evaluation answers every grant. It fails closed: a policy that does not
// define the check, an evaluation error or a malformed result is an error,
// never an empty answer.
func (e *Engine) Ungranted(ctx context.Context, in policies.Input) ([]backend.Claim, error) {
	p := e.policy.Load()
	if p.ungranted == nil {
		return nil, &backend.Error{Code: backend.EFORBIDDEN, Type: "AUTH",
			Messages: []string{"cannot grant: the policy does not define " + UngrantedPath}}
	}
	// Cached like decisions (docs/design.md §9.4): the same writer handing
	// out the same grants under the same policy and data gets the same
	// answer, unless the evaluation called a non-deterministic built-in.
	dataRev := e.dataRev.Load()
	var key cacheKey
	if e.grants != nil {
		raw, err := json.Marshal(in)
		if err != nil {
			return nil, internal("encode policy input", err)
		}
		key = cacheKey{policy: p.rev, data: dataRev, input: sha256.Sum256(raw)}
		if out, ok := e.grants.get(key); ok {
			return slices.Clone(out), nil
		}
	}
	value, err := inputValue(in)
	if err != nil {
		return nil, internal("encode policy input", err)
	}
	nd := builtins.NDBCache{}
	opts := []rego.EvalOption{rego.EvalParsedInput(value), rego.EvalNDBuiltinCache(nd)}
	if e.now != nil {
		opts = append(opts, rego.EvalTime(e.now()))
	}
	v, err := evalOne(ctx, p.ungranted, "evaluate grants", opts...)
	if err != nil {
		return nil, err
	}
	list, ok := v.([]any)
	if !ok {
		return nil, malformed("ungranted is %T, not a list", v)
	}
	out := make([]backend.Claim, 0, len(list))
	for _, v := range list {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, malformed("ungranted holds a %T, not a claim", v)
		}
		var c backend.Claim
		for _, f := range []struct {
			name string
			into *string
		}{{"scope", &c.Scope}, {"action", &c.Action}, {"specific", &c.Specific}} {
			if *f.into, ok = m[f.name].(string); !ok {
				return nil, malformed("ungranted claim %s is %T, not a string", f.name, m[f.name])
			}
		}
		out = append(out, c)
	}
	if e.grants != nil && len(nd) == 0 {
		e.grants.put(key, slices.Clone(out))
	}
	return out, nil
}

// CacheCounts returns the decisions answered from the decision cache (hits)
// and those evaluated with the cache on (misses) since the start.
func (e *Engine) CacheCounts() (hits, misses uint64) {
	return e.lookups.hits.Load(), e.lookups.misses.Load()
}

// DecisionLogDrops counts the decision log entries dropped, by stage:
// "queue" (the buffer before the writer) and whatever the writer reports
// (a Shipper's "http"); nil without a decision log.
func (e *Engine) DecisionLogDrops() map[string]uint64 {
	if e.dlog == nil {
		return nil
	}
	out := map[string]uint64{"queue": e.dlog.dropped.Load()}
	if d, ok := e.dlog.w.(interface{ Dropped() map[string]uint64 }); ok {
		for k, v := range d.Dropped() {
			out[k] += v
		}
	}
	return out
}

// DroppedDecisionLogs counts decisions the decision log had no room for.
func (e *Engine) DroppedDecisionLogs() uint64 {
	if e.dlog == nil {
		return 0
	}
	return e.dlog.dropped.Load()
}

var errUndefined = errors.New("policy decision is undefined")

func internal(what string, err error) error {
	return &backend.Error{Code: backend.EINTERNAL, Messages: []string{what + ": " + err.Error()}, Err: err}
}

// Loaded reports whether the engine holds a compiled policy (readiness,
// docs/design.md §15.4).
func (e *Engine) Loaded() bool { return e.policy.Load() != nil }

// evalOne evaluates pq and returns the value of its one result, as an
// internal error of what when evaluation fails or the query is undefined.
func evalOne(ctx context.Context, pq *rego.PreparedEvalQuery, what string, opts ...rego.EvalOption) (any, error) {
	rs, err := pq.Eval(ctx, opts...)
	if err != nil {
		return nil, internal(what, err)
	}
	if len(rs) != 1 || len(rs[0].Expressions) != 1 {
		return nil, internal(what, errUndefined)
	}
	return rs[0].Expressions[0].Value, nil
}
