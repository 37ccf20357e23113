package gateway

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/provgate/provgate/backend"
	"github.com/provgate/provgate/gateway/auth"
	"github.com/provgate/provgate/gateway/claims"
	"github.com/provgate/provgate/policies"
)

const (
	principalKey = "principal"
	accessKey    = "access"
)

// access is what authorization established for the handler: the derived
// claims with the object, param name and command they name (handlers act
// on these, never on the path again), and the list visibility.
type access struct {
	claims.Result
	// Visible restricts a list (tenant and per-object get rules); nil = all.
	Visible []string
	// in is the policy input the request was allowed with; authz and ip
	// authenticate the caller again (reauthorize).
	in    policies.Input
	authz string
	ip    string
}

func principalOf(c *fiber.Ctx) *auth.Principal {
	p, _ := c.Locals(principalKey).(*auth.Principal)
	return p
}

func accessOf(c *fiber.Ctx) *access {
	a, _ := c.Locals(accessKey).(*access)
	if a == nil {
		return &access{}
	}
	return a
}

// guard authenticates the request, derives the claims it needs and asks the
// policies (docs/design.md §2.1 steps 1-3). Everything under /api/v3 passes here.
//
// Fiber's strings (method, path, headers) live in buffers the next request
// on the connection reuses: what the guard keeps for the handler is copied.
func (s *Server) guard(c *fiber.Ctx) error {
	if s.auth == nil || s.policy == nil || s.resolver == nil {
		return backend.Errorf(backend.EUNAVAILABLE, "authorization is not configured")
	}
	// Decision log lines name the request (docs/design.md §9.5).
	ctx := policies.WithRequestID(userContext(c), requestID(c))
	if err := s.fresh(ctx); err != nil {
		return err
	}
	authz, ip := wsCredential(c), c.IP()
	p, err := s.auth.Authenticate(ctx, authz, ip)
	if err != nil {
		s.countLoginFailure(authz, err)
		if backend.IsCode(err, backend.ETOOMANY) {
			// A refused login flood is answered slowly: each attacking
			// connection then costs one cheap sleeping goroutine per
			// second instead of a stream of full requests that would take
			// the CPU from legitimate callers.
			tarpit(ctx, s.loginTarpit)
		}
		return err
	}
	c.Locals(principalKey, p)
	ctx = backend.WithPrincipal(ctx, p.Subject())
	ctx = backend.WithAccess(ctx, &requestAccess{policy: s.policy, p: p})
	if p.IsUser() && s.tenantOf != nil {
		if t := s.tenantOf(p.Name); t != "" {
			// Objects a tenant user creates join its tenant (docs/design.md §6).
			ctx = backend.WithTenant(ctx, t)
		}
	}
	c.SetUserContext(ctx)

	q, err := url.ParseQuery(string(c.Request().URI().QueryString()))
	if err != nil {
		return backend.NewError(backend.EBADREQUEST, c.Method(), "", c.OriginalURL(), "malformed query string")
	}
	r := apiRequest{Method: strings.Clone(c.Method()), Path: strings.Clone(c.Path()), Query: q, Body: c.Body(), Route: routeOf(c)}
	if r.Route == nil {
		// No row took the request.
		return claims.Unrouted(r.Method, r.Path)
	}
	z, err := s.authorize(ctx, p, r, s.realRequest())
	if err != nil {
		return err
	}
	a := &access{Result: z.res, in: z.in, authz: authz, ip: ip}
	if d := z.d; d.Visible != nil && d.Visible.Restricted {
		// Read-only, shared with the decision cache (Decider): a
		// tenant's thousands of keys are not copied per request.
		a.Visible = d.Visible.Keys
		if a.Visible == nil {
			a.Visible = []string{}
		}
	}
	c.Locals(accessKey, a)
	return c.Next()
}

// authorizer derives the claims a request needs and decides them
// (docs/design.md §2.1 steps 3-4): the guard's work, which the access
// explorer repeats for the requests it explains.
type authorizer struct {
	policy   Decider
	resolver claims.Resolver
	machines machineVisibility
	// kinds is the kind and scope catalog (Deps.Kinds).
	kinds   *backend.Catalog
	metrics *metrics
	// served holds the rows of the route table the router serves.
	served map[*claims.Route]bool
}

// countLoginFailure records a refused authentication in the metrics.
func (s *Server) countLoginFailure(authz string, err error) {
	switch {
	case backend.IsCode(err, backend.ETOOMANY):
		s.metrics.loginFailures.WithLabelValues("throttled").Inc()
	case !backend.IsCode(err, backend.EUNAUTHORIZED) && !backend.IsCode(err, backend.EFORBIDDEN):
		// The store or the hasher failed: not a refused login.
	case authz == "":
		s.metrics.loginFailures.WithLabelValues("missing").Inc()
	default:
		s.metrics.loginFailures.WithLabelValues("invalid").Inc()
	}
}

// apiRequest is an API request as authorization reads it: the method, the
// path as received (still percent-encoded, without the query), the query
// and the body, and the route the router took for it. A request that does
// not come through the router (explained, a UI view's) has no Route: it
// is found in the same table (routeFor).
type apiRequest struct {
	Method, Path string
	Query        url.Values
	Body         []byte
	Route        *claims.Route
}

// authorization is what authorizing one request established: the derived
// claims and object, the policy input and the decision that allowed it.
type authorization struct {
	res claims.Result
	in  policies.Input
	d   policies.Decision
}

// decider decides one policy input.
type decider func(ctx context.Context, in policies.Input) (policies.Decision, error)

// authorizeWith says how authorize reads stored objects and decides: a real
// request reads the store and the decision cache and counts its outcome;
// the access explorer (gateway/access.go) decides the request's own input
// through its explain trail and reads only what its asker may see.
type authorizeWith struct {
	resolver claims.Resolver
	// main decides the request's own input; every other decision authorize
	// makes (visibility of a bad body's object, import items, a job's
	// machine) goes through the Decider.
	main  decider
	count bool
}

func (s *authorizer) realRequest() authorizeWith {
	return authorizeWith{resolver: s.resolver, main: s.policy.Decide, count: true}
}

// authorize runs docs/design.md §2.1 steps 2-3 for an authenticated
// principal: derive the claims r needs, build the policy input and decide
// it, without running the request. The guard calls it for every request
// under /api/v3; the access explorer calls it for the requests it explains,
// so that an explained request is authorized exactly as a real one.
func (s *authorizer) authorize(ctx context.Context, p *auth.Principal, r apiRequest, w authorizeWith) (*authorization, error) {
	rt := r.Route
	if rt == nil {
		var err error
		if rt, err = s.routeFor(r.Method, r.Path); err != nil {
			return nil, err
		}
	}
	res, err := rt.Derive(ctx, claims.Request{Method: r.Method, Path: r.Path, Query: r.Query, Body: r.Body}, w.resolver)
	if err != nil {
		if res.Ref != "" {
			// Only the body is at fault: an object the caller may not
			// see is still not found, as a missing one would be.
			if herr := s.hidden(ctx, p, r, res, w); herr != nil {
				return nil, herr
			}
		}
		// The resolver reads the object to authorize it (PUT diffs, index
		// keys); a missing object is still this request's 404, whose Type
		// DRP sets to the method (docs/design.md §3.2: "PUT: users/jill").
		var be *backend.Error
		if errors.As(err, &be) && be.Code == backend.ENOTFOUND && drpType(be, r.Method) == fiber.MethodGet {
			be.Type = r.Method
		}
		return nil, err
	}
	in := policies.Input{
		Principal: policyPrincipal(p),
		Required:  res.Claims,
		Operation: res.Operation,
		Method:    r.Method,
		Path:      r.Path,
	}
	if res.Key != "" && res.Scope != "" {
		in.Object = &policies.Object{Scope: res.Scope, Key: res.Key}
	}
	if res.List {
		in.List = &policies.ListRequest{Scope: res.Scope}
	}
	if err := s.objectAttributes(ctx, w.resolver, res, r.Body, &in); err != nil {
		return nil, err
	}
	d, err := s.decide(ctx, p, res, in, w.main, w.count)
	if err != nil {
		return &authorization{res: res, in: in, d: d}, err
	}
	if err := s.decideItems(ctx, p, res, in, w); err != nil {
		return &authorization{res: res, in: in, d: d}, err
	}
	return &authorization{res: res, in: in, d: d}, nil
}

// routeFor is the row the router takes for method and raw path: the
// table's row if the gateway serves it, else none ("No route").
func (s *authorizer) routeFor(method, path string) (*claims.Route, error) {
	rt, err := claims.Match(method, path)
	if err != nil {
		return nil, err
	}
	if !s.served[rt] {
		return nil, claims.Unrouted(method, path)
	}
	return rt, nil
}

// decideItems decides each object of an import as its single create would
// be decided, when the policy reads the proposed object (input.proposed,
// docs/design.md §4.9, §9.2): the one decision over every item's create
// claim cannot show the policy each object. Policies that do not read it
// decide the same from the claims alone.
func (s *authorizer) decideItems(ctx context.Context, p *auth.Principal, res claims.Result, in policies.Input, w authorizeWith) error {
	if len(res.Items) == 0 {
		return nil
	}
	if n, ok := s.policy.(needer); !ok || !n.Needs().Proposed {
		return nil
	}
	one := res
	one.Proposal, one.Items = claims.ProposeBody, nil
	for _, item := range res.Items {
		single := in
		single.Required = []backend.Claim{item.Claim}
		single.Proposed = nil
		if err := s.objectAttributes(ctx, w.resolver, one, item.Body, &single); err != nil {
			return err
		}
		if _, err := s.decide(ctx, p, one, single, s.policy.Decide, w.count); err != nil {
			return err
		}
	}
	return nil
}

// fresh brings cached authorization data up to date (Deps.Fresh).
func (s *Server) fresh(ctx context.Context) error {
	if s.freshener == nil {
		return nil
	}
	if err := s.freshener.Check(ctx); err != nil {
		return &backend.Error{Code: backend.EUNAVAILABLE, Type: "AUTH", Messages: []string{"authorization data unavailable"}, Err: err}
	}
	return nil
}

// decide asks the policies about in for principal p (with fn) and turns
// the decision into the request's answer: a hidden object is not found
// (named as the caller named it), a refusal is 403 with the policy's
// reasons. count records the outcome in the decision metrics.
func (s *authorizer) decide(ctx context.Context, p *auth.Principal, res claims.Result, in policies.Input, fn decider, count bool) (policies.Decision, error) {
	outcome := func(o string) {
		if count {
			s.metrics.decisions.WithLabelValues(o).Inc()
		}
	}
	d, err := fn(ctx, in)
	if err != nil {
		outcome("error")
		return d, &backend.Error{Code: backend.EINTERNAL, Type: "AUTH", Messages: []string{"authorization failed"}, Err: err}
	}
	if d.NotFound {
		outcome("hidden")
		return d, notFound(in.Method, res.Scope, res.Ref)
	}
	if err := s.jobMachineHidden(ctx, p, res); err != nil {
		outcome("hidden")
		return d, err
	}
	if !d.Allow {
		outcome("deny")
		msgs := append([]string{"Cannot access " + in.Path}, d.Reasons...)
		msgs = append(msgs, s.refusalHints(ctx, in, d)...)
		return d, &backend.Error{Code: backend.EFORBIDDEN, Type: "AUTH", Messages: msgs}
	}
	outcome("allow")
	return d, nil
}

// hidden answers whether the object res names is hidden from p, as the
// not-found error the request then gets (nil when it is visible).
// Visibility does not depend on claims: the policy decides it first.
func (s *authorizer) hidden(ctx context.Context, p *auth.Principal, r apiRequest, res claims.Result, w authorizeWith) error {
	in := policies.Input{
		Principal: policyPrincipal(p),
		Required:  []backend.Claim{{Scope: res.Scope, Action: "get", Specific: res.Specific}},
		Operation: res.Operation,
		Method:    r.Method,
		Path:      r.Path,
		Object:    &policies.Object{Scope: res.Scope, Key: res.Key},
	}
	d, err := s.policy.Decide(ctx, in)
	if err != nil {
		return &backend.Error{Code: backend.EINTERNAL, Type: "AUTH", Messages: []string{"authorization failed"}, Err: err}
	}
	if d.NotFound {
		if w.count {
			s.metrics.decisions.WithLabelValues("hidden").Inc()
		}
		return notFound(in.Method, res.Scope, res.Ref)
	}
	if err := s.jobMachineHidden(ctx, p, res); err != nil {
		if w.count {
			s.metrics.decisions.WithLabelValues("hidden").Inc()
		}
		return err
	}
	return nil
}

// reauthorize repeats the request's authorization with the data as it is
// now: the caller is authenticated again (its roles, Secrets and tenant may
// have changed) and the same claims on the same object are decided again.
// A request that waited (a long poll) answers only if this still holds.
func (s *Server) reauthorize(c *fiber.Ctx) error {
	a := accessOf(c)
	ctx := userContext(c)
	if err := s.fresh(ctx); err != nil {
		return err
	}
	p, err := s.auth.Authenticate(ctx, a.authz, a.ip)
	if err != nil {
		return err
	}
	in := a.in
	in.Principal = policyPrincipal(p)
	_, err = s.decide(ctx, p, a.Result, in, s.policy.Decide, true)
	return err
}

// jobMachineHidden applies the tenant's machine visibility to a job request:
// jobs follow their machine (docs/design.md §6), so the job of a machine the
// tenant hides is not found, and a job cannot be created for it. A job's
// claims name its machine as their specific (docs/design.md §5.5).
func (s *authorizer) jobMachineHidden(ctx context.Context, p *auth.Principal, res claims.Result) error {
	if res.Scope != "jobs" || res.List {
		return nil
	}
	operations := p.IsMachine() && p.MachineToken == auth.MachineOperations
	if !p.IsUser() && !operations {
		return nil
	}
	machine := res.Specific
	if res.Key == "" && len(res.Claims) > 0 {
		machine = res.Claims[0].Specific
	}
	if machine == "" || machine == "*" {
		return nil
	}
	if operations {
		// A machine's operations token sees only its own machine's jobs
		// (docs/design.md §6.1), as the policy sees only its machine.
		if machine == p.Name {
			return nil
		}
	} else {
		vis, err := s.machines.ofPrincipal(ctx, p)
		if err != nil || vis == nil || slices.Contains(vis, machine) {
			return err
		}
	}
	if res.Key == "" {
		// Job creation: the same answer as for a machine that does not exist.
		return backend.NewError(backend.EINVALID, "ValidationError", "jobs", "", "Machine "+machine+" does not exist")
	}
	return backend.NotFound(backend.RequestOp, res.Scope, res.Ref)
}

// isDecode reports whether the request asks for decoded secure values.
func isDecode(c *fiber.Ctx) bool {
	v := strings.ToLower(c.Query("decode"))
	return v == "true" || v == "1"
}

// tarpit waits d (or until ctx ends).
func tarpit(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// requestAccess is the backend.Access of one request: the caller's
// visibility and claims, decided by the same policies as the request itself
// (docs/design.md §6.2). Visibility is decided once per scope per request.
type requestAccess struct {
	policy Decider
	p      *auth.Principal
	mu     sync.Mutex
	// seen caches each scope's visibility: nil set means unrestricted.
	seen map[string]map[string]bool
}

func (a *requestAccess) CanSee(ctx context.Context, scope, key string) (bool, error) {
	a.mu.Lock()
	set, ok := a.seen[scope]
	a.mu.Unlock()
	if !ok {
		d, err := a.policy.Decide(ctx, policyListInput(a.p, scope))
		if err != nil {
			return false, &backend.Error{Code: backend.EINTERNAL, Type: "AUTH", Messages: []string{"authorization failed"}, Err: err}
		}
		if d.Visible != nil && d.Visible.Restricted {
			set = make(map[string]bool, len(d.Visible.Keys))
			for _, k := range d.Visible.Keys {
				set[k] = true
			}
		}
		a.mu.Lock()
		if a.seen == nil {
			a.seen = map[string]map[string]bool{}
		}
		a.seen[scope] = set
		a.mu.Unlock()
	}
	return set == nil || set[key], nil
}

func (a *requestAccess) Can(ctx context.Context, cs ...backend.Claim) (bool, error) {
	if len(cs) == 0 {
		return true, nil
	}
	in := policies.Input{Principal: policyPrincipal(a.p), Required: cs, Operation: "update"}
	d, err := a.policy.Decide(ctx, in)
	if err != nil {
		return false, &backend.Error{Code: backend.EINTERNAL, Type: "AUTH", Messages: []string{"authorization failed"}, Err: err}
	}
	return d.Allow, nil
}

// Granter answers the grant check (docs/design.md §5.9); the policy engine
// implements it beside Decide.
type Granter interface {
	Ungranted(ctx context.Context, in policies.Input) ([]backend.Claim, error)
}

// Ungranted asks the policies what grants would hand out that the caller
// does not hold. A decider that cannot answer refuses every grant: the
// check fails closed.
func (a *requestAccess) Ungranted(ctx context.Context, grants ...backend.Grant) ([]backend.Claim, error) {
	if len(grants) == 0 {
		return nil, nil
	}
	g, ok := a.policy.(Granter)
	if !ok {
		return nil, &backend.Error{Code: backend.EFORBIDDEN, Type: "AUTH", Messages: []string{"cannot grant: the policy does not answer grant checks"}}
	}
	out, err := g.Ungranted(ctx, policies.Input{Principal: policyPrincipal(a.p), Grants: grants})
	if err != nil {
		if backend.IsCode(err, backend.EFORBIDDEN) {
			return nil, err
		}
		return nil, &backend.Error{Code: backend.EINTERNAL, Type: "AUTH", Messages: []string{"authorization failed"}, Err: err}
	}
	return out, nil
}
