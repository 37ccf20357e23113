package gateway

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/provgate/provgate/backend"
	accessapi "github.com/provgate/provgate/gateway/access"
	"github.com/provgate/provgate/gateway/auth"
	"github.com/provgate/provgate/gateway/claims"
)

// The OpenID AuthZEN Authorization API 1.0 (docs/design.md §9.9): other
// gateways (PEPs) ask provgate's policy through the standard PDP
// interface. The caller authenticates as for /api/v3; it may ask about
// itself, about other users and machines it may get, and about objects it
// may see; every answer is the decision a real request would get.

const authzenBase = "/access/v1"

func isAuthzen(c *fiber.Ctx) bool { return strings.HasPrefix(c.Path(), authzenBase+"/") }

// authzenServes gives the AuthZEN rows of the route table their
// handlers; the /access/v1 USE row authenticates the caller first
// (authzenGuard).
func (s *explorer) authzenServes() serves {
	return serves{
		claims.ServeAuthzenConfig:  s.handleAuthzenConfig,
		claims.ServeEvaluation:     s.handleEvaluation,
		claims.ServeEvaluations:    s.handleEvaluations,
		claims.ServeSearchSubject:  s.handleSearch(accessapi.SearchSubject),
		claims.ServeSearchResource: s.handleSearch(accessapi.SearchResource),
		claims.ServeSearchAction:   s.handleSearch(accessapi.SearchAction),
	}
}

func (s *explorer) handleAuthzenConfig(c *fiber.Ctx) error {
	base := c.BaseURL()
	return c.JSON(fiber.Map{
		"policy_decision_point":       base,
		"access_evaluation_endpoint":  base + authzenBase + "/evaluation",
		"access_evaluations_endpoint": base + authzenBase + "/evaluations",
		"search_subject_endpoint":     base + authzenBase + "/search/subject",
		"search_resource_endpoint":    base + authzenBase + "/search/resource",
		"search_action_endpoint":      base + authzenBase + "/search/action",
	})
}

// authzenGuard echoes the PEP's X-Request-ID as it was sent and
// authenticates the caller, as the /api/v3 guard does.
func (s *Server) authzenGuard(c *fiber.Ctx) error {
	if id := c.Get("X-Request-ID"); id != "" {
		c.Set("X-Request-ID", strings.Clone(id))
	}
	if s.auth == nil || s.policy == nil {
		return backend.Errorf(backend.EUNAVAILABLE, "authorization is not configured")
	}
	ctx := userContext(c)
	if err := s.fresh(ctx); err != nil {
		return err
	}
	p, err := s.auth.Authenticate(ctx, c.Get(fiber.HeaderAuthorization), c.IP())
	if err != nil {
		return err
	}
	c.Locals(principalKey, p)
	ctx = backend.WithAccess(ctx, &requestAccess{policy: s.policy, p: p})
	c.SetUserContext(ctx)
	return c.Next()
}

func badAuthzen(err error) error {
	return backend.NewError(backend.EBADREQUEST, "POST", "access", "", strings.TrimPrefix(err.Error(), accessapi.ErrBadRequest.Error()+": "))
}

func (s *explorer) handleEvaluation(c *fiber.Ctx) error {
	e, err := accessapi.ParseEvaluation(c.Body())
	if err != nil {
		return badAuthzen(err)
	}
	return c.JSON(s.evaluate(userContext(c), e))
}

func (s *explorer) handleEvaluations(c *fiber.Ctx) error {
	items, semantic, single, err := accessapi.ParseEvaluations(c.Body())
	if err != nil {
		return badAuthzen(err)
	}
	ctx := userContext(c)
	if single {
		return c.JSON(s.evaluate(ctx, items[0]))
	}
	out := []accessapi.Decision{}
	for _, e := range items {
		d := s.evaluate(ctx, e)
		out = append(out, d)
		if (semantic == accessapi.DenyOnFirstDeny && !d.Decision) || (semantic == accessapi.PermitOnFirstPermit && d.Decision) {
			break
		}
	}
	return c.JSON(fiber.Map{"evaluations": out})
}

// refusal is a decision false whose context says why, with the status a
// request would have got.
func refusal(status int, reasons ...string) accessapi.Decision {
	return accessapi.Decision{Context: map[string]any{"status": status, "reason": strings.Join(reasons, "; "), "reasons": reasons}}
}

// failed is a decision false for an evaluation that could not be made.
func failed(err error) accessapi.Decision {
	status, msgs := errorAnswer(err)
	return accessapi.Decision{Context: map[string]any{"error": map[string]any{"status": status, "message": strings.Join(msgs, "; ")}}}
}

// evaluate answers one evaluation: may the subject do the action on the
// resource, by the decision a request for it gets.
func (s *explorer) evaluate(ctx context.Context, e accessapi.Evaluation) accessapi.Decision {
	p, err := s.subject(ctx, *e.Subject)
	if err != nil {
		return failed(err)
	}
	scope, action, key := e.Resource.Type, e.Action.Name, e.Resource.ID
	if err := s.checkQuestion(ctx, scope, action, key); err != nil {
		return failed(err)
	}
	d, err := s.policy.Decide(ctx, questionInput(p, scope, action, key))
	switch {
	case err != nil:
		return failed(&backend.Error{Code: backend.EINTERNAL, Messages: []string{"authorization failed"}, Err: err})
	case d.NotFound:
		return refusal(http.StatusNotFound, "Not Found")
	case !d.Allow:
		return refusal(http.StatusForbidden, d.Reasons...)
	}
	return accessapi.Decision{Decision: true}
}

// checkQuestion refuses an unknown scope or action, and answers 404 for an
// object the caller may not see or that does not exist.
func (s *explorer) checkQuestion(ctx context.Context, scope, action, key string) error {
	if !s.kinds.ValidScope(scope) || (action != "" && !s.kinds.ValidAction(scope, action)) {
		return backend.NewError(backend.EBADREQUEST, "POST", "access", "", "resource type must be a scope and action name an action valid in it")
	}
	if key != "" {
		return s.objectVisible(ctx, scope, key)
	}
	return nil
}

// subject is the principal an AuthZEN subject names: a user as its login
// (its current roles), or a machine's operations token. The caller may ask
// about itself and about users and machines it may get; any other looks
// exactly like a missing one when its tenant hides it, and is refused as a
// request for it would be otherwise.
func (s *explorer) subject(ctx context.Context, e accessapi.Entity) (*auth.Principal, error) {
	asker := askerOf(ctx)
	var scope string
	switch e.Type {
	case "user":
		scope = "users"
	case "machine":
		scope = "machines"
	default:
		return nil, backend.NewError(backend.EBADREQUEST, "POST", "access", "", "subject type must be user or machine")
	}
	if asker == nil || !(asker.IsUser() && scope == "users" && e.ID == asker.Name) {
		if err := s.askAbout(ctx, scope, e.ID); err != nil {
			return nil, err
		}
	}
	if scope == "users" {
		return s.userPrincipal(ctx, e.ID)
	}
	if _, err := s.objects.View(ctx, "machines", e.ID); err != nil {
		return nil, err
	}
	return &auth.Principal{Kind: auth.KindMachine, Name: e.ID, MachineToken: auth.MachineOperations, Method: auth.MethodMachine}, nil
}

// askAbout decides the caller's get on scope/key, as GET of it would be
// decided: hidden is 404, refused 403.
func (s *explorer) askAbout(ctx context.Context, scope, key string) error {
	asker := askerOf(ctx)
	if asker == nil {
		return backend.Errorf(backend.EINTERNAL, "no caller")
	}
	d, err := s.question(ctx, questionInput(asker, scope, "get", key))
	switch {
	case err != nil:
		return &backend.Error{Code: backend.EINTERNAL, Messages: []string{"authorization failed"}, Err: err}
	case d.NotFound:
		return notFound(fiber.MethodGet, scope, key)
	case !d.Allow:
		return &backend.Error{Code: backend.EFORBIDDEN, Type: "AUTH", Messages: append([]string{"Cannot access " + apiBase + "/" + scope + "/" + key}, d.Reasons...)}
	}
	return nil
}

func (s *explorer) handleSearch(kind string) fiber.Handler {
	return func(c *fiber.Ctx) error {
		r, offset, limit, err := accessapi.ParseSearch(kind, c.Body())
		if err != nil {
			return badAuthzen(err)
		}
		ctx := userContext(c)
		out, err := s.search(ctx, kind, r, offset, limit)
		if err != nil {
			var be *backend.Error
			if errors.As(err, &be) && (be.Code == backend.ENOTFOUND || be.Code == backend.EFORBIDDEN) {
				// A subject or resource the caller may not ask about, or a
				// missing one: no results.
				return c.JSON(accessapi.SearchResponse{Results: []any{}})
			}
			return err
		}
		return c.JSON(out)
	}
}

// search pages through the candidates of a search in a stable order,
// keeping those the decision allows.
func (s *explorer) search(ctx context.Context, kind string, r accessapi.SearchRequest, offset, limit int) (accessapi.SearchResponse, error) {
	var cands []string
	var allowed func(cand string) (bool, error)
	var result func(cand string) any
	switch kind {
	case accessapi.SearchSubject:
		scope, action, key := r.Resource.Type, r.Action.Name, r.Resource.ID
		if err := s.checkQuestion(ctx, scope, action, key); err != nil {
			return accessapi.SearchResponse{}, err
		}
		switch r.Subject.Type {
		case "user":
			users, err := s.visibleUsers(ctx)
			if err != nil {
				return accessapi.SearchResponse{}, err
			}
			roles := map[string][]string{}
			for _, u := range users {
				cands = append(cands, u.Name)
				roles[u.Name] = u.Roles
			}
			allowed = func(name string) (bool, error) {
				return s.may(ctx, &auth.Principal{Kind: auth.KindUser, Name: name, Grantor: name, Roles: roles[name], Method: auth.MethodBasic}, scope, action, key)
			}
		case "machine":
			keys, err := s.visibleKeys(ctx, "machines")
			if err != nil {
				return accessapi.SearchResponse{}, err
			}
			cands = keys
			allowed = func(uuid string) (bool, error) {
				return s.may(ctx, &auth.Principal{Kind: auth.KindMachine, Name: uuid, MachineToken: auth.MachineOperations, Method: auth.MethodMachine}, scope, action, key)
			}
		default:
			return accessapi.SearchResponse{}, backend.NewError(backend.EBADREQUEST, "POST", "access", "", "subject type must be user or machine")
		}
		typ := r.Subject.Type
		result = func(id string) any { return accessapi.Entity{Type: typ, ID: id} }
	case accessapi.SearchResource:
		scope, action := r.Resource.Type, r.Action.Name
		if err := s.checkQuestion(ctx, scope, action, ""); err != nil {
			return accessapi.SearchResponse{}, err
		}
		p, err := s.subject(ctx, *r.Subject)
		if err != nil {
			return accessapi.SearchResponse{}, err
		}
		if cands, err = s.visibleKeys(ctx, scope); err != nil {
			return accessapi.SearchResponse{}, err
		}
		allowed = func(key string) (bool, error) { return s.may(ctx, p, scope, action, key) }
		result = func(key string) any { return accessapi.Entity{Type: scope, ID: key} }
	case accessapi.SearchAction:
		scope, key := r.Resource.Type, r.Resource.ID
		if err := s.checkQuestion(ctx, scope, "", key); err != nil {
			return accessapi.SearchResponse{}, err
		}
		p, err := s.subject(ctx, *r.Subject)
		if err != nil {
			return accessapi.SearchResponse{}, err
		}
		seen := map[string]bool{}
		for _, a := range s.kinds.Actions(scope) {
			seen[a] = true
		}
		if rc, err := s.roleCandidates(ctx, p); err == nil && rc[scope] != nil {
			for _, keys := range rc[scope].actions {
				for k := range keys {
					seen[k] = true
				}
			}
		}
		cands = slices.Sorted(maps.Keys(seen))
		allowed = func(action string) (bool, error) { return s.may(ctx, p, scope, action, key) }
		result = func(action string) any { return accessapi.Action{Name: action} }
	}
	sort.Strings(cands)
	out := accessapi.SearchResponse{Results: []any{}}
	i := offset
	for ; i < len(cands) && len(out.Results) < limit; i++ {
		ok, err := allowed(cands[i])
		if err != nil {
			return out, err
		}
		if ok {
			out.Results = append(out.Results, result(cands[i]))
		}
	}
	out.Page = &accessapi.PageOut{Count: len(out.Results)}
	if i < len(cands) {
		out.Page.NextToken = accessapi.NextToken(kind, r, i)
	}
	return out, nil
}

// visibleKeys lists the keys of scope's objects the caller may see.
func (s *explorer) visibleKeys(ctx context.Context, scope string) ([]string, error) {
	if s.kinds.Kind(scope) == nil {
		return []string{}, nil
	}
	ms, _, _, err := s.objects.List(ctx, scope, backend.Query{Limit: -1, Slim: []string{"Params", "Meta"}})
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(ms))
	for _, m := range ms {
		if k := m.Key(); s.canSee(ctx, scope, k) {
			out = append(out, k)
		}
	}
	return out, nil
}

// askerOf is the caller whose Access the guard put in ctx.
func askerOf(ctx context.Context) *auth.Principal {
	if a, ok := backend.AccessFrom(ctx).(*requestAccess); ok {
		return a.p
	}
	return nil
}
