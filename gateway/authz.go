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
	"github.com/provgate/provgate/backend/objects"
	"github.com/provgate/provgate/gateway/claims"
	"github.com/provgate/provgate/policies"
)

const (
	principalKey = "principal"
	accessKey    = "access"
)

// access is what authorization established for the handler.
type access struct {
	claims.Result
	// Visible restricts a list (tenant and per-object get rules); nil = all.
	Visible []string
}

func principalOf(c *fiber.Ctx) *Principal {
	p, _ := c.Locals(principalKey).(*Principal)
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
// policies (design §1 steps 1-3). Everything under /api/v3 passes here.
func (s *Server) guard(c *fiber.Ctx) error {
	if s.Auth == nil || s.Policy == nil || s.Resolver == nil {
		return backend.Errorf(backend.EUNAVAILABLE, "authorization is not configured")
	}
	ctx := userContext(c)
	if s.Fresh != nil {
		if err := s.Fresh.Check(ctx); err != nil {
			return &backend.Error{Code: backend.EUNAVAILABLE, Type: "AUTH", Messages: []string{"authorization data unavailable"}, Err: err}
		}
	}
	p, err := s.Auth.Authenticate(ctx, c.Get(fiber.HeaderAuthorization), c.IP())
	if err != nil {
		if backend.IsCode(err, backend.ETOOMANY) {
			// A refused login flood is answered slowly: each attacking
			// connection then costs one cheap sleeping goroutine per
			// second instead of a stream of full requests that would take
			// the CPU from legitimate callers.
			tarpit(ctx, s.LoginTarpit)
		}
		return err
	}
	c.Locals(principalKey, p)
	who := "user:" + p.Name
	if p.Kind == "machine" {
		who = "runner:" + p.Name
	}
	ctx = objects.WithPrincipal(ctx, who)
	ctx = backend.WithAccess(ctx, &requestAccess{s: s, p: p})
	if p.Kind == "user" && s.TenantOf != nil {
		if t := s.TenantOf(p.Name); t != "" {
			// Objects a tenant user creates join its tenant (reference §4.6).
			ctx = objects.WithTenant(ctx, t)
		}
	}
	c.SetUserContext(ctx)

	q, err := url.ParseQuery(string(c.Request().URI().QueryString()))
	if err != nil {
		return backend.NewError(backend.EBADREQUEST, c.Method(), "", c.OriginalURL(), "malformed query string")
	}
	res, err := claims.Derive(ctx, claims.Request{Method: c.Method(), Path: c.Path(), Query: q, Body: c.Body()}, s.Resolver)
	if err != nil {
		// The resolver reads the object to authorize it (PUT diffs, index
		// keys); a missing object is still this request's 404, whose Type
		// DRP sets to the method (reference §2.2: "PUT: users/jill").
		var be *backend.Error
		if errors.As(err, &be) && be.Code == backend.ENOTFOUND && be.Type == fiber.MethodGet {
			be.Type = c.Method()
		}
		return err
	}
	in := policies.Input{
		Principal: p.policyPrincipal(),
		Required:  res.Claims,
		Operation: res.Operation,
		Method:    c.Method(),
		Path:      c.Path(),
	}
	if res.Key != "" && res.Scope != "" {
		in.Object = &policies.Object{Scope: res.Scope, Key: res.Key}
	}
	if res.List {
		in.List = &policies.ListRequest{Scope: res.Scope}
	}
	d, err := s.Policy.Decide(ctx, in)
	if err != nil {
		s.metrics.decisions.WithLabelValues("error").Inc()
		return &backend.Error{Code: backend.EINTERNAL, Type: "AUTH", Messages: []string{"authorization failed"}, Err: err}
	}
	if d.NotFound {
		s.metrics.decisions.WithLabelValues("hidden").Inc()
		return backend.NotFound(c.Method(), res.Scope, res.Key)
	}
	if err := s.jobMachineHidden(c, p, res); err != nil {
		s.metrics.decisions.WithLabelValues("hidden").Inc()
		return err
	}
	if !d.Allow {
		s.metrics.decisions.WithLabelValues("deny").Inc()
		msgs := append([]string{"Cannot access " + c.Path()}, d.Reasons...)
		return &backend.Error{Code: backend.EFORBIDDEN, Type: "AUTH", Messages: msgs}
	}
	s.metrics.decisions.WithLabelValues("allow").Inc()
	a := &access{Result: res}
	if d.Visible != nil && d.Visible.Restricted {
		a.Visible = append([]string{}, d.Visible.Keys...)
		if a.Visible == nil {
			a.Visible = []string{}
		}
	}
	c.Locals(accessKey, a)
	return c.Next()
}

// jobMachineHidden applies the tenant's machine visibility to a job request:
// jobs follow their machine (reference §4.6), so the job of a machine the
// tenant hides is not found, and a job cannot be created for it. A job's
// claims name its machine as their specific (reference §4.3).
func (s *Server) jobMachineHidden(c *fiber.Ctx, p *Principal, res claims.Result) error {
	if res.Scope != "jobs" || res.List || p.Kind != "user" || len(res.Claims) == 0 {
		return nil
	}
	machine := res.Claims[0].Specific
	if machine == "" || machine == "*" {
		return nil
	}
	vis, err := s.machineVisibility(c)
	if err != nil || vis == nil || slices.Contains(vis, machine) {
		return err
	}
	if res.Key == "" {
		// Job creation: the same answer as for a machine that does not exist.
		return backend.NewError(backend.EINVALID, "ValidationError", "jobs", "", "Machine "+machine+" does not exist")
	}
	return backend.NotFound(c.Method(), res.Scope, res.Key)
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
// (design §1). Visibility is decided once per scope per request.
type requestAccess struct {
	s  *Server
	p  *Principal
	mu sync.Mutex
	// seen caches each scope's visibility: nil set means unrestricted.
	seen map[string]map[string]bool
}

func (a *requestAccess) CanSee(ctx context.Context, scope, key string) (bool, error) {
	a.mu.Lock()
	set, ok := a.seen[scope]
	a.mu.Unlock()
	if !ok {
		d, err := a.s.Policy.Decide(ctx, policyListInput(a.p, scope))
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
	in := policies.Input{Principal: a.p.policyPrincipal(), Required: cs, Operation: "update"}
	d, err := a.s.Policy.Decide(ctx, in)
	if err != nil {
		return false, &backend.Error{Code: backend.EINTERNAL, Type: "AUTH", Messages: []string{"authorization failed"}, Err: err}
	}
	return d.Allow, nil
}
