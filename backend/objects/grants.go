package objects

import (
	"bytes"
	"context"
	"maps"
	"slices"
	"strings"

	"github.com/provgate/provgate/backend"
)

// Authority flows only downward (docs/design.md §5.9): a write that hands
// out roles, claims, credentials or configuration acting on others'
// objects is allowed only when its caller holds what the write adds, or
// the explicit delegation for it. checkGrants works out what a validated
// write adds and asks the caller's Access once; server-internal writes (no
// Access) hand out anything.

// checkGrants refuses m (old is the stored version, nil on create) with
// 403 when it hands out what the caller does not hold.
func (s *core) checkGrants(ctx context.Context, m, old backend.Model) error {
	if backend.AccessFrom(ctx) == nil {
		return nil
	}
	var gs []backend.Grant
	switch v := m.(type) {
	case *backend.User:
		o, _ := old.(*backend.User)
		gs = userGrants(v, o)
	case *backend.Role:
		var had []backend.Claim
		if o, ok := old.(*backend.Role); ok {
			had = o.Claims
		}
		if added := addedClaims(v.Claims, had); len(added) > 0 {
			gs = []backend.Grant{{Claims: added, Had: had, Via: backend.EscalateClaim(v.Name)}}
		}
	case *backend.Task:
		o, _ := old.(*backend.Task)
		if o == nil {
			o = &backend.Task{}
		}
		// A task's extras go into the tokens of its jobs (docs/design.md
		// §8.7): its writer hands them out.
		if added := addedClaims(v.ExtraClaims, o.ExtraClaims); len(added) > 0 {
			gs = append(gs, backend.Grant{Claims: added, Had: o.ExtraClaims})
		}
		gs = append(gs, roleGrants(v.ExtraRoles, o.ExtraRoles)...)
	case *backend.Tenant:
		o, _ := old.(*backend.Tenant)
		if err := ownTenantNotWidened(ctx, v, o); err != nil {
			return err
		}
	case *backend.Plugin:
		o, _ := old.(*backend.Plugin)
		gs = s.pluginGrants(v, o)
	}
	return backend.Grantable(ctx, m.Prefix(), m.Key(), gs...)
}

// addedClaims are the claims of now that had lacks as written; the policy
// then skips what had already contains (Grant.Had).
func addedClaims(now, had []backend.Claim) []backend.Claim {
	var out []backend.Claim
	for _, c := range now {
		if !slices.Contains(had, c) && !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}

// roleGrants are the grants of giving the roles of now that had lacks: each
// role's claims, or roles bind <role>. The policy gives a role that does
// not exist, or that the caller cannot see, only through bind, so that a
// refusal tells neither apart nor shows a hidden role's claims.
func roleGrants(now, had []string) []backend.Grant {
	var out []backend.Grant
	seen := map[string]bool{}
	for _, r := range now {
		if seen[r] || slices.Contains(had, r) {
			continue
		}
		seen[r] = true
		out = append(out, backend.Grant{Role: r, Via: backend.BindClaim(r)})
	}
	return out
}

// userGrants: the roles a write gives u, and, when it changes another
// user's password or Secret, u's whole authority (taking over its
// credentials, docs/design.md §5.9).
func userGrants(u, old *backend.User) []backend.Grant {
	var had []string
	if old != nil {
		had = old.Roles
	}
	gs := roleGrants(u.Roles, had)
	if old == nil || (bytes.Equal(u.PasswordHash, old.PasswordHash) && u.Secret == old.Secret) {
		return gs
	}
	return append(gs, takeover(old))
}

// takeover is the grant of taking over user u: its roles' claims, unless
// the caller is u or may impersonate it. A role of u the caller cannot see
// makes the policy ask for impersonate, so that no refusal shows its
// claims.
func takeover(u *backend.User) backend.Grant {
	return backend.Grant{Roles: u.Roles, Via: backend.ImpersonateClaim(u.Name), Subject: &backend.Subject{Kind: "user", Name: u.Name}}
}

// pluginGrants: the configuration pieces of p that can carry machines'
// secrets or run programs on the server, and that old did not have as
// they are now, with the claims their writer must hold
// (Options.PluginGrants, docs/design.md §12.1).
func (s *core) pluginGrants(p, old *backend.Plugin) []backend.Grant {
	if s.pluginGrantsOf == nil {
		return nil
	}
	had := map[string]bool{}
	if old != nil {
		for k := range s.pluginGrantsOf(s.clearPlugin(old)) {
			had[k] = true
		}
	}
	var claims []backend.Claim
	for k, cs := range s.pluginGrantsOf(s.clearPlugin(p)) {
		if !had[k] {
			claims = append(claims, cs...)
		}
	}
	if len(claims) == 0 {
		return nil
	}
	return []backend.Grant{{Claims: claims}}
}

// clearPlugin is a copy of p with its secure params decoded, as the
// provider sees them.
func (s *core) clearPlugin(p *backend.Plugin) *backend.Plugin {
	view := clone(p).(*backend.Plugin)
	for k, v := range view.Params {
		view.Params[k] = s.openValue(binding{"plugins", p.Name, k}, v)
	}
	return view
}

// ownTenantNotWidened refuses a write by a tenant user to its own tenant
// that would widen what the tenant shows it: a scope taken out of Members
// (which lifts the restriction), or the caller taken out of Users (which
// lifts all of them). What a write adds to Members is checked as a
// reference (checkTenant).
func ownTenantNotWidened(ctx context.Context, t, old *backend.Tenant) error {
	if old == nil || backend.TenantFrom(ctx) != t.Name {
		return nil
	}
	var lifted []string
	for _, scope := range slices.Sorted(maps.Keys(old.Members)) {
		if _, ok := t.Members[scope]; !ok {
			lifted = append(lifted, "removing Members "+scope)
		}
	}
	me, _ := strings.CutPrefix(backend.PrincipalFrom(ctx), "user:")
	if me != "" && slices.Contains(old.Users, me) && !slices.Contains(t.Users, me) {
		lifted = append(lifted, "removing yourself from Users")
	}
	if len(lifted) == 0 {
		return nil
	}
	return &backend.Error{Code: backend.EFORBIDDEN, Type: "AUTH", Model: t.Prefix(), Key: t.Name,
		Messages: []string{"cannot widen what your own tenant shows you: " + strings.Join(lifted, "; ")}}
}

// visible reports whether prefix/key exists and the caller may see it.
func (s *core) visible(ctx context.Context, prefix, key string) (bool, error) {
	ok, err := s.exists(ctx, prefix, key)
	if err != nil || !ok {
		return false, err
	}
	return backend.CanSee(ctx, prefix, key)
}
