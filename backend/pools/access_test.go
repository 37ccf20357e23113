package pools

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
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

// Can holds a wanted claim when a held one names it exactly, or with
// Specific "*", or with action "update" for an "update:<pointer>" form.
func (a *fakeAccess) Can(_ context.Context, cs ...backend.Claim) (bool, error) {
	a.asked = append(a.asked, slices.Clone(cs))
	for _, c := range cs {
		if !a.holds(c) {
			return false, nil
		}
	}
	return true, nil
}

func (a *fakeAccess) holds(c backend.Claim) bool {
	for _, spec := range []string{c.Specific, "*"} {
		for _, act := range []string{c.Action, "update"} {
			if (act == c.Action || strings.HasPrefix(c.Action, "update:")) &&
				a.held[backend.Claim{Scope: c.Scope, Action: act, Specific: spec}] {
				return true
			}
		}
	}
	return false
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
// changes nothing. The pool's own group (here a param and a profile) needs
// its claims too (TestPoolGroupsNeedMachineClaims), held in every case.
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
				[]string{"update:/Params/ok", "update:/Profiles"}, "update:/Params/x~1y"},
			{"remove-parameters", map[string]any{"pool/remove-parameters": []string{"gone"}}, []string{"update:/Profiles"}, "update:/Params/gone"},
			{"add-profiles", map[string]any{"pool/add-profiles": []string{"prof-a"}}, []string{"update:/Params"}, "update:/Profiles"},
			{"remove-profiles", map[string]any{"pool/remove-profiles": []string{"prof-a"}}, nil, "update:/Profiles"},
			{"workflow", map[string]any{"pool/workflow": "wf-alloc"}, []string{"update:/Profiles"}, "update:/Workflow"},
		}
		for _, tt := range refused {
			t.Run(tt.name, func(t *testing.T) {
				acc := &fakeAccess{held: holds(both, append(tt.held, "update:/Params/from-pool")...)}
				ctx := backend.WithAccess(f.ctx, acc)
				tt.body["pool/machine-list"] = list
				before := f.snapshot()
				_, err := f.svc.Allocate(ctx, "p1", body(tt.body), backend.PoolOptions{})
				wantCode(t, err, backend.EFORBIDDEN, "Requires: machines "+tt.claim+" "+uuidFor(1))
				f.unchanged(before)
			})
		}
		t.Run("held", func(t *testing.T) {
			acc := &fakeAccess{held: holds(both, "update:/Params/ok", "update:/Params/from-pool", "update:/Profiles", "update:/Workflow")}
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
			acc := &fakeAccess{held: holds([]string{"*"}, "update:/Params/ok", "update:/Params/from-pool", "update:/Profiles")}
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
			acc := &fakeAccess{held: holds([]string{uuidFor(9)}, "update:/Params/k000", "update:/Profiles")}
			ctx := backend.WithAccess(f.ctx, acc)
			_, err := f.svc.Allocate(ctx, "p1", body(map[string]any{"pool/machine-list": []string{"Name:m009"}, "pool/add-parameters": params}), backend.PoolOptions{})
			wantCode(t, err, backend.EFORBIDDEN, "Requires: machines update:/Params "+uuidFor(9))
			for _, cs := range acc.asked {
				// update:/Params and the pool's update:/Profiles.
				if len(cs) > 2 {
					t.Errorf("asked %d claims at once", len(cs))
				}
			}
		})
		t.Run("no declared access is refused", func(t *testing.T) {
			f.machines(3, 3, "p1", nil)
			before := f.snapshot()
			_, err := f.svc.Allocate(context.Background(), "p1", body(map[string]any{"pool/machine-list": []string{"Name:m003"}}), backend.PoolOptions{})
			if !errors.Is(err, backend.ErrNoAccess) || backend.ErrorCode(err) != backend.EINTERNAL {
				t.Fatalf("allocate without an access: %v", err)
			}
			f.unchanged(before)
		})
	})
}

// TestPoolGroupsNeedMachineClaims: a pool's own action groups apply only
// what the caller of the operation could change by hand (docs/design.md
// §11.4): with "machines get" alone, a caller allowed to allocate and
// release cannot set params, profiles or a workflow through the pool's
// AllocateActions, EnterActions or ReleaseActions; nothing changes, and the
// refusal names the claim. With the claims it works.
func TestPoolGroupsNeedMachineClaims(t *testing.T) {
	each(t, func(t *testing.T, f *fixture) {
		f.workflowsAndProfiles()
		groups := map[string]*backend.PoolTransitionActions{
			"params":    {AddParameters: map[string]any{"boot/cmdline": "init=/bin/sh"}},
			"removal":   {RemoveParameters: []string{"keep"}},
			"profiles":  {AddProfiles: []string{"prof-b"}},
			"unprofile": {RemoveProfiles: []string{"prof-a"}},
			"workflow":  {Workflow: "wf-alloc"},
		}
		claims := map[string]string{"params": "update:/Params/boot~1cmdline", "removal": "update:/Params/keep",
			"profiles": "update:/Profiles", "unprofile": "update:/Profiles", "workflow": "update:/Workflow"}
		i := 10
		for _, name := range slices.Sorted(maps.Keys(groups)) {
			g := groups[name]
			t.Run(name, func(t *testing.T) {
				for _, verb := range []backend.PoolVerb{backend.PoolAllocate, backend.PoolAdd} {
					i++
					u, ref := uuidFor(i), []string{"Name:" + newMachine(i, "").Name}
					pool := &backend.Pool{Id: fmt.Sprintf("%s-%s", verb, name)}
					from := pool.Id
					if verb == backend.PoolAllocate {
						pool.AllocateActions = g
					} else {
						pool.EnterActions = g
						from = backend.DefaultPool
					}
					f.put(pool)
					f.machines(i, i, from, func(m *backend.Machine) {
						m.Params["keep"] = "v"
						m.Profiles = []string{"prof-a"}
					})
					acc := &fakeAccess{held: holds([]string{"*"}, "get")}
					before := f.snapshot()
					_, err := f.svc.Op(backend.WithAccess(f.ctx, acc), verb, pool.Id,
						body(map[string]any{"pool/machine-list": ref}), backend.PoolOptions{})
					wantCode(t, err, backend.EFORBIDDEN, "Requires: machines "+claims[name]+" "+u)
					f.unchanged(before)

					acc = &fakeAccess{held: holds([]string{u}, claims[name])}
					if _, err := f.svc.Op(backend.WithAccess(f.ctx, acc), verb, pool.Id,
						body(map[string]any{"pool/machine-list": ref}), backend.PoolOptions{}); err != nil {
						t.Fatalf("%s with %s: %v", verb, claims[name], err)
					}
					m := f.machine(i)
					changed := map[string]bool{
						"params":    m.Params["boot/cmdline"] == "init=/bin/sh",
						"removal":   m.Params["keep"] == nil,
						"profiles":  slices.Contains(m.Profiles, "prof-b"),
						"unprofile": !slices.Contains(m.Profiles, "prof-a"),
						"workflow":  m.Workflow == "wf-alloc",
					}
					if !changed[name] {
						t.Fatalf("%s: the group was not applied: %+v", verb, m)
					}
				}
			})
		}
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
