package objects

import (
	"context"
	"fmt"
	"strings"

	"github.com/provgate/provgate/backend"
)

// References between objects (a machine's profiles, stage, bootenv,
// workflow, tasks and pool; a stage's tasks, profiles and bootenv; a
// workflow's stages; a profile's profiles) follow two rules:
//
//   - A reference the write adds must name an object the caller may see
//     (backend.CanSee). A missing object and a hidden one are refused alike:
//     invalid (ValidationError) with the same message, so the answer never tells
//     whether a hidden object exists.
//   - A reference already stored is not checked against the caller, so an
//     administrator's choice does not block its owner's unrelated edit; if
//     its object has gone, the object is saved but not available, with the
//     message in Errors.

// refs checks the references of one write. old lists what is stored (nil on
// create).
type refs struct {
	s   *core
	ctx context.Context
	c   *check
}

// look returns prefix/key as this write may use it: nil when it does not
// exist or, for a reference the write adds, when the caller may not see it.
func (r refs) look(prefix, key string, added bool) (backend.Model, error) {
	if key == "" {
		return nil, nil
	}
	if added {
		ok, err := backend.CanSee(r.ctx, prefix, key)
		if err != nil || !ok {
			return nil, err
		}
	}
	return r.s.load(r.ctx, prefix, key)
}

// problem records msg as a refusal for an added reference, else as a reason
// the object is not available. bare messages carry no "<key>: " prefix (DRP
// writes a machine's stage, bootenv and workflow problems without it).
func (r refs) problem(added, bare bool, format string, args ...any) {
	switch {
	case added && bare:
		r.c.badBare(format, args...)
	case added:
		r.c.bad(format, args...)
	case bare:
		r.c.soft = append(r.c.soft, fmt.Sprintf(format, args...))
	default:
		r.c.warn(format, args...)
	}
}

// one checks a reference to the prefix object name (label names its kind
// in messages; old is the name stored; owner the referring object, as
// messages name it). It returns the object when it exists and is
// available, and otherwise records why not.
func (r refs) one(prefix, label, name, old, owner string, bare bool) (backend.Model, error) {
	added := name != old
	m, err := r.look(prefix, name, added)
	if err != nil {
		return nil, err
	}
	switch {
	case m == nil:
		r.problem(added, bare, "%s %s does not exist", label, name)
	case !m.Env().Available:
		r.problem(added, bare, "%s wants %s %s, which is not available", owner, label, name)
	default:
		return m, nil
	}
	return nil, nil
}

// list checks a list of names of prefix objects. missing formats the
// message of one absent entry from its name and index.
func (r refs) list(prefix string, names, old []string, missing func(name string, i int) string) error {
	for i, n := range names {
		added := !contains(old, n)
		m, err := r.look(prefix, n, added)
		if err != nil {
			return err
		}
		if m == nil {
			r.problem(added, false, "%s", missing(n, i))
		}
	}
	return nil
}

// tasks checks a task list: plain entries are tasks; "stage:x" and
// "bootenv:x" name a stage and a bootenv; "action:", "chroot:" and
// "context:" entries name nothing stored.
func (r refs) tasks(names, old []string) error {
	for i, ent := range names {
		added := !contains(old, ent)
		kind, val, ok := strings.Cut(ent, ":")
		var prefix, label string
		switch {
		case !ok:
			prefix, label, val = "tasks", "Task", ent
		case kind == "stage":
			prefix, label = "stages", "Stage"
		case kind == "bootenv":
			prefix, label = "bootenvs", "BootEnv"
		case kind == "action" || kind == "chroot" || kind == "context":
			continue
		default:
			r.problem(added, false, "%s (at %d) is malformed", ent, i)
			continue
		}
		m, err := r.look(prefix, val, added)
		if err != nil {
			return err
		}
		if m == nil {
			r.problem(added, false, "%s %s (at %d) does not exist", label, val, i)
		}
	}
	return nil
}

// checkStageRefs: a stage's tasks, profiles and bootenv.
func (s *CRUD) checkStageRefs(ctx context.Context, st *backend.Stage, old backend.Model, c *check) error {
	r := refs{s: s.core, ctx: ctx, c: c}
	o, _ := old.(*backend.Stage)
	var oldTasks, oldProfiles []string
	oldBootEnv := ""
	if o != nil {
		oldTasks, oldProfiles, oldBootEnv = o.Tasks, o.Profiles, o.BootEnv
	}
	if err := r.tasks(st.Tasks, oldTasks); err != nil {
		return err
	}
	if err := r.list("profiles", st.Profiles, oldProfiles, func(n string, _ int) string {
		return "Profile " + n + " does not exist"
	}); err != nil {
		return err
	}
	if st.BootEnv == "" {
		return nil
	}
	_, err := r.one("bootenvs", "BootEnv", st.BootEnv, oldBootEnv, "Stage "+st.Name, false)
	return err
}

// checkWorkflowRefs: a workflow's stages.
func (s *CRUD) checkWorkflowRefs(ctx context.Context, wf *backend.Workflow, old backend.Model, c *check) error {
	r := refs{s: s.core, ctx: ctx, c: c}
	var oldStages []string
	if o, ok := old.(*backend.Workflow); ok {
		oldStages = o.Stages
	}
	for _, n := range wf.Stages {
		added := !contains(oldStages, n)
		st, err := r.look("stages", n, added)
		if err != nil {
			return err
		}
		switch {
		case st == nil:
			r.problem(added, false, "Stage %s does not exist", n)
		case !st.Env().Available:
			r.problem(added, false, "Stage %s is not available", n)
		}
	}
	return nil
}

// checkProfileRefs: the profiles a profile nests.
func (s *CRUD) checkProfileRefs(ctx context.Context, p *backend.Profile, old backend.Model, c *check) error {
	var oldProfiles []string
	if o, ok := old.(*backend.Profile); ok {
		oldProfiles = o.Profiles
	}
	return refs{s: s.core, ctx: ctx, c: c}.list("profiles", p.Profiles, oldProfiles, func(n string, _ int) string {
		return "Profile " + n + " does not exist"
	})
}

// checkMachineRefs checks what a machine names, in DRP's order and words:
// its workflow, stage and bootenv first (messages without the key prefix),
// then its profiles, tasks and pool. It returns the workflow to apply when
// the write changes it (nil to apply none, or when it cannot be used).
func (s *CRUD) checkMachineRefs(ctx context.Context, m *backend.Machine, o *backend.Machine, c *check) (*backend.Workflow, error) {
	r := refs{s: s.core, ctx: ctx, c: c}
	var oldProfiles, oldTasks []string
	oldStage, oldBootEnv, oldWorkflow, oldPool := "", "", "", backend.DefaultPool
	if o != nil {
		oldProfiles, oldTasks = o.Profiles, o.Tasks
		oldStage, oldBootEnv, oldWorkflow, oldPool = o.Stage, o.BootEnv, o.Workflow, o.Pool
	}
	// A workflow the write sets (and that may be used) rebuilds the task
	// list.
	var wf *backend.Workflow
	if m.Workflow != "" {
		w, err := r.one("workflows", "Workflow", m.Workflow, oldWorkflow, "Machine "+m.Uuid, true)
		if err != nil {
			return nil, err
		}
		if w != nil && m.Workflow != oldWorkflow {
			wf = w.(*backend.Workflow)
		}
	}
	if m.Stage != "" && m.Stage != backend.NoStage {
		if _, err := r.one("stages", "Stage", m.Stage, oldStage, "Machine "+m.Uuid, true); err != nil {
			return nil, err
		}
	}
	if m.BootEnv != "" {
		added := m.BootEnv != oldBootEnv
		b, err := r.look("bootenvs", m.BootEnv, added)
		if err != nil {
			return nil, err
		}
		switch {
		case b == nil:
			r.problem(added, true, "Bootenv %s does not exist", m.BootEnv)
		case b.(*backend.BootEnv).OnlyUnknown:
			r.problem(added, true, "BootEnv %s does not allow Machine assignments, it has the OnlyUnknown flag.", m.BootEnv)
		case !b.Env().Available:
			r.problem(added, true, "BootEnv %s is not available", m.BootEnv)
		}
	}
	if o == nil || !equalStrings(m.Profiles, oldProfiles) {
		first := map[string]int{}
		for i, p := range m.Profiles {
			if j, dup := first[p]; dup {
				c.bad("Duplicate profile %s: at %d and %d", p, j, i)
				continue
			}
			first[p] = i
		}
	}
	if err := r.list("profiles", m.Profiles, oldProfiles, func(n string, i int) string {
		return fmt.Sprintf("Profile %s (at %d) does not exist", n, i)
	}); err != nil {
		return nil, err
	}
	// A new workflow replaces the task list, so the tasks sent with it are
	// not the machine's.
	if m.Workflow == oldWorkflow || m.Workflow == "" {
		if err := r.tasks(m.Tasks, oldTasks); err != nil {
			return nil, err
		}
	}
	// Pools have no missing state: a pool exists while machines name it.
	// So the rule is visibility alone, which cannot tell a hidden pool from
	// an unused name: a write that changes Pool must name "default" or a
	// pool the caller may see.
	if m.Pool != oldPool && m.Pool != backend.DefaultPool && backend.ValidName(m.Pool) {
		ok, err := backend.CanSee(ctx, "pools", m.Pool)
		if err != nil {
			return nil, err
		}
		if !ok {
			c.bad("Pool %s does not exist", m.Pool)
		}
	}
	return wf, nil
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
