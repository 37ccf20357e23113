package pools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/provgate/provgate/backend"
)

// Op runs verb v on pool (POST /pools/<id>/<verb>); an unknown verb is
// ENOTFOUND.
func (s *Service) Op(ctx context.Context, v backend.PoolVerb, pool string, body []byte, opts backend.PoolOptions) ([]backend.PoolResult, error) {
	if !v.Valid() {
		return nil, backend.Errorf(backend.ENOTFOUND, "unknown pool operation %s", v)
	}
	return s.parseAndRun(ctx, v, pool, body, opts)
}

// Add moves machines from the source pool into pool (POST
// /pools/<id>/addMachines).
func (s *Service) Add(ctx context.Context, pool string, body []byte, opts backend.PoolOptions) ([]backend.PoolResult, error) {
	return s.parseAndRun(ctx, backend.PoolAdd, pool, body, opts)
}

// Remove moves machines out of pool into its parent, else default (POST
// /pools/<id>/removeMachines).
func (s *Service) Remove(ctx context.Context, pool string, body []byte, opts backend.PoolOptions) ([]backend.PoolResult, error) {
	return s.parseAndRun(ctx, backend.PoolRemove, pool, body, opts)
}

// Allocate reserves Free machines of pool (POST /pools/<id>/allocateMachines).
func (s *Service) Allocate(ctx context.Context, pool string, body []byte, opts backend.PoolOptions) ([]backend.PoolResult, error) {
	return s.parseAndRun(ctx, backend.PoolAllocate, pool, body, opts)
}

// Release returns allocated machines of pool to Free (POST
// /pools/<id>/releaseMachines).
func (s *Service) Release(ctx context.Context, pool string, body []byte, opts backend.PoolOptions) ([]backend.PoolResult, error) {
	return s.parseAndRun(ctx, backend.PoolRelease, pool, body, opts)
}

// ReleaseToPool releases one machine in the pool it is in (POST
// /machines/<id>/releaseToPool; the body, {} from drpcli, carries nothing).
// machineKey is a UUID or an "<Index>:<value>" of a unique index. It is a
// forced release: naming one machine is explicit enough to also release it
// while its allocate workflow runs or has failed.
func (s *Service) ReleaseToPool(ctx context.Context, machineKey string) ([]backend.PoolResult, error) {
	rec, err := s.lookupMachine(ctx, machineKey)
	if err != nil {
		if backend.IsCode(err, backend.ENOTFOUND) {
			return nil, backend.NotFound(backend.ActionOp, "machines", machineKey)
		}
		return nil, err
	}
	m, err := decodeMachine(rec.Data)
	if err != nil {
		return nil, err
	}
	r := &request{MachineList: []string{machineKey}}
	return s.run(ctx, backend.PoolRelease, m.Pool, r, backend.PoolOptions{Force: true})
}

func (s *Service) parseAndRun(ctx context.Context, v backend.PoolVerb, pool string, body []byte, opts backend.PoolOptions) ([]backend.PoolResult, error) {
	r, err := parseBody(string(v), pool, body)
	if err != nil {
		return nil, err
	}
	return s.run(ctx, v, pool, r, opts)
}

// change is one machine written by an operation.
type change struct {
	orig, now *backend.Machine
}

// errStale marks a transaction lost to a concurrent write of a claimed
// machine (revision changed between claim and update); it is retried.
var errStale = errors.New("pools: machine changed during the operation")

const maxAttempts = 3

func (s *Service) run(ctx context.Context, v backend.PoolVerb, pool string, r *request, opts backend.PoolOptions) ([]backend.PoolResult, error) {
	sel, err := r.plan(pool)
	if err != nil {
		return nil, err
	}
	if pool != backend.DefaultPool && !backend.ValidName(pool) {
		return nil, badRequest(pool, "invalid pool name %q", pool)
	}
	filters, err := s.parseFilters(ctx, r.Filter)
	if err != nil {
		return nil, err
	}
	from, to, err := s.route(ctx, v, pool, opts)
	if err != nil {
		return nil, err
	}
	var uuids []string
	var refs map[string]string
	if sel.list {
		if uuids, refs, err = s.resolveList(ctx, r.MachineList, opts.Visible); err != nil {
			return nil, err
		}
		sel.count, sel.minimum = len(uuids), len(uuids)
	}

	// Subscribe before committing so that no completion published between
	// the commit and the wait is missed.
	var w *waiter
	if r.Wait > 0 {
		w = s.newWaiter()
		defer w.close()
	}

	var changes []change
	for attempt := 1; ; attempt++ {
		changes = nil
		err = s.st.InTx(ctx, func(ctx context.Context) error {
			var err error
			changes, err = s.apply(ctx, v, pool, from, to, r, sel, filters, uuids, refs, opts)
			if err != nil {
				return err
			}
			if w != nil {
				w.watch(changes)
			}
			if s.notify != nil && len(changes) > 0 {
				return s.notify(ctx, s.events(ctx, changes, opts.Principal))
			}
			return nil
		})
		if !errors.Is(err, errStale) || attempt == maxAttempts {
			break
		}
	}
	if err != nil {
		if errors.Is(err, errStale) {
			return nil, backend.OpError(backend.ECONFLICT, backend.ActionOp, "pools", pool,
				"machines kept changing during the operation; try again")
		}
		return nil, err
	}
	s.publish(ctx, changes, opts.Principal)

	out := make([]backend.PoolResult, 0, len(changes))
	for _, c := range changes {
		out = append(out, result(c.now))
	}
	if w != nil && len(changes) > 0 {
		out = s.wait(ctx, w, changes, r.Wait)
	}
	sortResults(out)
	s.log.DebugContext(ctx, "pool operation", "verb", string(v), "pool", pool, "from", from, "to", to,
		"machines", len(out))
	return out, nil
}

// route returns the pool machines are taken from and the pool they end in.
func (s *Service) route(ctx context.Context, v backend.PoolVerb, pool string, opts backend.PoolOptions) (from, to string, err error) {
	switch v {
	case backend.PoolAdd:
		from = opts.SourcePool
		if from == "" {
			if from, err = s.parentOf(ctx, pool); err != nil {
				return "", "", err
			}
		}
		if from == pool {
			return "", "", badRequest(pool, "source pool and target pool are both %s", pool)
		}
		return from, pool, nil
	case backend.PoolRemove:
		if pool == backend.DefaultPool {
			return "", "", badRequest(pool, "cannot remove machines from the default pool")
		}
		if to, err = s.parentOf(ctx, pool); err != nil {
			return "", "", err
		}
		if to == pool {
			return "", "", badRequest(pool, "pool %s is its own parent", pool)
		}
		return pool, to, nil
	}
	return pool, pool, nil
}

// parentOf is the parent of pool: its ParentPool, or the default pool.
func (s *Service) parentOf(ctx context.Context, pool string) (string, error) {
	p, err := s.poolObject(ctx, pool)
	if err != nil {
		return "", err
	}
	if p != nil && p.ParentPool != "" {
		return p.ParentPool, nil
	}
	return backend.DefaultPool, nil
}

// eligible is the claim condition for a verb's candidates (docs/design.md §11.4):
//   - add, remove, allocate: in the pool, Free and not allocated; add and
//     remove with force also take unallocated machines stuck joining or
//     leaving (Joining, HoldJoin, Leaving, HoldLeave), so that operators can
//     move a machine whose enter workflow failed;
//   - release: in the pool, allocated and InUse; with force also Building,
//     HoldBuild, Destroying and HoldDestroy (a release restarted after a
//     failed build or release; those machines may already be unallocated).
//
// A Locked machine refuses changes (docs/design.md §11.2), so no verb takes one,
// forced or not.
func (s *Service) eligible(v backend.PoolVerb, pool string, force bool) []backend.Filter {
	fs := []backend.Filter{s.indexFilter("Pool", backend.OpEq, pool), s.indexFilter("Locked", backend.OpEq, "false")}
	switch {
	case v == backend.PoolRelease && force:
		fs = append(fs, s.indexFilter("PoolStatus", backend.OpIn, backend.PoolInUse, backend.PoolBuilding,
			backend.PoolHoldBuild, backend.PoolDestroying, backend.PoolHoldDestroy))
	case v == backend.PoolRelease:
		fs = append(fs, s.indexFilter("PoolAllocated", backend.OpEq, "true"),
			s.indexFilter("PoolStatus", backend.OpEq, backend.PoolInUse))
	case force && v != backend.PoolAllocate:
		fs = append(fs, s.indexFilter("PoolAllocated", backend.OpEq, "false"),
			s.indexFilter("PoolStatus", backend.OpIn, backend.PoolFree, backend.PoolJoining, backend.PoolHoldJoin,
				backend.PoolLeaving, backend.PoolHoldLeave))
	default:
		fs = append(fs, s.indexFilter("PoolAllocated", backend.OpEq, "false"),
			s.indexFilter("PoolStatus", backend.OpEq, backend.PoolFree))
	}
	return fs
}

func describeEligible(v backend.PoolVerb, force bool) string {
	switch {
	case v == backend.PoolRelease && force:
		return "unlocked and InUse, Building, HoldBuild, Destroying or HoldDestroy"
	case v == backend.PoolRelease:
		return "unlocked, allocated and InUse"
	case force && v != backend.PoolAllocate:
		return "unlocked, unallocated and Free, Joining, HoldJoin, Leaving or HoldLeave"
	}
	return "unlocked, Free and not allocated"
}

// apply runs inside the transaction: resolve the action groups, claim the
// machines, change and write them. Any error rolls everything back.
func (s *Service) apply(ctx context.Context, v backend.PoolVerb, pool, from, to string, r *request, sel selection,
	filters []backend.Filter, uuids []string, refs map[string]string, opts backend.PoolOptions) ([]change, error) {
	acts, err := s.actions(ctx, v, pool, from, to, r)
	if err != nil {
		return nil, err
	}
	q := backend.Query{Limit: -1, Visible: opts.Visible,
		Filters: append(s.eligible(v, from, opts.Force), filters...)}
	if sel.list {
		// The named machines, already checked against the caller's
		// visibility by resolveList, narrow Visible to exactly them.
		q.Visible = uuids
	}
	recs, err := s.st.ClaimForUpdate(ctx, "machines", q, sel.count)
	if err != nil {
		return nil, err
	}
	if len(recs) == 0 {
		// Tell an unknown pool (no object, no machine) from an empty choice.
		if err := s.mustExist(ctx, from); err != nil {
			return nil, err
		}
	}
	if sel.list && len(recs) < len(uuids) {
		got := map[string]bool{}
		for _, rec := range recs {
			got[rec.Key] = true
		}
		var missing []string
		for _, u := range uuids {
			if !got[u] {
				missing = append(missing, refs[u])
			}
		}
		return nil, backend.OpError(backend.ECONFLICT, backend.ActionOp, "pools", pool,
			fmt.Sprintf("%s: machines not eligible in pool %s (must be %s, match pool/filter and not be in another operation): %s",
				v, from, describeEligible(v, opts.Force), strings.Join(missing, ", ")))
	}
	if len(recs) < sel.minimum {
		want := fmt.Sprintf("%d", sel.count)
		if sel.all {
			want = "all"
		}
		return nil, backend.OpError(backend.ECONFLICT, backend.ActionOp, "pools", pool,
			fmt.Sprintf("%s: wanted %s machines (minimum %d) from pool %s, found %d that are %s",
				v, want, sel.minimum, from, len(recs), describeEligible(v, opts.Force)))
	}
	// Only now is it known which machines the changes reach.
	keys := make([]string, len(recs))
	for i, rec := range recs {
		keys[i] = rec.Key
	}
	if err := authorizeChanges(ctx, acts, keys); err != nil {
		return nil, err
	}
	changes := make([]change, 0, len(recs))
	for _, rec := range recs {
		orig, err := decodeMachine(rec.Data)
		if err != nil {
			return nil, err
		}
		m, _ := decodeMachine(rec.Data)
		acts.applyTo(v, to, m)
		data, err := json.Marshal(m)
		if err != nil {
			return nil, err
		}
		if _, err := s.st.Update(ctx, "machines", rec.Key, rec.Rev, data); err != nil {
			if backend.IsCode(err, backend.ECONFLICT) {
				return nil, fmt.Errorf("%w: %s: %w", errStale, rec.Key, err)
			}
			return nil, err
		}
		changes = append(changes, change{orig: orig, now: m})
	}
	return changes, nil
}

// mustExist refuses, as not found, a pool with neither an object nor a machine.
func (s *Service) mustExist(ctx context.Context, pool string) error {
	if pool == backend.DefaultPool {
		return nil
	}
	recs, _, _, err := s.st.List(ctx, "machines", backend.Query{Limit: 1, Slim: slimMachines,
		Filters: []backend.Filter{s.indexFilter("Pool", backend.OpEq, pool)}})
	if err != nil || len(recs) > 0 {
		return err
	}
	p, err := s.poolObject(ctx, pool)
	if err != nil {
		return err
	}
	if p == nil {
		return backend.NotFound(backend.ActionOp, "pools", pool)
	}
	return nil
}

// parseFilters turns pool/filter entries ("Runnable=Eq(true)", "Arch=amd64")
// into machine list filters with the object API's parser, one entry at a
// time so that two filters on one field are ANDed rather than the last one
// winning. Unknown fields are not acceptable, as on the object API.
func (s *Service) parseFilters(ctx context.Context, entries []string) ([]backend.Filter, error) {
	isParam := func(name string) bool {
		_, err := s.st.Get(ctx, "params", name)
		return err == nil
	}
	var out []backend.Filter
	for _, e := range entries {
		k, val, ok := strings.Cut(e, "=")
		if !ok || k == "" {
			return nil, backend.OpError(backend.EBADREQUEST, backend.ActionOp, "machines", "",
				fmt.Sprintf("%s: %q is not a <field>=<value> filter", keyFilter, e))
		}
		if backend.IsControlWord(k) {
			return nil, backend.OpError(backend.EBADREQUEST, backend.ActionOp, "machines", "",
				fmt.Sprintf("%s: %q is a list option, not a filter", keyFilter, k))
		}
		q, err := backend.ParseQuery(s.machines, url.Values{k: {val}}, isParam)
		if err != nil {
			be := backend.AsError(err)
			msgs := make([]string, len(be.Messages))
			for i, m := range be.Messages {
				msgs[i] = keyFilter + ": " + m
			}
			return nil, &backend.Error{Code: be.Code, Op: backend.ActionOp, Model: "machines", Messages: msgs, Err: err}
		}
		out = append(out, q.Filters...)
	}
	return out, nil
}

// resolveList maps pool/machine-list entries to machine UUIDs. A machine
// that does not exist, or that the caller's tenant cannot see, is reported
// by the entry that named it; nothing changes. refs maps each UUID back to
// the entry that named it, for error messages.
func (s *Service) resolveList(ctx context.Context, entries []string, visible []string) (uuids []string, refs map[string]string, err error) {
	var vis map[string]bool
	if visible != nil {
		vis = make(map[string]bool, len(visible))
		for _, k := range visible {
			vis[k] = true
		}
	}
	refs = map[string]string{}
	var missing []string
	for _, e := range entries {
		rec, err := s.lookupMachine(ctx, e)
		if err != nil && !backend.IsCode(err, backend.ENOTFOUND) {
			return nil, nil, err
		}
		if err != nil || (vis != nil && !vis[rec.Key]) {
			missing = append(missing, e)
			continue
		}
		if _, dup := refs[rec.Key]; !dup {
			refs[rec.Key] = e
			uuids = append(uuids, rec.Key)
		}
	}
	if len(missing) > 0 {
		return nil, nil, backend.OpError(backend.ENOTFOUND, backend.ActionOp, "machines", "",
			fmt.Sprintf("%s: machines not found: %s", keyMachineList, strings.Join(missing, ", ")))
	}
	return uuids, refs, nil
}

// lookupMachine reads a machine by UUID or "<Index>:<value>" of a unique
// index (Name:m1, Uuid:..., Key:...).
func (s *Service) lookupMachine(ctx context.Context, ref string) (rec backend.Record, err error) {
	idx, val, ok := strings.Cut(ref, ":")
	if !ok {
		return s.st.Get(ctx, "machines", ref)
	}
	ix, known := s.machines.Indexes[idx]
	switch {
	case !known:
		return rec, backend.OpError(backend.EBADREQUEST, backend.ActionOp, "machines", "",
			fmt.Sprintf("%s: %q: no index %s", keyMachineList, ref, idx))
	case !ix.Unique:
		return rec, backend.OpError(backend.EBADREQUEST, backend.ActionOp, "machines", "",
			fmt.Sprintf("%s: %q: index %s is not unique", keyMachineList, ref, idx))
	case idx == "Uuid" || idx == "Key":
		return s.st.Get(ctx, "machines", val)
	}
	return s.st.GetBy(ctx, "machines", idx, val)
}

func badRequest(pool, format string, args ...any) error {
	return backend.OpError(backend.EBADREQUEST, backend.ActionOp, "pools", pool, fmt.Sprintf(format, args...))
}

// publish sends one machines "update" event per changed machine, after the
// commit (so subscribers never see a change that was rolled back).
func (s *Service) publish(ctx context.Context, changes []change, principal string) {
	if s.bus == nil {
		return
	}
	for _, e := range s.events(ctx, changes, principal) {
		s.bus.Publish(ctx, e)
	}
}

// events are the machines "update" events of changes.
func (s *Service) events(ctx context.Context, changes []change, principal string) []backend.Event {
	now := s.now()
	out := make([]backend.Event, 0, len(changes))
	for _, c := range changes {
		obj, err1 := json.Marshal(sanitized(c.now))
		orig, err2 := json.Marshal(sanitized(c.orig))
		if err := errors.Join(err1, err2); err != nil {
			s.log.ErrorContext(ctx, "pool event encoding", "machine", c.now.Uuid, "err", err)
			continue
		}
		out = append(out, backend.Event{Time: now, Type: "machines", Action: "update", Key: c.now.Uuid,
			Principal: principal, Object: obj, Original: orig})
	}
	return out
}

// sanitized drops the machine Secret: events reach streams and callbacks.
func sanitized(m *backend.Machine) *backend.Machine {
	c := *m
	c.Sanitize()
	return &c
}
