package backend

import (
	"context"
	"errors"
	"testing"
)

// sees is an Access that sees and holds nothing.
type sees struct{}

func (sees) CanSee(context.Context, string, string) (bool, error) { return false, nil }
func (sees) Can(context.Context, ...Claim) (bool, error)          { return false, nil }
func (sees) Ungranted(_ context.Context, gs ...Grant) ([]Claim, error) {
	var out []Claim
	for _, g := range gs {
		out = append(out, g.Claims...)
	}
	return out, nil
}

// TestAccessFailsClosed: a check whose ctx declares no access is refused
// with an internal error wrapping ErrNoAccess (so tests find the path that
// lost its declaration); WithSystem declares server-internal work, which
// sees and holds everything; a request's Access decides for its caller, and
// a later WithAccess replaces an earlier declaration.
func TestAccessFailsClosed(t *testing.T) {
	bare := context.Background()
	c := Claim{Scope: "machines", Action: "get", Specific: "m1"}
	if ok, err := CanSee(bare, "machines", "m1"); ok || !errors.Is(err, ErrNoAccess) || ErrorCode(err) != EINTERNAL {
		t.Errorf("CanSee without access = %v, %v", ok, err)
	}
	if ok, err := Can(bare, c); ok || !errors.Is(err, ErrNoAccess) || ErrorCode(err) != EINTERNAL {
		t.Errorf("Can without access = %v, %v", ok, err)
	}
	// An Access explicitly set to nil declares nothing either.
	if ok, err := CanSee(WithAccess(bare, nil), "machines", "m1"); ok || !errors.Is(err, ErrNoAccess) {
		t.Errorf("CanSee with a nil access = %v, %v", ok, err)
	}
	g := Grant{Claims: []Claim{c}}
	if missing, err := Ungranted(bare, g); missing != nil || !errors.Is(err, ErrNoAccess) {
		t.Errorf("Ungranted without access = %v, %v", missing, err)
	}
	if err := Grantable(bare, "users", "u1", g); !errors.Is(err, ErrNoAccess) {
		t.Errorf("Grantable without access = %v", err)
	}
	if IsSystem(bare) {
		t.Error("a bare ctx is system work")
	}

	sys := WithSystem(bare)
	if !IsSystem(sys) {
		t.Error("WithSystem is not system work")
	}
	if ok, err := CanSee(sys, "machines", "m1"); !ok || err != nil {
		t.Errorf("CanSee for system work = %v, %v", ok, err)
	}
	if ok, err := Can(sys, c, Claim{Scope: "*", Action: "*", Specific: "*"}); !ok || err != nil {
		t.Errorf("Can for system work = %v, %v", ok, err)
	}
	if err := Grantable(sys, "users", "u1", g); err != nil {
		t.Errorf("Grantable for system work = %v", err)
	}

	caller := WithAccess(sys, sees{})
	if IsSystem(caller) {
		t.Error("a caller's Access over system work is still system work")
	}
	if ok, err := CanSee(caller, "machines", "m1"); ok || err != nil {
		t.Errorf("CanSee for a caller who sees nothing = %v, %v", ok, err)
	}
	if ok, err := Can(caller, c); ok || err != nil {
		t.Errorf("Can for a caller who holds nothing = %v, %v", ok, err)
	}
	if err := Grantable(caller, "users", "u1", g); ErrorCode(err) != EFORBIDDEN {
		t.Errorf("Grantable for a caller who holds nothing = %v", err)
	}
}
