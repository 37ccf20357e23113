package gateway

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/gofiber/fiber/v2"

	"github.com/provgate/provgate/backend"
	"github.com/provgate/provgate/gateway/auth"
	"github.com/provgate/provgate/gateway/claims"
)

// Handlers are grouped by resource (docs/design.md §2.2): each group is a
// small type holding only the services and helpers it calls, and gives
// handlers to the rows of the route table (claims.Routes) it serves. A
// group built without its service gives those rows no handler, which
// leaves them out of the router: the check is made once, here, rather
// than in every handler.

// serves maps the route table's handler names to a group's handlers.
type serves map[claims.Serve]fiber.Handler

// unless is g, or g with every handler removed when missing holds (the
// group lacks its service).
func (g serves) unless(missing bool) serves {
	if missing {
		for name := range g {
			g[name] = nil
		}
	}
	return g
}

// nilUnless is h when present holds, else nil (no rows).
func nilUnless(present bool, h fiber.Handler) fiber.Handler {
	if !present {
		return nil
	}
	return h
}

// handlers are the handlers of every row of the route table, by name: the
// union of the groups' serves. A name given twice is a programming error.
func handlers(groups ...serves) map[claims.Serve]fiber.Handler {
	out := map[claims.Serve]fiber.Handler{}
	for _, g := range groups {
		for name, h := range g {
			if _, dup := out[name]; dup {
				panic(fmt.Sprintf("gateway: two groups serve %q", name))
			}
			out[name] = h
		}
	}
	return out
}

// refresher brings what the policies know about roles, tenants and users
// up to date after a write that may change it.
type refresher struct {
	sync     PolicySync
	tenantOf func(user string) string
	log      *slog.Logger
}

// afterWrite refreshes the policy data when an object it depends on changed.
// Besides users, roles and tenants themselves, tenants' Members change when
// a tenant user creates an object (it joins the tenant) and when any object
// is deleted (its key leaves every tenant); waiting for the periodic refresh
// would hide a tenant user's new object from it, or briefly show a tenant a
// re-created object under a deleted key (docs/design.md §6).
func (r refresher) afterWrite(c *fiber.Ctx, prefix string) {
	refresh := false
	switch {
	case prefix == "users" || prefix == "roles" || prefix == "tenants":
		refresh = true
	case c.Method() == fiber.MethodDelete:
		refresh = true
	case c.Method() == fiber.MethodPost:
		p := principalOf(c)
		refresh = p != nil && p.IsUser() && r.tenantOf != nil && r.tenantOf(p.Name) != ""
	}
	if refresh && r.sync != nil {
		if err := r.sync.Refresh(userContext(c)); err != nil {
			r.log.ErrorContext(userContext(c), "policy data refresh failed", "error", err.Error())
		}
	}
}

// machineVisibility asks the policies which machines a caller may see, so
// that pool reports and operations and job lists never reveal or move
// hidden machines.
type machineVisibility struct{ policy Decider }

// of the request's caller.
func (v machineVisibility) of(c *fiber.Ctx) ([]string, error) {
	p := principalOf(c)
	if p == nil {
		return []string{}, nil
	}
	return v.ofPrincipal(userContext(c), p)
}

// ofPrincipal is of for principal p: nil means every machine.
func (v machineVisibility) ofPrincipal(ctx context.Context, p *auth.Principal) ([]string, error) {
	d, err := v.policy.Decide(ctx, policyListInput(p, "machines"))
	if err != nil {
		return nil, &backend.Error{Code: backend.EINTERNAL, Type: "AUTH", Messages: []string{"authorization failed"}, Err: err}
	}
	if d.Visible == nil || !d.Visible.Restricted {
		return nil, nil
	}
	if d.Visible.Keys == nil {
		return []string{}, nil
	}
	return d.Visible.Keys, nil
}
