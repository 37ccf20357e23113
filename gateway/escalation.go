package gateway

import (
	"context"
	"maps"
	"slices"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/provgate/provgate/backend"
	accessapi "github.com/provgate/provgate/gateway/access"
	"github.com/provgate/provgate/gateway/auth"
	"github.com/provgate/provgate/policies"
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

func (s *explorer) handleEscalation(c *fiber.Ctx) error {
	e, err := s.escalation(userContext(c))
	if err != nil {
		return err
	}
	return c.JSON(e)
}

// escalation lists the users the caller may see who can hand out
// authority. Machine and job tokens never grant anything (§5.9). Every
// user's grant paths are decided in batches (Engine.Questions: users that
// provably get the same answer are decided once), first on every object,
// then on the objects each user's roles name; only a path a user has is
// explained again, for the role that covers it.
func (s *explorer) escalation(ctx context.Context) (accessapi.Escalation, error) {
	out := accessapi.Escalation{Users: []accessapi.Escalator{}}
	users, err := s.visibleUsers(ctx)
	if err != nil {
		return out, err
	}
	ps := make([]*auth.Principal, len(users))
	for i, u := range users {
		ps[i] = &auth.Principal{Kind: auth.KindUser, Name: u.Name, Grantor: u.Name, Roles: u.Roles, Method: auth.MethodBasic}
	}
	type ask struct {
		user   int
		gp     grantPath
		action string
		key    string
		from   int // the ask on every object it follows
	}
	decide := func(asks []ask) ([]bool, error) {
		ins := make([]policies.Input, len(asks))
		for i, a := range asks {
			ins[i] = questionInput(ps[a.user], a.gp.scope, a.action, a.key)
		}
		return s.decideAll(ctx, ins)
	}
	// Every path on every object.
	var all []ask
	for i := range users {
		for _, gp := range grantPaths {
			for _, action := range gp.actions {
				all = append(all, ask{user: i, gp: gp, action: action, key: "*"})
			}
		}
	}
	allOK, err := decide(all)
	if err != nil {
		return out, err
	}
	// Then, where a user may not on every object, the objects its roles
	// name that the caller may see (never the user itself where the path
	// is about others; a create names no object).
	var some []ask
	cands := map[int]map[string]*candidates{}
	for i, a := range all {
		base, _, _ := strings.Cut(a.action, ":")
		if allOK[i] || base == "create" {
			continue
		}
		if _, ok := cands[a.user]; !ok {
			if cands[a.user], err = s.roleCandidates(ctx, ps[a.user]); err != nil {
				return out, err
			}
		}
		cd := cands[a.user][a.gp.scope]
		if cd == nil {
			continue
		}
		for _, k := range slices.Sorted(maps.Keys(cd.keys[base])) {
			if (a.gp.others && k == ps[a.user].Name) || !s.canSee(ctx, a.gp.scope, k) {
				continue
			}
			some = append(some, ask{user: a.user, gp: a.gp, action: a.action, key: k, from: i})
		}
	}
	someOK, err := decide(some)
	if err != nil {
		return out, err
	}
	// The routes in order: per user, per path and action, every object or
	// the objects named; each explained for the role that covers it.
	routes := make([][]accessapi.GrantRoute, len(users))
	j := 0
	for i, a := range all {
		var asks []ask
		if allOK[i] {
			asks = append(asks, a)
		}
		for ; j < len(some) && some[j].from == i; j++ {
			if someOK[j] {
				asks = append(asks, some[j])
			}
		}
		for _, k := range asks {
			r, ok, err := s.grantRoute(ctx, ps[k.user], k.gp, k.action, k.key)
			if err != nil {
				return out, err
			}
			if ok {
				routes[a.user] = append(routes[a.user], r)
			}
		}
	}
	for i, u := range users {
		if len(routes[i]) > 0 {
			out.Users = append(out.Users, accessapi.Escalator{User: u.Name, Routes: routes[i]})
		}
	}
	return out, nil
}

// grantRoute decides p's request for action on scope/key with its trail
// and, when allowed, names what covers it.
func (s *explorer) grantRoute(ctx context.Context, p *auth.Principal, gp grantPath, action, key string) (accessapi.GrantRoute, bool, error) {
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
