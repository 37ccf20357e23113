package gateway

import (
	"context"
	"encoding/json"
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/gofiber/fiber/v2"

	"github.com/provgate/provgate/backend"
	accessapi "github.com/provgate/provgate/gateway/access"
	"github.com/provgate/provgate/gateway/auth"
	"github.com/provgate/provgate/gateway/claims"
	"github.com/provgate/provgate/policies"
)

// The access explorer's routes (docs/design.md §9.8). The guard has
// already decided the route's own claim (users get <name> for questions
// about a user, tenants get, roles get a and b, ...); each answer is then
// made of decisions of the same policy, and lists only what the caller may
// see.

// explorer is the access explorer (docs/design.md §9.8) and the AuthZEN
// API: questions about who may do what, answered by the same authorization
// as requests (authorizer), reading only what the asker may see.
type explorer struct {
	*authorizer
	objects Objects
	// decisionLog is the decision log file the recent denials read.
	decisionLog string
	// candidates loads a candidate policy for the policy diff; nil serves none.
	candidates Candidates
}

func (s *explorer) serves() serves {
	return serves{claims.ServeExplain: s.handleExplain, claims.ServeUserMatrix: s.handleUserMatrix,
		claims.ServeWho: s.handleWho, claims.ServeTenantView: s.handleTenantView, claims.ServeRoleDiff: s.handleRoleDiff,
		claims.ServeDenials: s.handleDenials, claims.ServeEscalation: s.handleEscalation,
		claims.ServePolicyDiff: nilUnless(s.candidates != nil, s.handlePolicyDiff)}
}

// RoleDiffer compares two roles' claims by the policy's containment
// (policies/opa Engine.RoleDiff).
type RoleDiffer interface {
	RoleDiff(ctx context.Context, a, b []backend.Claim) (onlyA, onlyB []string, err error)
}

func (s *explorer) handleExplain(c *fiber.Ctx) error {
	var q accessapi.ExplainRequest
	if err := json.Unmarshal(c.Body(), &q); err != nil {
		return backend.NewError(backend.EBADREQUEST, "POST", "access", "explain", "body must be a JSON object: "+err.Error())
	}
	if q.Decision != "" {
		x, err := s.explainLogged(userContext(c), q.Decision)
		if err != nil {
			return err
		}
		return c.JSON(x)
	}
	if q.Method == "" || q.Path == "" {
		return backend.NewError(backend.EBADREQUEST, "POST", "access", "explain", "Method and Path are required")
	}
	ctx := userContext(c)
	target, err := s.explainTarget(ctx, principalOf(c), q.User)
	if err != nil {
		return err
	}
	r, err := parseTarget(q.Method, q.Path, q.Body)
	if err != nil {
		return err
	}
	return c.JSON(s.explain(ctx, target, r))
}

// synthRequest is the request a (scope, action, key) question stands for:
// the method DRP serves the action with and the object's path, so that
// rules reading input.method or input.path see what a real request shows.
func synthRequest(scope, action, key string) (method, path, op string) {
	base, _, _ := strings.Cut(action, ":")
	switch base {
	case "get", "list", "actions", "log", "token", "getSecure", "whoami":
		method = fiber.MethodGet
	case "delete":
		method = fiber.MethodDelete
	case "update", "updateSecure", "updateTaskList":
		method = fiber.MethodPatch
	case "password":
		method = fiber.MethodPut
	default:
		method = fiber.MethodPost
	}
	op = action
	if base == "update" {
		op = "patch"
	}
	path = apiBase + "/" + scope
	if key != "" && key != "*" && base != "list" && base != "create" {
		path += "/" + key
	}
	return method, path, op
}

// questionInput is the policy input of "may p do action on scope/key".
func questionInput(p *auth.Principal, scope, action, key string) policies.Input {
	method, path, op := synthRequest(scope, action, key)
	in := policies.Input{Principal: policyPrincipal(p), Required: []backend.Claim{{Scope: scope, Action: action, Specific: key}},
		Operation: op, Method: method, Path: path}
	if key != "" && key != "*" {
		in.Object = &policies.Object{Scope: scope, Key: key}
	}
	return in
}

// questioner decides questions about access without logging them as
// requests (policies/opa Engine.Question).
type questioner interface {
	Question(ctx context.Context, in policies.Input) (policies.Decision, error)
}

// question decides in as Decide does; a question about access is not a
// request, so it is not written to the decision log.
func (s *authorizer) question(ctx context.Context, in policies.Input) (policies.Decision, error) {
	if q, ok := s.policy.(questioner); ok {
		return q.Question(ctx, in)
	}
	return s.policy.Decide(ctx, in)
}

// may reports whether p may do action on scope/key, by the decision a
// request for it gets ("*" asks for every object of the scope).
func (s *explorer) may(ctx context.Context, p *auth.Principal, scope, action, key string) (bool, error) {
	return mayWith(ctx, s.question, p, scope, action, key)
}

// mayWith is may, decided by q (the served policy, or a candidate).
func mayWith(ctx context.Context, q decider, p *auth.Principal, scope, action, key string) (bool, error) {
	d, err := q(ctx, questionInput(p, scope, action, key))
	if err != nil {
		return false, &backend.Error{Code: backend.EINTERNAL, Type: "AUTH", Messages: []string{"authorization failed"}, Err: err}
	}
	return d.Allow && !d.NotFound, nil
}

func (s *explorer) handleUserMatrix(c *fiber.Ctx) error {
	ctx := userContext(c)
	p, err := s.userPrincipal(ctx, routeKey(c))
	if err != nil {
		return err
	}
	m, err := s.matrix(ctx, p)
	if err != nil {
		return err
	}
	return c.JSON(m)
}

// candidates are the specifics and action keys the user's roles name for
// a scope: the questions worth asking beyond "every object". Only the
// questions come from the roles; every answer is a decision.
type candidates struct {
	keys    map[string]map[string]bool // base action → specifics
	actions map[string]map[string]bool // base action → action keys with ':'
}

func (s *explorer) roleCandidates(ctx context.Context, p *auth.Principal) (map[string]*candidates, error) {
	out := map[string]*candidates{}
	get := func(scope string) *candidates {
		cd := out[scope]
		if cd == nil {
			cd = &candidates{keys: map[string]map[string]bool{}, actions: map[string]map[string]bool{}}
			out[scope] = cd
		}
		return cd
	}
	add := func(m map[string]map[string]bool, k, v string) {
		if m[k] == nil {
			m[k] = map[string]bool{}
		}
		m[k][v] = true
	}
	var held []backend.Claim
	for _, name := range p.Roles {
		v, err := s.objects.View(ctx, "roles", name)
		if backend.IsCode(err, backend.ENOTFOUND) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if r, ok := v.Model.(*backend.Role); ok {
			held = append(held, r.Claims...)
		}
	}
	for _, c := range held {
		for _, scope := range listOf(c.Scope, s.kinds.Scopes()) {
			if !s.kinds.ValidScope(scope) {
				continue
			}
			cd := get(scope)
			for _, action := range listOf(c.Action, s.kinds.Actions(scope)) {
				base, _, hasKey := strings.Cut(action, ":")
				if !s.kinds.ValidAction(scope, base) {
					continue
				}
				if hasKey {
					add(cd.actions, base, action)
				}
				for _, k := range listOf(c.Specific, nil) {
					if k != "*" && k != "" {
						add(cd.keys, base, k)
					}
				}
			}
		}
	}
	if p.IsUser() {
		add(get("users").keys, "get", p.Name)
		add(get("users").keys, "token", p.Name)
		add(get("users").keys, "password", p.Name)
	}
	return out, nil
}

// listOf splits a claim field: "*" is all (the given list), otherwise a
// comma list, trimmed.
func listOf(v string, all []string) []string {
	if strings.TrimSpace(v) == "*" {
		if all == nil {
			return []string{"*"}
		}
		return all
	}
	var out []string
	for _, part := range strings.Split(v, ",") {
		out = append(out, strings.TrimSpace(part))
	}
	return out
}

// matrix is what p can do, per scope and action (docs/design.md §9.8).
func (s *explorer) matrix(ctx context.Context, p *auth.Principal) (accessapi.Matrix, error) {
	return s.matrixWith(ctx, s.question, p)
}

// matrixWith is matrix, decided by q.
func (s *explorer) matrixWith(ctx context.Context, q decider, p *auth.Principal) (accessapi.Matrix, error) {
	cands, err := s.roleCandidates(ctx, p)
	if err != nil {
		return accessapi.Matrix{}, err
	}
	scopes := s.kinds.Scopes()
	out := accessapi.Matrix{User: p.Name, Scopes: make([]accessapi.ScopeAccess, len(scopes))}
	errs := make([]error, len(scopes))
	parallel(len(scopes), func(i int) {
		out.Scopes[i], errs[i] = s.scopeAccess(ctx, q, p, scopes[i], cands[scopes[i]])
	})
	for _, err := range errs {
		if err != nil {
			return accessapi.Matrix{}, err
		}
	}
	return out, nil
}

func (s *explorer) scopeAccess(ctx context.Context, q decider, p *auth.Principal, scope string, cd *candidates) (accessapi.ScopeAccess, error) {
	sa := accessapi.ScopeAccess{Scope: scope, Actions: []accessapi.ActionAccess{}}
	d, err := q(ctx, policyListInput(p, scope))
	if err != nil {
		return sa, &backend.Error{Code: backend.EINTERNAL, Type: "AUTH", Messages: []string{"authorization failed"}, Err: err}
	}
	if d.Visible != nil && d.Visible.Restricted {
		sa.Restricted = true
		sa.Visible = len(s.visibleNames(ctx, scope, d.Visible.Keys))
	}
	if cd == nil {
		cd = &candidates{}
	}
	// accessTo is the caller's access to action: all objects, some (those
	// among keys it may see) or none.
	accessTo := func(action string, keys map[string]bool) (string, []string, error) {
		all, err := mayWith(ctx, q, p, scope, action, "*")
		if err != nil {
			return "", nil, err
		}
		if all {
			return accessapi.All, nil, nil
		}
		var some []string
		for _, k := range slices.Sorted(maps.Keys(keys)) {
			ok, err := mayWith(ctx, q, p, scope, action, k)
			if err != nil {
				return "", nil, err
			}
			if ok && s.canSee(ctx, scope, k) {
				some = append(some, k)
			}
		}
		if len(some) > 0 {
			return accessapi.Some, some, nil
		}
		return accessapi.None, nil, nil
	}
	for _, action := range s.kinds.Actions(scope) {
		cell := accessapi.ActionAccess{Action: action, Access: accessapi.None}
		var err error
		if cell.Access, cell.Specifics, err = accessTo(action, cd.keys[action]); err != nil {
			return sa, err
		}
		for _, key := range slices.Sorted(maps.Keys(cd.actions[action])) {
			pa := accessapi.PointerAccess{Action: key}
			if pa.Access, pa.Specifics, err = accessTo(key, cd.keys[action]); err != nil {
				return sa, err
			}
			if pa.Access != accessapi.None && cell.Access != accessapi.All {
				cell.Pointers = append(cell.Pointers, pa)
			}
		}
		if cell.Access == accessapi.None && (len(cell.Specifics) > 0 || len(cell.Pointers) > 0) {
			cell.Access = accessapi.Some
		}
		sa.Actions = append(sa.Actions, cell)
	}
	return sa, nil
}

// parallel runs fn(0..n-1) on as many goroutines as there are CPUs.
func parallel(n int, fn func(i int)) {
	workers := min(runtime.GOMAXPROCS(0), n)
	var next sync.Mutex
	i := 0
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				next.Lock()
				j := i
				i++
				next.Unlock()
				if j >= n {
					return
				}
				fn(j)
			}
		}()
	}
	wg.Wait()
}

// objectVisible answers 404, exactly as for a missing object, unless the
// caller may see scope/key and it exists.
func (s *explorer) objectVisible(ctx context.Context, scope, key string) error {
	if s.kinds.Kind(scope) == nil {
		return nil
	}
	if !s.canSee(ctx, scope, key) {
		return notFound(fiber.MethodGet, scope, key)
	}
	// Through the read cache, which never answers a changed or deleted
	// object (docs/design.md §14.6).
	if _, err := s.objects.View(ctx, scope, key); err != nil {
		if backend.IsCode(err, backend.ENOTFOUND) {
			return notFound(fiber.MethodGet, scope, key)
		}
		return err
	}
	return nil
}

func (s *explorer) handleWho(c *fiber.Ctx) error {
	ctx := userContext(c)
	w, err := s.whoQuestion(ctx, strings.Clone(c.Query("scope")), strings.Clone(c.Query("action")), strings.Clone(c.Query("key")))
	if err != nil {
		return err
	}
	return c.JSON(w)
}

// whoQuestion checks a who-can question and answers it.
func (s *explorer) whoQuestion(ctx context.Context, scope, action, key string) (accessapi.Who, error) {
	if !s.kinds.ValidScope(scope) || !s.kinds.ValidAction(scope, action) || strings.ContainsAny(scope+action, ",*") {
		return accessapi.Who{}, backend.NewError(backend.EBADREQUEST, "GET", "access", "who", "scope and action must name one known scope and one action valid in it")
	}
	if key != "" {
		if err := s.objectVisible(ctx, scope, key); err != nil {
			return accessapi.Who{}, err
		}
	}
	return s.who(ctx, scope, action, key)
}

// who lists the users the caller may see who may do action on scope/key,
// and which machine and job tokens may.
func (s *explorer) who(ctx context.Context, scope, action, key string) (accessapi.Who, error) {
	out := accessapi.Who{Scope: scope, Action: action, Key: key, Users: []string{}, Tokens: []accessapi.TokenWho{}}
	users, err := s.visibleUsers(ctx)
	if err != nil {
		return out, err
	}
	allowed, err := s.mayAll(ctx, users, scope, action, key)
	if err != nil {
		return out, err
	}
	for i, u := range users {
		if allowed[i] {
			out.Users = append(out.Users, u.Name)
		}
	}
	// Machine tokens: a discovery token, an operations token (of the
	// machine asked about, or of a machine in no tenant), and the job
	// tokens of tasks with extra claims.
	machine := "(a machine in no tenant)"
	if scope == "machines" && key != "" {
		machine = key
	}
	tokens := []struct {
		kind, task, detail string
		p                  *auth.Principal
	}{
		{"discovery", "", "a machine's discovery token", &auth.Principal{Kind: auth.KindMachine, Name: auth.UnknownMachine,
			MachineToken: auth.MachineDiscovery, Method: auth.MethodMachine}},
		{"operations", "", "the operations token of " + machine, &auth.Principal{Kind: auth.KindMachine, Name: machine,
			MachineToken: auth.MachineOperations, Method: auth.MethodMachine}},
	}
	tasks, _, _, err := s.objects.List(ctx, "tasks", backend.Query{Limit: -1})
	if err != nil {
		return out, err
	}
	for _, m := range tasks {
		t, ok := m.(*backend.Task)
		if !ok || len(t.ExtraClaims) == 0 || !s.canSee(ctx, "tasks", t.Name) {
			continue
		}
		tokens = append(tokens, struct {
			kind, task, detail string
			p                  *auth.Principal
		}{"job", t.Name, "a job token of task " + t.Name + " (its extra claims) on " + machine,
			&auth.Principal{Kind: auth.KindMachine, Name: machine, MachineToken: auth.MachineOperations, Method: auth.MethodMachine,
				Claims: slices.Clone(t.ExtraClaims), Job: "job"}})
	}
	for _, t := range tokens {
		ok, err := s.may(ctx, t.p, scope, action, key)
		if err != nil {
			return out, err
		}
		out.Tokens = append(out.Tokens, accessapi.TokenWho{Kind: t.kind, Task: t.task, Allowed: ok, Detail: t.detail})
	}
	return out, nil
}

// batchQuestioner decides many questions at once, deciding users that
// provably get the same answer once (policies/opa Engine.Questions).
type batchQuestioner interface {
	Questions(ctx context.Context, ins []policies.Input) ([]policies.Decision, error)
}

// mayAll reports, for each user as its login, whether it may do action on
// scope/key.
func (s *explorer) mayAll(ctx context.Context, users []*backend.User, scope, action, key string) ([]bool, error) {
	ins := make([]policies.Input, len(users))
	for i, u := range users {
		ins[i] = questionInput(&auth.Principal{Kind: auth.KindUser, Name: u.Name, Grantor: u.Name, Roles: u.Roles, Method: auth.MethodBasic},
			scope, action, key)
	}
	return s.decideAll(ctx, ins)
}

// decideAll reports whether each question's decision allows it (and does
// not hide its object): in one batch where the policy can, else one
// question at a time on every CPU.
func (s *explorer) decideAll(ctx context.Context, ins []policies.Input) ([]bool, error) {
	allowed := make([]bool, len(ins))
	if bq, ok := s.policy.(batchQuestioner); ok {
		ds, err := bq.Questions(ctx, ins)
		if err != nil {
			return nil, &backend.Error{Code: backend.EINTERNAL, Type: "AUTH", Messages: []string{"authorization failed"}, Err: err}
		}
		for i, d := range ds {
			allowed[i] = d.Allow && !d.NotFound
		}
		return allowed, nil
	}
	errs := make([]error, len(ins))
	parallel(len(ins), func(i int) {
		d, err := s.question(ctx, ins[i])
		if err != nil {
			errs[i] = &backend.Error{Code: backend.EINTERNAL, Type: "AUTH", Messages: []string{"authorization failed"}, Err: err}
			return
		}
		allowed[i] = d.Allow && !d.NotFound
	})
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return allowed, nil
}

// visibleUsers lists the users the caller may see.
func (s *explorer) visibleUsers(ctx context.Context) ([]*backend.User, error) {
	ms, _, _, err := s.objects.List(ctx, "users", backend.Query{Limit: -1})
	if err != nil {
		return nil, err
	}
	out := make([]*backend.User, 0, len(ms))
	for _, m := range ms {
		if u, ok := m.(*backend.User); ok && s.canSee(ctx, "users", u.Name) {
			out = append(out, u)
		}
	}
	return out, nil
}

func (s *explorer) handleTenantView(c *fiber.Ctx) error {
	v, err := s.tenantView(userContext(c), routeKey(c))
	if err != nil {
		return err
	}
	return c.JSON(v)
}

// tenantView is what tenant name shows its users, per scope.
func (s *explorer) tenantView(ctx context.Context, name string) (accessapi.TenantView, error) {
	m, _, err := s.objects.Get(ctx, "tenants", name)
	if err != nil {
		return accessapi.TenantView{}, err
	}
	t, ok := m.(*backend.Tenant)
	if !ok {
		return accessapi.TenantView{}, backend.Errorf(backend.EINTERNAL, "tenants/%s: unexpected %T", name, m)
	}
	out := accessapi.TenantView{Tenant: t.Name, Users: s.visibleNames(ctx, "users", t.Users), Scopes: []accessapi.TenantScope{}}
	for _, scope := range s.kinds.Scopes() {
		keys, listed := t.Members[scope]
		ts := accessapi.TenantScope{Scope: scope, Visibility: accessapi.Unrestricted}
		switch {
		case !listed:
		case len(keys) == 0:
			ts.Visibility = accessapi.Nothing
		default:
			ts.Visibility, ts.Keys = accessapi.Listed, s.visibleNames(ctx, scope, keys)
		}
		out.Scopes = append(out.Scopes, ts)
	}
	return out, nil
}

func (s *explorer) handleRoleDiff(c *fiber.Ctx) error {
	d, err := s.roleDiff(userContext(c), strings.Clone(c.Query("a")), strings.Clone(c.Query("b")))
	if err != nil {
		return err
	}
	return c.JSON(d)
}

// roleDiff compares roles a and b by the policy's containment.
func (s *explorer) roleDiff(ctx context.Context, a, b string) (accessapi.RoleDiff, error) {
	rd, ok := s.policy.(RoleDiffer)
	if !ok {
		return accessapi.RoleDiff{}, unavailable("role diff")
	}
	var claims [2][]backend.Claim
	for i, name := range []string{a, b} {
		if err := s.objectVisible(ctx, "roles", name); err != nil {
			return accessapi.RoleDiff{}, err
		}
		m, _, err := s.objects.Get(ctx, "roles", name)
		if err != nil {
			return accessapi.RoleDiff{}, err
		}
		if r, ok := m.(*backend.Role); ok {
			claims[i] = r.Claims
		}
	}
	onlyA, onlyB, err := rd.RoleDiff(ctx, claims[0], claims[1])
	if err != nil {
		return accessapi.RoleDiff{}, err
	}
	return accessapi.RoleDiff{A: a, B: b, OnlyA: nonNil(onlyA), OnlyB: nonNil(onlyB)}, nil
}

// MaxDenials bounds the refusals one answer lists.
const MaxDenials = 200

func (s *explorer) handleDenials(c *fiber.Ctx) error {
	ds, err := s.denials(userContext(c))
	if err != nil {
		return err
	}
	return c.JSON(ds)
}

// denials are the newest refusals of the decision log whose principal the
// caller may ask about and whose object it may see.
func (s *explorer) denials(ctx context.Context) ([]accessapi.LoggedDecision, error) {
	if s.decisionLog == "" {
		return []accessapi.LoggedDecision{}, nil
	}
	out, err := accessapi.ReadDecisionLog(s.decisionLog, MaxDenials, func(l accessapi.LoggedDecision) bool {
		return !l.Result.Allow && len(l.Input.Required) > 0 && s.mayRead(ctx, l)
	})
	if err != nil {
		return nil, backend.Errorf(backend.EINTERNAL, "decision log: %v", err)
	}
	if out == nil {
		out = []accessapi.LoggedDecision{}
	}
	return out, nil
}

// mayRead: the caller may ask about a logged decision's principal and see
// its object.
func (s *explorer) mayRead(ctx context.Context, l accessapi.LoggedDecision) bool {
	p := l.Input.Principal
	scope := "users"
	if p.Kind == "machine" {
		scope = "machines"
	}
	asker := askerOf(ctx)
	self := asker != nil && asker.IsUser() && p.Kind == "user" && p.Name == asker.Name
	if !self && s.askAbout(ctx, scope, p.Name) != nil {
		return false
	}
	if o := l.Input.Object; o != nil && !s.canSee(ctx, o.Scope, o.Key) {
		return false
	}
	return true
}

// explainLogged explains a logged decision again: its logged input at its
// logged time. A decision the caller may not read is answered exactly as
// one that is not in the log.
func (s *explorer) explainLogged(ctx context.Context, id string) (accessapi.Explanation, error) {
	var found []accessapi.LoggedDecision
	if s.decisionLog != "" {
		var err error
		found, err = accessapi.ReadDecisionLog(s.decisionLog, 1, func(l accessapi.LoggedDecision) bool { return l.DecisionID == id })
		if err != nil {
			return accessapi.Explanation{}, backend.Errorf(backend.EINTERNAL, "decision log: %v", err)
		}
	}
	if len(found) == 0 || !s.mayRead(ctx, found[0]) {
		return accessapi.Explanation{}, backend.NewError(backend.ENOTFOUND, "GET", "decisions", id, "Not Found")
	}
	l := found[0]
	in := l.Input
	var x policies.Explanation
	var err error
	if r, ok := s.policy.(Replayer); ok {
		x, err = r.ExplainReplay(ctx, in, l.Replay())
	} else {
		x, err = s.explainDecision(ctx, in)
	}
	if err != nil {
		return accessapi.Explanation{}, &backend.Error{Code: backend.EINTERNAL, Messages: []string{"authorization failed"}, Err: err}
	}
	out := accessapi.Explanation{User: in.Principal.Name, Method: in.Method, Path: in.Path, Allowed: x.Decision.Allow,
		Required: append([]backend.Claim{}, in.Required...), Messages: []string{}, Missing: []backend.Claim{}, GrantedBy: []string{},
		DecisionID: l.DecisionID, Revision: x.Revision}
	switch {
	case x.Decision.NotFound:
		out.Status, out.Messages = 404, []string{"Not Found"}
	case !x.Decision.Allow:
		out.Status, out.Messages = 403, append([]string{"Cannot access " + in.Path}, x.Decision.Reasons...)
	default:
		out.Status = 200
	}
	out.Steps = append([]accessapi.Step{{Step: "route", Outcome: accessapi.Pass, Detail: "replayed from the decision log at " +
		l.Timestamp.UTC().Format("2006-01-02 15:04:05 MST") + " with the policy now served"}},
		accessapi.TrailSteps(x, func(scope, name string) bool { return s.canSee(ctx, scope, name) })...)
	return out, nil
}

// Replayer evaluates a logged input as it was decided (policies/opa
// Engine.ExplainReplay).
type Replayer interface {
	ExplainReplay(ctx context.Context, in policies.Input, r policies.Replay) (policies.Explanation, error)
}

func nonNil(ss []string) []string {
	if ss == nil {
		return []string{}
	}
	return ss
}
