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
// 403 when it hands out what the caller does not hold: what its kind's
// grants rule names (rules.go).
func (s *core) checkGrants(ctx context.Context, r *kindRules, m, old backend.Model) error {
	if backend.AccessFrom(ctx) == nil {
		return nil
	}
	var gs []backend.Grant
	if r.grants != nil {
		var err error
		if gs, err = r.grants(ctx, m, old); err != nil {
			return err
		}
	}
	return backend.Grantable(ctx, m.Prefix(), m.Key(), gs...)
}

// roleClaimGrants: the claims a write adds to a role, which its writer
// hands out to every holder, or roles escalate <role>. For a writer in a
// tenant, a holder outside it is named (To): it would reach with them what
// the writer's tenant hides, so the policy then asks for the delegation.
func (s *CRUD) roleClaimGrants(ctx context.Context, r, old *backend.Role) ([]backend.Grant, error) {
	var had []backend.Claim
	if old != nil {
		had = old.Claims
	}
	added := addedClaims(r.Claims, had)
	if len(added) == 0 {
		return nil, nil
	}
	g := backend.Grant{Claims: added, Had: had, Via: backend.EscalateClaim(r.Name)}
	if old != nil {
		to, err := s.foreignHolder(ctx, r.Name)
		if err != nil {
			return nil, err
		}
		g.To = to
	}
	return []backend.Grant{g}, nil
}

// foreignHolder is a user holding role that is not in the caller's tenant:
// nil for a caller in no tenant, or when every holder is in it. Only a
// tenant user's role edits read the holders.
func (s *CRUD) foreignHolder(ctx context.Context, role string) (*backend.Subject, error) {
	mine := backend.TenantFrom(ctx)
	if mine == "" {
		return nil, nil
	}
	holders, err := s.listAll(ctx, backend.PrefixUsers, s.eq(backend.PrefixUsers, "Roles", role))
	if err != nil || len(holders) == 0 {
		return nil, err
	}
	var members []string
	m, err := s.load(ctx, backend.PrefixTenants, mine)
	if err != nil {
		return nil, err
	}
	if t, ok := m.(*backend.Tenant); ok {
		members = t.Users
	}
	for _, u := range holders {
		if !slices.Contains(members, u.Key()) {
			return &backend.Subject{Kind: "user", Name: u.Key()}, nil
		}
	}
	return nil, nil
}

// taskGrants: a task's extras go into the tokens of its jobs
// (docs/design.md §8.7): its writer hands them out.
func taskGrants(_ context.Context, t, o *backend.Task) ([]backend.Grant, error) {
	if o == nil {
		o = &backend.Task{}
	}
	var gs []backend.Grant
	if added := addedClaims(t.ExtraClaims, o.ExtraClaims); len(added) > 0 {
		gs = append(gs, backend.Grant{Claims: added, Had: o.ExtraClaims})
	}
	return append(gs, roleGrants(t.ExtraRoles, o.ExtraRoles)...), nil
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

// userGrants: the roles a write gives u (to u: a tenant user gives them
// only to users of its tenant), and, when it changes another user's
// password or Secret, u's whole authority (taking over its credentials,
// docs/design.md §5.9).
func userGrants(u, old *backend.User) []backend.Grant {
	var had []string
	if old != nil {
		had = old.Roles
	}
	gs := roleGrants(u.Roles, had)
	if old != nil {
		// A user a tenant user creates joins its tenant (tenancy.go); an
		// existing one keeps its own, which the policy compares.
		for i := range gs {
			gs[i].To = &backend.Subject{Kind: "user", Name: u.Name}
		}
	}
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

// tenantNotWidened refuses a tenant write by a caller in a tenant that
// would let anyone see more than the caller's own tenant shows it
// (docs/design.md §5.9, §6.5): a scope the caller's tenant restricts
// taken out of a tenant's Members while users are left to gain it, or a
// user taken out of Users while that tenant restricted such a scope for it
// (a user in no tenant is restricted by none). On the caller's own tenant
// every scope of Members is one it restricts, and taking itself out of
// Users is refused whatever Members holds. What a write adds to Members
// is checked as a reference (checkTenant). Users are not named, so the
// refusal tells nothing of users the caller cannot see.
func (s *CRUD) tenantNotWidened(ctx context.Context, t, old *backend.Tenant) ([]backend.Grant, error) {
	mine := backend.TenantFrom(ctx)
	if old == nil || mine == "" {
		return nil, nil
	}
	// restricts reports whether the caller's tenant restricts scope; a
	// tenant of the caller's that is gone restricts everything.
	restricts := func(string) bool { return true }
	if mine == t.Name {
		restricts = func(scope string) bool { _, ok := old.Members[scope]; return ok }
	} else if m, err := s.load(ctx, backend.PrefixTenants, mine); err != nil {
		return nil, err
	} else if own, ok := m.(*backend.Tenant); ok {
		restricts = func(scope string) bool { _, ok := own.Members[scope]; return ok }
	}
	var lifted []string
	restrictedOld := false
	for _, scope := range slices.Sorted(maps.Keys(old.Members)) {
		if !restricts(scope) {
			continue
		}
		restrictedOld = true
		if _, ok := t.Members[scope]; !ok && (mine == t.Name || len(t.Users) > 0) {
			lifted = append(lifted, "removing Members "+scope)
		}
	}
	me, _ := strings.CutPrefix(backend.PrincipalFrom(ctx), "user:")
	var self, others bool
	for _, u := range old.Users {
		if slices.Contains(t.Users, u) {
			continue
		}
		if u == me && me != "" && mine == t.Name {
			self = true
		} else if restrictedOld {
			others = true
		}
	}
	if self {
		lifted = append(lifted, "removing yourself from Users")
	}
	if others {
		lifted = append(lifted, "removing other users from Users")
	}
	if len(lifted) == 0 {
		return nil, nil
	}
	return nil, &backend.Error{Code: backend.EFORBIDDEN, Type: "AUTH", Model: t.Prefix(), Key: t.Name,
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
