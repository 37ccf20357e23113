package objects

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/provgate/provgate/backend"
)

// AdminUser is the first administrator Bootstrap creates.
const AdminUser = "rocketskates"

// Bootstrap creates the superuser role and the user AdminUser, with the
// password password returns, on the first start with an empty store
// (docs/design.md §15.2). It does nothing when any user exists, so later
// starts never touch them; password is called only when the user is made.
func (s *Accounts) Bootstrap(ctx context.Context, password func() (string, error)) (created bool, err error) {
	ctx = backend.WithSystem(ctx) // first start: no caller (docs/design.md §2.3)
	_, total, _, err := s.st.List(ctx, backend.PrefixUsers, backend.Query{Limit: 1})
	if err != nil {
		return false, err
	}
	if total > 0 {
		return false, nil
	}
	if _, err := s.st.Get(ctx, backend.PrefixRoles, "superuser"); backend.IsCode(err, backend.ENOTFOUND) {
		role, err := json.Marshal(backend.Role{Name: "superuser", Description: "every right",
			Claims: []backend.Claim{{Scope: "*", Action: "*", Specific: "*"}}})
		if err != nil {
			return false, err
		}
		if _, err := s.objects.Create(ctx, backend.PrefixRoles, role); err != nil && !backend.IsCode(err, backend.ECONFLICT) {
			return false, fmt.Errorf("bootstrap role superuser: %w", err)
		}
	} else if err != nil {
		return false, err
	}
	pw, err := password()
	if err != nil {
		return false, err
	}
	user, err := json.Marshal(map[string]any{"Name": AdminUser, "Roles": []string{"superuser"}, "Password": pw,
		"Description": "first administrator"})
	if err != nil {
		return false, err
	}
	if _, err := s.objects.Create(ctx, backend.PrefixUsers, user); err != nil && !backend.IsCode(err, backend.ECONFLICT) {
		return false, fmt.Errorf("bootstrap user %s: %w", AdminUser, err)
	}
	s.log.Info("created role superuser and user " + AdminUser)
	return true, nil
}

// RotateSecret gives user name a new Secret, which kills every token of
// the user (docs/design.md §8.4).
func (s *Accounts) RotateSecret(ctx context.Context, name string) error {
	_, err := s.mutate(ctx, s.kinds.Kind(backend.PrefixUsers), name, backend.ActionOp, "update", false, func(_ context.Context, old backend.Model) (backend.Model, error) {
		u := clone(old).(*backend.User)
		u.Secret = s.newSecret()
		return u, nil
	})
	return err
}

// SetPassword hashes password into name's PasswordHash and rotates the
// user's Secret, which revokes every token the user holds or granted
// (docs/design.md §4.8).
func (s *Accounts) SetPassword(ctx context.Context, name, password string) (*backend.User, error) {
	if s.hash == nil {
		return nil, backend.OpError(backend.EUNAVAILABLE, backend.ReplaceOp, "users", name, "Password hashing is not configured")
	}
	h, err := s.hash(password)
	if err != nil {
		return nil, err
	}
	m, err := s.mutate(ctx, s.kinds.Kind("users"), name, backend.ReplaceOp, "update", false, func(_ context.Context, old backend.Model) (backend.Model, error) {
		u := clone(old).(*backend.User)
		u.PasswordHash = h
		u.Secret = s.newSecret()
		return u, nil
	})
	if err != nil {
		return nil, err
	}
	u := m.(*backend.User)
	u.Sanitize()
	return u, nil
}

// PasswordHash returns a user's stored hash, for the gateway's password
// check; it never leaves the server.
func (s *Accounts) PasswordHash(ctx context.Context, name string) ([]byte, string, error) {
	_, m, err := s.read(ctx, s.kinds.Kind("users"), name, backend.ReadOp)
	if err != nil {
		return nil, "", err
	}
	u := m.(*backend.User)
	return u.PasswordHash, u.Secret, nil
}

// MayTakeOver refuses, with 403, a caller that may not take over user name
// (docs/design.md §5.9): minting its tokens hands out everything it holds,
// so the caller must be name, hold what name's roles grant, or hold users
// impersonate <name>. A tenant user takes over only users of its tenant.
// Server-internal work may.
func (s *Accounts) MayTakeOver(ctx context.Context, name string) error {
	if backend.AccessFrom(ctx) == nil {
		return nil
	}
	_, m, err := s.read(ctx, s.kinds.Kind(backend.PrefixUsers), name, backend.ReadOp)
	if err != nil {
		return err
	}
	return backend.Grantable(ctx, backend.PrefixUsers, name, takeover(m.(*backend.User)))
}
