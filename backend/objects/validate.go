package objects

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strings"

	"github.com/google/uuid"

	"github.com/provgate/provgate/backend"
)

// check is the outcome of validating one object: hard problems reject the
// write as invalid (ValidationError); soft ones leave the object saved with
// Available false and the messages in Errors, as DRP does for a user whose
// role is missing, a plugin whose configuration is wrong, or a reference
// that was valid when written and whose object has gone since.
//
// prefix starts every message of the kinds whose validation DRP reports
// with the object's key ("<uuid>: Profile foo (at 0) does not exist"):
// machines, profiles, stages and workflows.
type check struct {
	hard   backend.ValidationErrors
	soft   []string
	prefix string
}

func (c *check) bad(format string, args ...any) {
	c.hard.Add("%s", c.prefix+fmt.Sprintf(format, args...))
}

// badBare is bad without the key prefix.
func (c *check) badBare(format string, args ...any) { c.hard.Add(format, args...) }

func (c *check) warn(format string, args ...any) {
	c.soft = append(c.soft, c.prefix+fmt.Sprintf(format, args...))
}

// prepare fills, normalises and validates m before a write, by the rules
// of its kind (rules.go). old is the stored version (nil on create). It
// seals secure params, rebuilds a machine's task list when its workflow
// changes and sets Validated, Available and Errors.
func (s *core) prepare(ctx context.Context, m, old backend.Model) error {
	m.Fill()
	r := s.rulesOf(m.Prefix())
	c := &check{}
	if r.keyedMessages {
		c.prefix = m.Key() + ": "
	}
	for _, f := range []checkFunc{r.validate, r.references, r.params} {
		if f == nil {
			continue
		}
		if err := f(ctx, m, old, c); err != nil {
			return err
		}
	}
	if r.configured != nil && c.hard.Empty() {
		r.configured(m, c)
	}
	if err := c.hard.Err(m.Prefix(), m.Key()); err != nil {
		return err
	}
	// Only a valid write is checked for what it hands out: an invalid one
	// is 422 whoever sends it (docs/design.md §5.9).
	if err := s.checkGrants(ctx, r, m, old); err != nil {
		return err
	}
	m.Env().SetValid(c.soft)
	return nil
}

func nameRule(c *check, name string, ok func(string) bool) {
	if !ok(name) {
		c.bad("Invalid Name `%s`", name)
	}
}

func (s *CRUD) checkUser(ctx context.Context, u *backend.User, _ backend.Model, c *check) error {
	nameRule(c, u.Name, backend.ValidUserName)
	for _, r := range u.Roles {
		role, err := s.load(ctx, "roles", r)
		switch {
		case err != nil:
			c.warn("Role %s cannot be checked", r)
		case role == nil:
			c.warn("Role %s does not exist", r)
		case !role.Env().Available:
			c.warn("Role %s is not available", r)
		}
	}
	return nil
}

// checkRole validates claims as DRP does (docs/design.md §5.1): every listed scope
// must be known, every action's base must be valid in each listed scope, and
// update:<pointer> must carry an RFC 6901 pointer.
func (s *CRUD) checkRole(_ context.Context, r *backend.Role, _ backend.Model, c *check) error {
	nameRule(c, r.Name, backend.ValidName)
	checkClaims(s.kinds, r.Claims, c)
	return nil
}

func checkClaims(kinds *backend.Catalog, claims []backend.Claim, c *check) {
	seen := map[string]bool{}
	add := func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		if !seen[msg] {
			seen[msg] = true
			c.bad("%s", msg)
		}
	}
	for _, cl := range claims {
		var scopes []string
		all := strings.TrimSpace(cl.Scope) == "*"
		if !all {
			for _, sc := range strings.Split(cl.Scope, ",") {
				sc = strings.TrimSpace(sc)
				if !kinds.ValidScope(sc) {
					add("No such scope '%s'", sc)
					continue
				}
				scopes = append(scopes, sc)
			}
		}
		if strings.TrimSpace(cl.Action) == "*" {
			continue
		}
		for _, a := range strings.Split(cl.Action, ",") {
			a = strings.TrimSpace(a)
			if all {
				if !anyScopeHas(kinds, a) {
					add("No such action '%s'", a)
				}
			} else {
				for _, sc := range scopes {
					if !kinds.ValidAction(sc, a) {
						add("No such action '%s'", a)
					}
				}
			}
			if ptr, ok := strings.CutPrefix(a, "update:"); ok && !backend.ValidPointer(ptr) {
				add("Invalid JSON pointer '%s' in action '%s'", ptr, a)
			}
		}
	}
}

func anyScopeHas(kinds *backend.Catalog, action string) bool {
	for _, sc := range kinds.Scopes() {
		if kinds.ValidAction(sc, action) {
			return true
		}
	}
	return false
}

func (s *CRUD) checkTenant(ctx context.Context, t *backend.Tenant, old backend.Model, c *check) error {
	nameRule(c, t.Name, backend.ValidName)
	keys := make([]string, 0, len(t.Members))
	for k := range t.Members {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !s.kinds.ValidScope(k) {
			c.bad("No such scope '%s'", k)
		}
		if t.Members[k] == nil {
			t.Members[k] = []string{}
		}
	}
	if err := s.checkMembers(ctx, t, old, keys, c); err != nil {
		return err
	}
	// Only users this write adds can be in another tenant: those the
	// stored version held passed this check when they were added. A write
	// that adds none reads no other tenant, so its cost does not grow with
	// the number of tenants (docs/design.md §14.4).
	var held []string
	if o, ok := old.(*backend.Tenant); ok {
		held = o.Users
	}
	var tenants []backend.Model
	for _, u := range t.Users {
		if !contains(held, u) && !strings.HasPrefix(u, "auth-groups:") {
			var err error
			if tenants, err = s.listAll(ctx, "tenants", backend.Query{}); err != nil {
				return err
			}
			break
		}
	}
	for _, u := range t.Users {
		if strings.HasPrefix(u, "auth-groups:") {
			continue
		}
		// A user the caller cannot see is answered as one that does not
		// exist, unless the tenant held it already.
		var ok bool
		var err error
		if contains(held, u) {
			ok, err = s.exists(ctx, "users", u)
		} else {
			ok, err = s.visible(ctx, "users", u)
		}
		if err != nil {
			return err
		}
		if !ok {
			c.bad("User %s does not exist", u)
			continue
		}
		for _, o := range tenants {
			ot := o.(*backend.Tenant)
			if ot.Name != t.Name && contains(ot.Users, u) {
				c.bad("User %s already in tenant %s, and users can only be in one tenant at a time", u, ot.Name)
			}
		}
	}
	return nil
}

// checkMembers resolves and checks what a write adds to Members
// (docs/design.md §6.5). A key may name its object by a unique index, as a
// path does (machines: Name:m1); it is stored as the object's own key, which
// is what visibility compares. A key that names no object the caller may see
// is refused like a missing one, whoever writes: a hidden object and a
// missing one get the same answer, and a key naming nothing would restrict
// the tenant's users to nothing without a word. Keys the stored version held
// are kept as they are, so an edit never fails on an administrator's choice.
func (s *CRUD) checkMembers(ctx context.Context, t *backend.Tenant, old backend.Model, scopes []string, c *check) error {
	var had map[string][]string
	if o, ok := old.(*backend.Tenant); ok {
		had = o.Members
	}
	for _, scope := range scopes {
		k := s.kinds.Kind(scope)
		if !s.kinds.ValidScope(scope) || k == nil {
			continue
		}
		keys := make([]string, 0, len(t.Members[scope]))
		for _, key := range t.Members[scope] {
			if contains(had[scope], key) {
				keys = appendNew(keys, key)
				continue
			}
			resolved, problem, err := s.memberKey(ctx, k, key)
			if err != nil {
				return err
			}
			if problem != "" {
				c.bad("Members %s: %s", scope, problem)
				continue
			}
			keys = appendNew(keys, resolved)
		}
		t.Members[scope] = keys
	}
	return nil
}

// memberKey is the key of the object key names (its own key, or an index
// lookup such as Name:m1) when the caller may see it; otherwise problem says
// why not, never telling a hidden object from a missing one.
func (s *CRUD) memberKey(ctx context.Context, k *backend.Kind, key string) (resolved, problem string, err error) {
	missing := key + " does not exist"
	rec, err := s.readRecord(ctx, k, key, backend.ReadOp)
	switch {
	case backend.IsCode(err, backend.ENOTFOUND):
		return "", missing, nil
	case backend.IsCode(err, backend.EBADREQUEST):
		// An index that cannot address one object says so, whatever exists.
		return "", strings.Join(backend.AsError(err).Messages, "; "), nil
	case err != nil:
		return "", "", err
	}
	ok, err := backend.CanSee(ctx, k.Prefix, rec.Key)
	if err != nil {
		return "", "", err
	}
	if !ok {
		return "", missing, nil
	}
	return rec.Key, "", nil
}

// appendNew appends key to keys unless it is there already: Name:m1 and
// m1's key name one member.
func appendNew(keys []string, key string) []string {
	if contains(keys, key) {
		return keys
	}
	return append(keys, key)
}

// archAliases maps the spellings DRP accepts to the normalised arch.
var archAliases = map[string]string{
	"amd64": "amd64", "x86_64": "amd64",
	"386": "386", "i386": "386", "i486": "386", "i586": "386", "i686": "386", "x86": "386",
	"arm64": "arm64", "aarch64": "arm64",
	"arm": "arm", "armhf": "arm", "armv7l": "arm", "armel": "armel",
	"ppc64le": "ppc64le", "ppc64": "ppc64", "s390x": "s390x",
	"mips": "mips", "mipsle": "mipsle", "mips64": "mips64", "mips64le": "mips64le",
	"riscv64": "riscv64", "loong64": "loong64",
}

func (s *CRUD) checkMachine(ctx context.Context, m *backend.Machine, old backend.Model, c *check) error {
	o, _ := old.(*backend.Machine)
	wf, err := s.checkMachineRefs(ctx, m, o, c)
	if err != nil {
		return err
	}
	nameRule(c, m.Name, backend.ValidMachineName)
	if _, err := uuid.Parse(m.Uuid); err != nil {
		c.bad("Invalid Uuid `%s`", m.Uuid)
	}
	if m.Address != "" && net.ParseIP(m.Address) == nil {
		c.bad("Invalid Address `%s`", m.Address)
	}
	if m.CurrentJob != "" {
		if _, err := uuid.Parse(m.CurrentJob); err != nil {
			c.bad("Invalid CurrentJob `%s`", m.CurrentJob)
		}
	}
	if a, ok := archAliases[strings.ToLower(m.Arch)]; ok {
		m.Arch = a
	} else {
		c.bad("Invalid Arch `%s`", m.Arch)
	}
	if !backend.ValidName(m.Pool) {
		c.bad("Invalid Pool `%s`", m.Pool)
	}
	if !contains(backend.PoolStatuses, m.PoolStatus) {
		c.bad("Invalid PoolStatus `%s`", m.PoolStatus)
	}
	for _, hw := range m.HardwareAddrs {
		if _, err := net.ParseMAC(hw); err != nil {
			c.bad("Invalid Hardware Address `%s`", hw)
		}
	}
	// Name is a unique index: a clash is reported before the store's own
	// constraint. The message names the other machine only to a caller who
	// may see it.
	if backend.ValidMachineName(m.Name) {
		rec, err := s.st.GetBy(ctx, "machines", "Name", m.Name)
		switch {
		case err == nil && rec.Key != m.Uuid:
			seen, err := backend.CanSee(ctx, "machines", rec.Key)
			if err != nil {
				return err
			}
			if seen {
				c.bad("Name %s is already in use by machine %s", m.Name, rec.Key)
			} else {
				c.bad("Name %s is already in use", m.Name)
			}
		case err != nil && !backend.IsCode(err, backend.ENOTFOUND):
			return err
		}
	}
	switch {
	case wf != nil:
		return s.applyWorkflow(ctx, m, wf, c)
	case m.Workflow == "" && o != nil && o.Workflow != "":
		backend.SetWorkflow(m, nil, nil)
	case o == nil && m.Workflow == "":
		// A new machine without a workflow has nothing to run: its task
		// list is complete unless it was given one (docs/design.md §10.1).
		m.WorkflowComplete = len(m.Tasks) == 0
	}
	return nil
}

// applyWorkflow rebuilds m's task list from its new workflow wf: each stage
// becomes "stage:<name>", its bootenv "bootenv:<name>", then its tasks. The
// workflow's stages are the workflow's business: a stage that has gone since
// is skipped, and noted.
func (s *CRUD) applyWorkflow(ctx context.Context, m *backend.Machine, wf *backend.Workflow, c *check) error {
	stages := map[string]*backend.Stage{}
	for _, name := range wf.Stages {
		st, err := s.load(ctx, "stages", name)
		if err != nil {
			return err
		}
		if st == nil {
			c.warn("Stage %s of Workflow %s does not exist", name, wf.Name)
			continue
		}
		stages[name] = st.(*backend.Stage)
	}
	backend.SetWorkflow(m, wf, func(n string) *backend.Stage { return stages[n] })
	return nil
}

// checkBootEnv validates a bootenv as DRP does: its param lists hold param
// names and its templates have distinct names. A bootenv that net-boots (it
// has a Kernel) also needs OS.Name and a pxelinux or ipxe template (unless
// Meta KernelIsLoader is "true"); without them it is saved but not
// available, and machines cannot use it.
func checkBootEnv(_ context.Context, b *backend.BootEnv, _ backend.Model, c *check) error {
	nameRule(c, b.Name, backend.ValidName)
	for _, p := range b.RequiredParams {
		if !backend.ValidParamName(p) {
			c.bad("Invalid Required Param `%s`", p)
		}
	}
	for _, p := range b.OptionalParams {
		if !backend.ValidParamName(p) {
			c.bad("Invalid Optional Param `%s`", p)
		}
	}
	seen := map[string]int{}
	for i, t := range b.Templates {
		if j, dup := seen[t.Name]; dup {
			c.bad("Template %d and %d have the same name %s", i, j, t.Name)
			continue
		}
		seen[t.Name] = i
	}
	if b.Kernel == "" {
		return nil
	}
	if name, _ := b.OS["Name"].(string); name == "" {
		c.warn("bootenv: Missing OS.Name")
	}
	loader := false
	for _, t := range b.Templates {
		switch t.Name {
		case "pxelinux", "pxelinux-mac", "ipxe", "ipxe-mac":
			loader = true
		}
	}
	if !loader && b.Meta["KernelIsLoader"] != "true" {
		c.warn("bootenv: Missing elilo or pxelinux template")
	}
	return nil
}

var (
	jobStates     = []string{backend.JobCreated, backend.JobRunning, backend.JobFailed, backend.JobFinished, backend.JobIncomplete}
	jobExitStates = []string{"reboot", "poweroff", "stop", "complete", "failed", ""}
)

func checkJob(_ context.Context, j *backend.Job, old backend.Model, c *check) error {
	if _, err := uuid.Parse(j.Uuid); err != nil {
		c.bad("Invalid Uuid `%s`", j.Uuid)
	}
	if !contains(jobStates, j.State) {
		c.bad("Invalid State `%s`", j.State)
	}
	if !contains(jobExitStates, j.ExitState) {
		c.bad("Invalid ExitState `%s`", j.ExitState)
	}
	// A job's token is handed out in the reply that creates it and never
	// stored; its extra claims are the task's, set by the server
	// (docs/design.md §8.7).
	j.Token = ""
	if o, ok := old.(*backend.Job); ok {
		j.ExtraClaims = o.ExtraClaims
		// A job belongs to the machine it was made for: moving it would
		// put another machine's state, and its jobfail callback, in the
		// hands of whoever may write the job.
		if o.Machine != j.Machine {
			c.bad("Machine cannot be changed")
		}
	}
	return nil
}

func (s *CRUD) checkPool(ctx context.Context, p *backend.Pool, old backend.Model, c *check) error {
	nameRule(c, p.Id, backend.ValidName)
	if p.ParentPool != "" {
		if !backend.ValidName(p.ParentPool) {
			c.bad("Invalid ParentPool `%s`", p.ParentPool)
		} else {
			// Walk up the stored parents; reaching p again is a cycle.
			seen := map[string]bool{p.Id: true}
			for cur := p.ParentPool; cur != ""; {
				if seen[cur] {
					c.bad("ParentPool %s would create a cycle", p.ParentPool)
					break
				}
				seen[cur] = true
				parent, err := s.load(ctx, "pools", cur)
				if err != nil {
					return err
				}
				if parent == nil {
					break
				}
				cur = parent.(*backend.Pool).ParentPool
			}
		}
	}
	o, _ := old.(*backend.Pool)
	if o == nil {
		o = &backend.Pool{}
	}
	r := refs{s: s.core, ctx: ctx, c: c}
	for _, g := range []struct {
		name   string
		a, was *backend.PoolTransitionActions
	}{{"EnterActions", p.EnterActions, o.EnterActions}, {"ExitActions", p.ExitActions, o.ExitActions},
		{"AllocateActions", p.AllocateActions, o.AllocateActions}, {"ReleaseActions", p.ReleaseActions, o.ReleaseActions}} {
		if g.a == nil {
			continue
		}
		was := g.was
		if was == nil {
			was = &backend.PoolTransitionActions{}
		}
		// The workflow and profiles a group applies are references like a
		// machine's: a pool operation applies them to the machines it
		// moves, so they must not name what the writer may not see.
		if g.a.Workflow != "" && !backend.ValidName(g.a.Workflow) {
			c.bad("Invalid %s Workflow `%s`", g.name, g.a.Workflow)
		} else if g.a.Workflow != "" {
			added := g.a.Workflow != was.Workflow
			w, err := r.look("workflows", g.a.Workflow, added)
			if err != nil {
				return err
			}
			if w == nil {
				r.problem(added, false, "%s Workflow %s does not exist", g.name, g.a.Workflow)
			}
		}
		for _, pr := range g.a.AddProfiles {
			if !backend.ValidName(pr) {
				c.bad("Invalid %s Add Profile `%s`", g.name, pr)
				continue
			}
			added := !contains(was.AddProfiles, pr)
			m, err := r.look("profiles", pr, added)
			if err != nil {
				return err
			}
			if m == nil {
				r.problem(added, false, "%s Profile %s does not exist", g.name, pr)
			}
		}
		for _, pr := range g.a.RemoveProfiles {
			if !backend.ValidName(pr) {
				c.bad("Invalid %s Remove Profile `%s`", g.name, pr)
			}
		}
		for k := range g.a.AddParameters {
			if !backend.ValidParamName(k) {
				c.bad("Invalid %s Add Parameter `%s`", g.name, k)
			}
		}
		for _, k := range g.a.RemoveParameters {
			if !backend.ValidParamName(k) {
				c.bad("Invalid %s Remove Parameter `%s`", g.name, k)
			}
		}
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
