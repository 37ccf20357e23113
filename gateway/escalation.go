package gateway

import (
	"context"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/provgate/provgate/backend"
	accessapi "github.com/provgate/provgate/gateway/access"
	"github.com/provgate/provgate/gateway/auth"
)

// The escalation report (docs/design.md §5.9, §9.8): every user the asker
// may see who can hand out authority, through which write and which role.
// Each route is a decision of the served policy, with its trail, for the
// synthetic request of the write's claim, exactly as the user's matrix
// asks: nothing here decides access itself.

// grantPath is one grant path of §5.9: the claims a write that hands out
// authority needs. others: only on other objects than the user itself (the
// self claims never count as handing anything out); delegation: an
// explicit delegation action.
type grantPath struct {
	path       string
	scope      string
	actions    []string
	others     bool
	delegation bool
}

var grantPaths = []grantPath{
	{path: accessapi.PathUserRoles, scope: "users", actions: []string{"create", "update:/Roles"}},
	{path: accessapi.PathRoleClaims, scope: "roles", actions: []string{"create", "update:/Claims"}},
	{path: accessapi.PathCredentials, scope: "users", actions: []string{"password", "update:/PasswordHash", "update:/Secret", "token"}, others: true},
	{path: accessapi.PathTaskExtras, scope: "tasks", actions: []string{"create", "update:/ExtraClaims", "update:/ExtraRoles"}},
	{path: accessapi.PathPlugins, scope: "plugins", actions: []string{"create", "update:/Params"}},
	{path: accessapi.PathTenants, scope: "tenants", actions: []string{"create", "update:/Users", "update:/Members"}},
	{path: accessapi.PathPoolActions, scope: "pools", actions: []string{"create", "update:/EnterActions", "update:/ExitActions",
		"update:/AllocateActions", "update:/ReleaseActions"}},
	{path: accessapi.PathDelegation, scope: "roles", actions: []string{"bind", "escalate"}, delegation: true},
	{path: accessapi.PathDelegation, scope: "users", actions: []string{"impersonate"}, delegation: true, others: true},
	{path: accessapi.PathDelegation, scope: "plugins", actions: []string{"exec"}, delegation: true},
}

func (s *Server) handleEscalation(c *fiber.Ctx) error {
	e, err := s.escalation(userContext(c))
	if err != nil {
		return err
	}
	return c.JSON(e)
}

// escalation lists the users the caller may see who can hand out
// authority. Machine and job tokens never grant anything (§5.9).
func (s *Server) escalation(ctx context.Context) (accessapi.Escalation, error) {
	out := accessapi.Escalation{Users: []accessapi.Escalator{}}
	users, err := s.visibleUsers(ctx)
	if err != nil {
		return out, err
	}
	routes := make([][]accessapi.GrantRoute, len(users))
	errs := make([]error, len(users))
	parallel(len(users), func(i int) {
		p := &auth.Principal{Kind: auth.KindUser, Name: users[i].Name, Grantor: users[i].Name, Roles: users[i].Roles, Method: auth.MethodBasic}
		routes[i], errs[i] = s.grantRoutes(ctx, p)
	})
	for i, u := range users {
		if errs[i] != nil {
			return out, errs[i]
		}
		if len(routes[i]) > 0 {
			out.Users = append(out.Users, accessapi.Escalator{User: u.Name, Routes: routes[i]})
		}
	}
	return out, nil
}

// grantRoutes are the grant paths open to p: each path's claim on every
// object, else on each object its roles name that the asker may see.
func (s *Server) grantRoutes(ctx context.Context, p *auth.Principal) ([]accessapi.GrantRoute, error) {
	cands, err := s.roleCandidates(ctx, p)
	if err != nil {
		return nil, err
	}
	var out []accessapi.GrantRoute
	for _, gp := range grantPaths {
		for _, action := range gp.actions {
			r, ok, err := s.grantRoute(ctx, p, gp, action, "*")
			if err != nil {
				return nil, err
			}
			if ok {
				out = append(out, r)
				continue
			}
			// A create names no object (its claim's specific is empty): only
			// a claim on every object covers it.
			base, _, _ := strings.Cut(action, ":")
			cd := cands[gp.scope]
			if cd == nil || base == "create" {
				continue
			}
			for _, k := range sortedKeys(cd.keys[base]) {
				if (gp.others && k == p.Name) || !s.canSee(ctx, gp.scope, k) {
					continue
				}
				r, ok, err := s.grantRoute(ctx, p, gp, action, k)
				if err != nil {
					return nil, err
				}
				if ok {
					out = append(out, r)
				}
			}
		}
	}
	return out, nil
}

// grantRoute decides p's request for action on scope/key with its trail
// and, when allowed, names what covers it.
func (s *Server) grantRoute(ctx context.Context, p *auth.Principal, gp grantPath, action, key string) (accessapi.GrantRoute, bool, error) {
	x, err := s.explainDecision(ctx, questionInput(p, gp.scope, action, key))
	if err != nil {
		return accessapi.GrantRoute{}, false, &backend.Error{Code: backend.EINTERNAL, Type: "AUTH", Messages: []string{"authorization failed"}, Err: err}
	}
	if !x.Decision.Allow || x.Decision.NotFound {
		return accessapi.GrantRoute{}, false, nil
	}
	r := accessapi.GrantRoute{Path: gp.path, Claim: gp.scope + " " + action + " " + key, Delegation: gp.delegation,
		Detail: "allowed by the served policy"}
	if x.Trail != nil && len(x.Trail.Claims) == 1 {
		r.Role, r.Held, r.Detail = accessapi.CoverOf(x.Trail.Claims[0], func(scope, name string) bool { return s.canSee(ctx, scope, name) })
	}
	return r, true, nil
}
