package pools

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/provgate/provgate/backend"
)

// fakeAccess holds exactly the claims in held and sees everything but the
// keys in hidden ("scope/key").
type fakeAccess struct {
	held   map[backend.Claim]bool
	hidden map[string]bool
	asked  [][]backend.Claim
}

func (a *fakeAccess) CanSee(_ context.Context, scope, key string) (bool, error) {
	return !a.hidden[scope+"/"+key], nil
}

func (a *fakeAccess) Can(_ context.Context, cs ...backend.Claim) (bool, error) {
	a.asked = append(a.asked, slices.Clone(cs))
	for _, c := range cs {
		if !a.held[c] {
			return false, nil
		}
	}
	return true, nil
}

func (a *fakeAccess) Ungranted(context.Context, ...backend.Grant) ([]backend.Claim, error) {
	return nil, nil
}

func holds(uuids []string, actions ...string) map[backend.Claim]bool {
	out := map[backend.Claim]bool{}
	for _, u := range uuids {
		for _, a := range actions {
			out[backend.Claim{Scope: "machines", Action: a, Specific: u}] = true
		}
	}
	return out
}

// TestBodyChangesNeedMachineClaims: the body's own params, profiles and
// workflow change each machine claimed only with the machines claims a
// PATCH of those fields needs; a refusal names the first missing claim and
// changes nothing. The pool's own groups need no such claim.
func TestBodyChangesNeedMachineClaims(t *testing.T) {
	each(t, func(t *testing.T, f *fixture) {
		f.workflowsAndProfiles()
		f.put(&backend.Pool{Id: "p1", AllocateActions: &backend.PoolTransitionActions{
			AddProfiles: []string{"prof-b"}, AddParameters: map[string]any{"from-pool": true}}})
		f.machines(1, 2, "p1", nil)
		both := []string{uuidFor(1), uuidFor(2)}
		list := []string{"Name:m001", "Name:m002"}
		refused := []struct {
			name  string
			body  map[string]any
			held  []string
			claim string
		}{
			{"add-parameters", map[string]any{"pool/add-parameters": map[string]any{"ok": 1, "x/y": 2}},
				[]string{"update:/Params/ok"}, "update:/Params/x~1y"},
			{"remove-parameters", map[string]any{"pool/remove-parameters": []string{"gone"}}, nil, "update:/Params/gone"},
			{"add-profiles", map[string]any{"pool/add-profiles": []string{"prof-a"}}, []string{"update:/Params"}, "update:/Profiles"},
			{"remove-profiles", map[string]any{"pool/remove-profiles": []string{"prof-a"}}, nil, "update:/Profiles"},
			{"workflow", map[string]any{"pool/workflow": "wf-alloc"}, []string{"update:/Profiles"}, "update:/Workflow"},
		}
		for _, tt := range refused {
			t.Run(tt.name, func(t *testing.T) {
				acc := &fakeAccess{held: holds(both, tt.held...)}
				ctx := backend.WithAccess(f.ctx, acc)
				tt.body["pool/machine-list"] = list
				before := f.snapshot()
				_, err := f.svc.Allocate(ctx, "p1", body(tt.body), backend.PoolOptions{})
				wantCode(t, err, backend.EFORBIDDEN, "Requires: machines "+tt.claim+" "+uuidFor(1))
				f.unchanged(before)
			})
		}
		t.Run("held", func(t *testing.T) {
			acc := &fakeAccess{held: holds(both, "update:/Params/ok", "update:/Profiles", "update:/Workflow")}
			ctx := backend.WithAccess(f.ctx, acc)
			_, err := f.svc.Allocate(ctx, "p1", body(map[string]any{"pool/machine-list": list,
				"pool/add-parameters": map[string]any{"ok": 1}, "pool/add-profiles": []string{"prof-a"}, "pool/workflow": "wf-alloc"}), backend.PoolOptions{})
			if err != nil {
				t.Fatal(err)
			}
			m := f.machine(1)
			if m.Params["ok"] == nil || m.Params["from-pool"] != true || !slices.Contains(m.Profiles, "prof-a") ||
				!slices.Contains(m.Profiles, "prof-b") || m.Workflow != "wf-alloc" {
				t.Fatalf("machine after allocate %+v", m)
			}
		})
		t.Run("claims on every machine decide once", func(t *testing.T) {
			f.machines(4, 8, "p1", nil)
			acc := &fakeAccess{held: holds([]string{"*"}, "update:/Params/ok")}
			ctx := backend.WithAccess(f.ctx, acc)
			_, err := f.svc.Allocate(ctx, "p1", body(map[string]any{"pool/count": 5, "pool/add-parameters": map[string]any{"ok": 2}}), backend.PoolOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(acc.asked) != 1 {
				t.Errorf("%d decisions, want 1: %v", len(acc.asked), acc.asked)
			}
		})
		t.Run("many params need update:/Params", func(t *testing.T) {
			f.machines(9, 9, "p1", nil)
			params := map[string]any{}
			for i := 0; i <= maxParamClaims; i++ {
				params[fmt.Sprintf("k%03d", i)] = i
			}
			acc := &fakeAccess{held: holds([]string{uuidFor(9)}, "update:/Params/k000")}
			ctx := backend.WithAccess(f.ctx, acc)
			_, err := f.svc.Allocate(ctx, "p1", body(map[string]any{"pool/machine-list": []string{"Name:m009"}, "pool/add-parameters": params}), backend.PoolOptions{})
			wantCode(t, err, backend.EFORBIDDEN, "Requires: machines update:/Params "+uuidFor(9))
			for _, cs := range acc.asked {
				if len(cs) > 1 {
					t.Errorf("asked %d claims at once", len(cs))
				}
			}
		})
		t.Run("pool groups alone need nothing", func(t *testing.T) {
			f.machines(3, 3, "p1", nil)
			acc := &fakeAccess{held: map[backend.Claim]bool{}}
			ctx := backend.WithAccess(f.ctx, acc)
			if _, err := f.svc.Allocate(ctx, "p1", body(map[string]any{"pool/machine-list": []string{"Name:m003"}}), backend.PoolOptions{}); err != nil {
				t.Fatal(err)
			}
			if len(acc.asked) != 0 {
				t.Errorf("asked for claims %v", acc.asked)
			}
		})
	})
}

// TestBodyNamesHiddenAsMissing: a workflow or profile the body names that
// the caller cannot see is refused exactly as a missing one.
func TestBodyNamesHiddenAsMissing(t *testing.T) {
	each(t, func(t *testing.T, f *fixture) {
		f.workflowsAndProfiles()
		f.put(&backend.Pool{Id: "p1", AllocateActions: &backend.PoolTransitionActions{Workflow: "wf-alloc", AddProfiles: []string{"prof-b"}}})
		f.machines(1, 1, "p1", nil)
		acc := &fakeAccess{held: holds([]string{uuidFor(1)}, "update"), hidden: map[string]bool{
			"workflows/wf-body": true, "profiles/prof-a": true, "workflows/wf-alloc": true, "profiles/prof-b": true}}
		ctx := backend.WithAccess(f.ctx, acc)
		for _, tt := range []struct {
			key, hidden, missing string
		}{
			{"pool/workflow", "wf-body", "no-wf"},
			{"pool/add-profiles", "prof-a", "no-prof"},
		} {
			t.Run(tt.key, func(t *testing.T) {
				val := func(n string) any {
					if tt.key == "pool/workflow" {
						return n
					}
					return []string{n}
				}
				before := f.snapshot()
				_, herr := f.svc.Allocate(ctx, "p1", body(map[string]any{tt.key: val(tt.hidden)}), backend.PoolOptions{})
				_, merr := f.svc.Allocate(ctx, "p1", body(map[string]any{tt.key: val(tt.missing)}), backend.PoolOptions{})
				wantCode(t, herr, backend.EINVALID, tt.hidden+" does not exist")
				wantCode(t, merr, backend.EINVALID, tt.missing+" does not exist")
				hb, mb := backend.AsError(herr), backend.AsError(merr)
				if hb.Model != mb.Model || hb.Key != mb.Key || hb.Type != mb.Type {
					t.Errorf("hidden %+v, missing %+v", hb, mb)
				}
				f.unchanged(before)
			})
		}
		t.Run("the pool's own hidden workflow and profile apply", func(t *testing.T) {
			if _, err := f.svc.Allocate(ctx, "p1", nil, backend.PoolOptions{}); err != nil {
				t.Fatal(err)
			}
			if m := f.machine(1); m.Workflow != "wf-alloc" || !slices.Contains(m.Profiles, "prof-b") {
				t.Fatalf("machine %+v", m)
			}
		})
	})
}
