package gateway

import (
	"context"
	"errors"
	"testing"

	"github.com/provgate/provgate/backend"
	"github.com/provgate/provgate/gateway/auth"
	"github.com/provgate/provgate/policies"
)

// scriptedDecider answers list inputs from a table of visible keys per scope
// (nil: unrestricted) and claim inputs from allow; it counts calls.
type scriptedDecider struct {
	visible map[string][]string
	allow   bool
	err     error
	calls   int
	last    policies.Input
}

func (d *scriptedDecider) Decide(_ context.Context, in policies.Input) (policies.Decision, error) {
	d.calls++
	d.last = in
	if d.err != nil {
		return policies.Decision{}, d.err
	}
	if in.List != nil {
		keys, restricted := d.visible[in.List.Scope]
		return policies.Decision{Allow: true, Visible: &policies.Visible{Restricted: restricted, Keys: keys}}, nil
	}
	return policies.Decision{Allow: d.allow}, nil
}

func TestRequestAccess(t *testing.T) {
	ctx := context.Background()
	dec := &scriptedDecider{visible: map[string][]string{"profiles": {"p1"}}, allow: true}
	a := &requestAccess{policy: dec, p: &auth.Principal{Kind: auth.KindUser, Name: "bob"}}

	for _, tc := range []struct {
		scope, key string
		want       bool
	}{
		{"profiles", "p1", true},
		{"profiles", "p2", false},
		{"profiles", "p1", true},
		{"stages", "anything", true},
	} {
		got, err := a.CanSee(ctx, tc.scope, tc.key)
		if err != nil || got != tc.want {
			t.Errorf("CanSee(%s, %s) = %v, %v; want %v", tc.scope, tc.key, got, err, tc.want)
		}
	}
	if dec.calls != 2 {
		t.Errorf("decisions = %d, want one per scope (2)", dec.calls)
	}

	c := backend.Claim{Scope: "machines", Action: "update:/Params/x", Specific: "m1"}
	if ok, err := a.Can(ctx, c); !ok || err != nil {
		t.Errorf("Can = %v, %v; want true", ok, err)
	}
	if len(dec.last.Required) != 1 || dec.last.Required[0] != c || dec.last.Principal.Name != "bob" {
		t.Errorf("Can asked %+v", dec.last)
	}
	dec.allow = false
	if ok, _ := a.Can(ctx, c); ok {
		t.Error("Can allowed what the policy denied")
	}

	// Fail closed: an engine error is an error, never a yes.
	broken := &requestAccess{policy: &scriptedDecider{err: errors.New("boom")}, p: a.p}
	if ok, err := broken.CanSee(ctx, "profiles", "p1"); ok || err == nil {
		t.Errorf("CanSee on engine error = %v, %v", ok, err)
	}
	if ok, err := broken.Can(ctx, c); ok || err == nil {
		t.Errorf("Can on engine error = %v, %v", ok, err)
	}

	// A ctx that declares no Access is refused with an error; declared
	// system work sees everything.
	if ok, err := backend.CanSee(ctx, "profiles", "p2"); ok || !errors.Is(err, backend.ErrNoAccess) {
		t.Errorf("backend.CanSee without Access = %v, %v; want refused with ErrNoAccess", ok, err)
	}
	if ok, err := backend.Can(ctx, c); ok || !errors.Is(err, backend.ErrNoAccess) {
		t.Errorf("backend.Can without Access = %v, %v; want refused with ErrNoAccess", ok, err)
	}
	if ok, err := backend.CanSee(backend.WithSystem(ctx), "profiles", "p2"); !ok || err != nil {
		t.Errorf("backend.CanSee for system work = %v, %v", ok, err)
	}
	if ok, _ := backend.CanSee(backend.WithAccess(ctx, a), "profiles", "p2"); ok {
		t.Error("backend.CanSee ignored the Access in ctx")
	}
}
