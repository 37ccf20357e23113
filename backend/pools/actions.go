package pools

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"

	"github.com/provgate/provgate/backend"
)

// actionSet is everything a verb does to each machine, resolved once per
// operation inside its transaction.
type actionSet struct {
	// groups are applied in order: the pools' groups, then the body's.
	groups []*backend.PoolTransitionActions
	// wf is the one workflow set, nil when no group names one.
	wf     *backend.Workflow
	stages map[string]*backend.Stage
}

// actions collects the action groups of verb v in their order (docs/design.md
// §11.4) and checks what they name:
//
//	add:      source pool's ExitActions, target's EnterActions, body
//	remove:   this pool's ExitActions, destination's EnterActions, body
//	allocate: AllocateActions, body
//	release:  ReleaseActions, body
//
// Profiles and params of all groups apply in that order, so the body's lists
// come last and win (a body remove-profiles can undo a pool's add-profiles).
// Exactly one workflow is set: the body's pool/workflow when not "", else the
// last group that names one; so on add and remove the enter workflow wins
// over the exit workflow, which runs only when the destination has none.
// A workflow or added profile that does not exist, or that the request body
// names and the caller may not see, is invalid and nothing changes.
func (s *Service) actions(ctx context.Context, v backend.PoolVerb, pool, from, to string, r *request) (*actionSet, error) {
	var names []string
	var pick []func(*backend.Pool) *backend.PoolTransitionActions
	switch v {
	case backend.PoolAdd, backend.PoolRemove:
		names = []string{from, to}
		pick = []func(*backend.Pool) *backend.PoolTransitionActions{
			func(p *backend.Pool) *backend.PoolTransitionActions { return p.ExitActions },
			func(p *backend.Pool) *backend.PoolTransitionActions { return p.EnterActions },
		}
	case backend.PoolAllocate:
		names = []string{pool}
		pick = []func(*backend.Pool) *backend.PoolTransitionActions{
			func(p *backend.Pool) *backend.PoolTransitionActions { return p.AllocateActions }}
	case backend.PoolRelease:
		names = []string{pool}
		pick = []func(*backend.Pool) *backend.PoolTransitionActions{
			func(p *backend.Pool) *backend.PoolTransitionActions { return p.ReleaseActions }}
	}
	a := &actionSet{stages: map[string]*backend.Stage{}}
	for i, name := range names {
		p, err := s.poolObject(ctx, name)
		if err != nil {
			return nil, err
		}
		if p != nil {
			if g := pick[i](p); g != nil {
				a.groups = append(a.groups, g)
			}
		}
	}
	a.groups = append(a.groups, r.overrides())

	wfName := ""
	for _, g := range a.groups {
		if g.Workflow != "" {
			wfName = g.Workflow
		}
	}
	invalid := func(model, key, format string, args ...any) error {
		return backend.NewError(backend.EINVALID, "ValidationError", model, key, fmt.Sprintf(format, args...))
	}
	// What the request body names is the caller's own reference: a
	// workflow or profile it may not see is answered exactly as one that
	// does not exist. The pools' own groups were checked when written.
	hidden := func(prefix, key string, fromBody bool) (bool, error) {
		if !fromBody {
			return false, nil
		}
		ok, err := backend.CanSee(ctx, prefix, key)
		return !ok, err
	}
	if wfName != "" {
		h, err := hidden("workflows", wfName, r.Workflow != "")
		if err != nil {
			return nil, err
		}
		rec, err := s.st.Get(ctx, "workflows", wfName)
		if h || backend.IsCode(err, backend.ENOTFOUND) {
			return nil, invalid("pools", pool, "%s: workflow %s does not exist", v, wfName)
		}
		if err != nil {
			return nil, err
		}
		a.wf = &backend.Workflow{}
		if err := json.Unmarshal(rec.Data, a.wf); err != nil {
			return nil, err
		}
		for _, st := range a.wf.Stages {
			if _, done := a.stages[st]; done {
				continue
			}
			rec, err := s.st.Get(ctx, "stages", st)
			if backend.IsCode(err, backend.ENOTFOUND) {
				// A missing stage is skipped by the task list, as on a
				// workflow PATCH (docs/design.md §10.1).
				a.stages[st] = nil
				continue
			}
			if err != nil {
				return nil, err
			}
			stage := &backend.Stage{}
			if err := json.Unmarshal(rec.Data, stage); err != nil {
				return nil, err
			}
			stage.Fill()
			a.stages[st] = stage
		}
	}
	checked := map[string]bool{}
	for gi, g := range a.groups {
		fromBody := gi == len(a.groups)-1
		for _, prof := range g.AddProfiles {
			if checked[prof] && !fromBody {
				continue
			}
			checked[prof] = true
			h, err := hidden("profiles", prof, fromBody)
			if err != nil {
				return nil, err
			}
			_, err = s.st.Get(ctx, "profiles", prof)
			if h || backend.IsCode(err, backend.ENOTFOUND) {
				return nil, invalid("pools", pool, "%s: profile %s does not exist", v, prof)
			}
			if err != nil {
				return nil, err
			}
		}
	}
	return a, nil
}

// maxParamClaims bounds the param claims of one operation: groups naming
// more params need update:/Params, which covers each of them.
const maxParamClaims = 100

// machineClaims are the claims the operation's changes need on the machine
// uuid: what a PATCH of the same fields needs. Every group counts, the
// pools' configured ones as much as the body's: a pool applies only what
// the caller of the operation could change by hand, so writing a pool's
// groups never lends its writer's rights to whoever moves machines through
// it (docs/design.md §11.4).
func (a *actionSet) machineClaims(uuid string) []backend.Claim {
	var params []string
	profiles := false
	for _, g := range a.groups {
		for name := range g.AddParameters {
			params = append(params, name)
		}
		params = append(params, g.RemoveParameters...)
		profiles = profiles || len(g.AddProfiles) > 0 || len(g.RemoveProfiles) > 0
	}
	sort.Strings(params)
	params = slices.Compact(params)
	var actions []string
	if len(params) > maxParamClaims {
		actions = append(actions, "update:/Params")
	} else {
		for _, name := range params {
			actions = append(actions, "update:/Params/"+backend.EscapePointer(name))
		}
	}
	if profiles {
		actions = append(actions, "update:/Profiles")
	}
	if a.wf != nil {
		actions = append(actions, "update:/Workflow")
	}
	out := make([]backend.Claim, 0, len(actions))
	for _, act := range actions {
		out = append(out, backend.Claim{Scope: "machines", Action: act, Specific: uuid})
	}
	return out
}

// authorizeChanges checks, for the caller of ctx, the claims the
// operation's changes need on every machine it claimed (machineClaims). A
// refusal is forbidden, naming the first missing claim (machines in key
// order); the caller's transaction then rolls everything back. A ctx that
// declares no access is refused (backend.Can); system work holds
// everything.
//
// Holding the claims on every machine ("*") settles it in one decision;
// otherwise each machine is decided on its own, stopping at the first
// refused, so the cost is bounded by the machines the caller's claims name.
func authorizeChanges(ctx context.Context, a *actionSet, keys []string) error {
	if len(keys) == 0 || len(a.machineClaims("*")) == 0 {
		return nil
	}
	ok, err := backend.Can(ctx, a.machineClaims("*")...)
	if err != nil || ok {
		return err
	}
	for _, k := range slices.Sorted(slices.Values(keys)) {
		cs := a.machineClaims(k)
		ok, err := backend.Can(ctx, cs...)
		if err != nil {
			return err
		}
		if ok {
			continue
		}
		missing := cs[0]
		for _, c := range cs {
			ok, err := backend.Can(ctx, c)
			if err != nil {
				return err
			}
			if !ok {
				missing = c
				break
			}
		}
		return &backend.Error{Code: backend.EFORBIDDEN, Type: "AUTH", Model: "machines", Key: k,
			Messages: []string{"Cannot change machine " + k, "Requires: " + missing.String()}}
	}
	return nil
}

// applyTo changes m for verb v, to being the pool m ends in, and sets its
// pool status:
//
//	add, remove: Pool=to, Joining while a workflow runs, else Free
//	allocate:    PoolAllocated=true, Building while a workflow runs, else InUse
//	release:     Destroying while a workflow runs, else Free; PoolAllocated
//	             becomes false in the same write, after the actions, because
//	             the completion hook only moves the status (a Destroying
//	             machine is not Free, so it cannot be allocated again early)
//
// A workflow whose task list is empty completes at once, so the machine goes
// straight to the stable status, as with no workflow.
func (a *actionSet) applyTo(v backend.PoolVerb, to string, m *backend.Machine) {
	if v == backend.PoolAllocate {
		m.PoolAllocated = true
	}
	for _, g := range a.groups {
		applyGroup(m, g)
	}
	running := false
	if a.wf != nil {
		backend.SetWorkflow(m, a.wf, func(name string) *backend.Stage { return a.stages[name] })
		running = !m.WorkflowComplete
	}
	var status string
	switch v {
	case backend.PoolAdd, backend.PoolRemove:
		m.Pool = to
		m.PoolAllocated = false
		status = backend.PoolJoining
	case backend.PoolAllocate:
		status = backend.PoolBuilding
	case backend.PoolRelease:
		m.PoolAllocated = false
		status = backend.PoolDestroying
	}
	if !running {
		status = backend.PoolStatusOnComplete(status)
	}
	m.PoolStatus = status
}

// applyGroup applies one group's profiles and params (docs/design.md §11.4): add
// profiles (present is no error), remove profiles, set params (replacing
// values), delete params (missing is no error). The workflow is set once by
// applyTo.
func applyGroup(m *backend.Machine, g *backend.PoolTransitionActions) {
	for _, p := range g.AddProfiles {
		if !contains(m.Profiles, p) {
			m.Profiles = append(m.Profiles, p)
		}
	}
	if len(g.RemoveProfiles) > 0 {
		kept := m.Profiles[:0:0]
		for _, p := range m.Profiles {
			if !contains(g.RemoveProfiles, p) {
				kept = append(kept, p)
			}
		}
		m.Profiles = kept
	}
	for k, v := range g.AddParameters {
		m.Params[k] = v
	}
	for _, k := range g.RemoveParameters {
		delete(m.Params, k)
	}
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}
