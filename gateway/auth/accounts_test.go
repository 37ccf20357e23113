package auth

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/provgate/provgate/backend"
)

func (f *fakeSecrets) RotateSystemSecret(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.system = NewSecret()
	return f.fail
}

// narrower keeps the requested roles the user holds, as the policy's
// containment does for roles that are held by name.
type narrower struct{}

func (narrower) TokenRoles(_ context.Context, have, want []string) ([]string, error) {
	var out []string
	for _, r := range want {
		if slices.Contains(have, r) {
			out = append(out, r)
		}
	}
	return out, nil
}

type userWriter struct {
	rotated []string
	asked   []string
	refused map[string]bool
}

func (u *userWriter) SetPassword(_ context.Context, name, _ string) (*backend.User, error) {
	return &backend.User{Name: name}, nil
}

func (u *userWriter) RotateSecret(_ context.Context, name string) error {
	u.rotated = append(u.rotated, name)
	return nil
}

// MayTakeOver refuses the names in refused, and records every question.
func (u *userWriter) MayTakeOver(_ context.Context, name string) error {
	u.asked = append(u.asked, name)
	if u.refused[name] {
		return &backend.Error{Code: backend.EFORBIDDEN, Type: "AUTH", Messages: []string{"cannot grant what you do not hold: users impersonate " + name}}
	}
	return nil
}

func TestAccountsToken(t *testing.T) {
	w := newTokenWorld(t)
	changes := 0
	uw := &userWriter{}
	acc := NewAccounts(w.a, w.s, narrower{}, uw, func(context.Context) error { changes++; return nil })
	ctx := context.Background()
	admin := basicGrantor(w.admin)

	t.Run("roles narrowed, a widening role dropped", func(t *testing.T) {
		tok, err := acc.Token(ctx, "bob", admin, TokenRequest{Roles: []string{"operator", "superuser"}})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(tok.Roles, []string{"operator"}) || !slices.Equal(tok.Dropped, []string{"superuser"}) {
			t.Fatalf("kept %q, dropped %q", tok.Roles, tok.Dropped)
		}
		p, err := w.auth(tok.Token)
		if err != nil {
			t.Fatal(err)
		}
		if !p.RoleRestricted || !slices.Equal(p.TokenRoles, []string{"operator"}) || p.Grantor != "admin" {
			t.Fatalf("principal %+v", p)
		}
	})
	t.Run("every role dropped restricts to none", func(t *testing.T) {
		tok, err := acc.Token(ctx, "bob", admin, TokenRequest{Roles: []string{"superuser"}})
		if err != nil {
			t.Fatal(err)
		}
		if tok.Roles == nil || len(tok.Roles) != 0 || !slices.Equal(tok.Dropped, []string{"superuser"}) {
			t.Fatalf("kept %q, dropped %q", tok.Roles, tok.Dropped)
		}
		p, err := w.auth(tok.Token)
		if err != nil || !p.RoleRestricted || p.TokenRoles == nil || len(p.TokenRoles) != 0 {
			t.Fatalf("principal %+v, %v", p, err)
		}
	})
	t.Run("scope, action and specific restrict, * for the others", func(t *testing.T) {
		tok, err := acc.Token(ctx, "bob", admin, TokenRequest{Scope: "machines", TTL: "10m"})
		if err != nil {
			t.Fatal(err)
		}
		if tok.Roles != nil || tok.Dropped != nil {
			t.Fatalf("no roles= asked, yet kept %q, dropped %q", tok.Roles, tok.Dropped)
		}
		p, err := w.auth(tok.Token)
		if err != nil {
			t.Fatal(err)
		}
		want := []backend.Claim{{Scope: "machines", Action: "*", Specific: "*"}}
		if !slices.Equal(p.Restrict, want) || p.RoleRestricted {
			t.Fatalf("principal %+v", p)
		}
		if got := p.ExpiresAt.Sub(p.IssuedAt); got != 10*time.Minute {
			t.Fatalf("lifetime %s, want 10m", got)
		}
	})
	t.Run("unknown user", func(t *testing.T) {
		_, err := acc.Token(ctx, "ghost", admin, TokenRequest{})
		if e := backend.AsError(err); !backend.IsCode(err, backend.ENOTFOUND) || e.Op != backend.ReadOp || e.Model != "users" || e.Key != "ghost" {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("bad ttl", func(t *testing.T) {
		_, err := acc.Token(ctx, "bob", admin, TokenRequest{TTL: "forever"})
		if !backend.IsCode(err, backend.EBADREQUEST) || backend.AsError(err).Key != "bob" {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("a token for another user is a takeover", func(t *testing.T) {
		// docs/design.md §5.9: minting another user's token hands out
		// what it holds; the object service decides (MayTakeOver).
		uw.asked, uw.refused = nil, map[string]bool{"bob": true}
		defer func() { uw.refused = nil }()
		if _, err := acc.Token(ctx, "bob", admin, TokenRequest{}); !backend.IsCode(err, backend.EFORBIDDEN) {
			t.Fatalf("refused takeover: %v", err)
		}
		if _, err := acc.Token(ctx, "bob", basicGrantor(w.bob), TokenRequest{}); err != nil {
			t.Fatalf("bob's own token: %v", err)
		}
		if _, err := acc.Token(ctx, "admin", admin, TokenRequest{}); err != nil {
			t.Fatalf("admin's own token: %v", err)
		}
		if !slices.Equal(uw.asked, []string{"bob"}) {
			t.Fatalf("takeovers asked for %v, want bob's only", uw.asked)
		}
	})
	t.Run("rotations drop cached copies", func(t *testing.T) {
		old := w.s.system
		if err := acc.RotateSecret(ctx, "bob"); err != nil || !slices.Equal(uw.rotated, []string{"bob"}) || changes != 1 {
			t.Fatalf("rotate bob: %v, %v, %d changes", err, uw.rotated, changes)
		}
		if err := acc.RotateSystemSecret(ctx); err != nil || w.s.system == old || changes != 2 {
			t.Fatalf("rotate system: %v, %d changes", err, changes)
		}
	})
}
