package pools

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/provgate/provgate/backend"
	"github.com/provgate/provgate/backend/eventbus"
	"github.com/provgate/provgate/backend/store"
	"github.com/provgate/provgate/backend/store/storetest"
)

// fixture is one fresh store with a service and its bus.
type fixture struct {
	t   testing.TB
	ctx context.Context
	st  *store.Store
	bus *eventbus.Bus
	svc *Service
}

// each runs fn against a fresh store of every available dialect.
func each(t *testing.T, fn func(t *testing.T, f *fixture)) {
	t.Helper()
	for _, c := range storetest.Open(t) {
		t.Run(c.Name, func(t *testing.T) {
			bus := eventbus.NewBus(backend.NewCatalog())
			fn(t, &fixture{t: t, ctx: backend.WithSystem(context.Background()), st: c.Store, bus: bus,
				svc: New(c.Store, Options{Bus: bus, Recheck: 100 * time.Millisecond})})
		})
	}
}

func uuidFor(i int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012d", i) }

func newMachine(i int, pool string) *backend.Machine {
	return &backend.Machine{Name: fmt.Sprintf("m%03d", i), Uuid: uuidFor(i), Pool: pool,
		Runnable: true, Secret: "s3cret", Params: map[string]any{}}
}

func (f *fixture) put(objs ...backend.Model) {
	f.t.Helper()
	err := f.st.InTx(f.ctx, func(ctx context.Context) error {
		for _, o := range objs {
			o.Fill()
			data, err := json.Marshal(o)
			if err != nil {
				return err
			}
			if _, err := f.st.Create(ctx, o.Prefix(), o.Key(), data); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		f.t.Fatalf("put: %v", err)
	}
}

// machines adds machines first..last (inclusive) to pool, after mod.
func (f *fixture) machines(first, last int, pool string, mod func(m *backend.Machine)) {
	f.t.Helper()
	var objs []backend.Model
	for i := first; i <= last; i++ {
		m := newMachine(i, pool)
		if mod != nil {
			mod(m)
		}
		objs = append(objs, m)
	}
	f.put(objs...)
}

func (f *fixture) machine(i int) *backend.Machine {
	f.t.Helper()
	rec, err := f.st.Get(f.ctx, "machines", uuidFor(i))
	if err != nil {
		f.t.Fatalf("get machine %d: %v", i, err)
	}
	m, err := decodeMachine(rec.Data)
	if err != nil {
		f.t.Fatal(err)
	}
	return m
}

// snapshot is every machine's record, to prove that nothing changed.
func (f *fixture) snapshot() map[string]store.Record {
	f.t.Helper()
	recs, _, _, err := f.st.List(f.ctx, "machines", backend.Query{Limit: -1})
	if err != nil {
		f.t.Fatal(err)
	}
	out := map[string]store.Record{}
	for _, r := range recs {
		out[r.Key] = r
	}
	return out
}

func (f *fixture) unchanged(before map[string]store.Record) {
	f.t.Helper()
	after := f.snapshot()
	if !reflect.DeepEqual(before, after) {
		f.t.Errorf("machines changed after a failed operation")
	}
}

func body(v map[string]any) []byte {
	b, _ := json.Marshal(v)
	return b
}

func names(res []backend.PoolResult) []string {
	out := []string{}
	for _, r := range res {
		out = append(out, r.Name)
	}
	return out
}

func wantCode(t *testing.T, err error, code string, contains ...string) {
	t.Helper()
	if got := backend.ErrorCode(err); got != code {
		t.Fatalf("error code %q (%v), want %q", got, err, code)
	}
	for _, c := range contains {
		if !strings.Contains(err.Error(), c) {
			t.Errorf("error %q does not name %q", err.Error(), c)
		}
	}
}

func (f *fixture) workflowsAndProfiles() {
	f.put(
		&backend.Stage{Name: "st-a", BootEnv: "local", Tasks: []string{"t1", "t2"}},
		&backend.Stage{Name: "st-b", Tasks: []string{"t3"}},
		&backend.Workflow{Name: "wf-enter", Stages: []string{"st-a"}},
		&backend.Workflow{Name: "wf-exit", Stages: []string{"st-b"}},
		&backend.Workflow{Name: "wf-alloc", Stages: []string{"st-a", "st-b"}},
		&backend.Workflow{Name: "wf-release", Stages: []string{"st-b"}},
		&backend.Workflow{Name: "wf-body", Stages: []string{"st-b", "missing-stage"}},
		&backend.Profile{Name: "prof-a"}, &backend.Profile{Name: "prof-b"}, &backend.Profile{Name: "tenant-a"},
		&backend.Param{Name: "rack"},
	)
}

func TestAddSourcePool(t *testing.T) {
	each(t, func(t *testing.T, f *fixture) {
		f.put(&backend.Pool{Id: "p1"}, &backend.Pool{Id: "child", ParentPool: "p1"})
		f.machines(1, 3, backend.DefaultPool, nil)
		f.machines(10, 11, "other", nil)

		t.Run("default when no parent", func(t *testing.T) {
			res, err := f.svc.Add(f.ctx, "p1", body(map[string]any{"pool/count": 2}), backend.PoolOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(res) != 2 {
				t.Fatalf("got %v, want 2 machines", res)
			}
			for _, r := range res {
				if r.Status != backend.PoolFree || r.Allocated {
					t.Errorf("%+v: want Free, unallocated", r)
				}
				if !strings.HasPrefix(r.Name, "m00") {
					t.Errorf("%s did not come from default", r.Name)
				}
			}
		})
		t.Run("parent pool", func(t *testing.T) {
			res, err := f.svc.Add(f.ctx, "child", nil, backend.PoolOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(res) != 1 {
				t.Fatalf("got %v", res)
			}
			if m := f.machine(machineIndex(t, res[0])); m.Pool != "child" {
				t.Errorf("pool %s, want child", m.Pool)
			}
			st, err := f.svc.Status(f.ctx, "p1", nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(st[backend.PoolFree]) != 1 {
				t.Errorf("p1 status %v, want one Free machine left", st)
			}
		})
		t.Run("source-pool parameter", func(t *testing.T) {
			res, err := f.svc.Add(f.ctx, "p1", body(map[string]any{"pool/all-machines": true}), backend.PoolOptions{SourcePool: "other"})
			if err != nil {
				t.Fatal(err)
			}
			if got := names(res); !reflect.DeepEqual(got, []string{"m010", "m011"}) {
				t.Errorf("got %v", got)
			}
		})
		t.Run("unknown source pool", func(t *testing.T) {
			_, err := f.svc.Add(f.ctx, "p1", nil, backend.PoolOptions{SourcePool: "nowhere"})
			wantCode(t, err, backend.ENOTFOUND, "nowhere")
		})
		t.Run("same pool", func(t *testing.T) {
			_, err := f.svc.Add(f.ctx, "p1", nil, backend.PoolOptions{SourcePool: "p1"})
			wantCode(t, err, backend.EBADREQUEST, "p1")
		})
		t.Run("implicit target pool", func(t *testing.T) {
			res, err := f.svc.Add(f.ctx, "implicit", nil, backend.PoolOptions{})
			if err != nil || len(res) != 1 {
				t.Fatalf("got %v, %v", res, err)
			}
		})
	})
}

func machineIndex(t *testing.T, r backend.PoolResult) int {
	t.Helper()
	var i int
	if _, err := fmt.Sscanf(r.Name, "m%d", &i); err != nil {
		t.Fatal(err)
	}
	return i
}

func TestAddActionsAndEvents(t *testing.T) {
	each(t, func(t *testing.T, f *fixture) {
		f.workflowsAndProfiles()
		f.put(
			&backend.Pool{Id: "src", ExitActions: &backend.PoolTransitionActions{Workflow: "wf-exit",
				AddProfiles: []string{"prof-a"}, AddParameters: map[string]any{"left": "src", "shared": "exit"}}},
			&backend.Pool{Id: "dst", ParentPool: "src", EnterActions: &backend.PoolTransitionActions{Workflow: "wf-enter",
				AddProfiles: []string{"prof-b"}, AddParameters: map[string]any{"shared": "enter", "rack": 1},
				RemoveParameters: []string{"old"}}},
		)
		f.machines(1, 2, "src", func(m *backend.Machine) {
			m.Params = map[string]any{"old": true, "kept": 1}
			m.Profiles = []string{"base"}
		})
		sub := f.bus.Subscribe(16, nil)
		defer sub.Close()

		res, err := f.svc.Add(f.ctx, "dst", body(map[string]any{
			"pool/machine-list": []string{"Name:m001"}, "pool/workflow": "",
			"pool/add-parameters":  map[string]any{"shared": "body", "big": 12345678901234567},
			"pool/remove-profiles": []string{"prof-a"}, "pool/add-profiles": []string{"tenant-a"},
			"pool/remove-parameters": []string{"left"},
		}), backend.PoolOptions{Principal: "alice"})
		if err != nil {
			t.Fatal(err)
		}
		want := []backend.PoolResult{{Name: "m001", Uuid: uuidFor(1), Status: backend.PoolJoining}}
		if !reflect.DeepEqual(res, want) {
			t.Fatalf("got %+v, want %+v", res, want)
		}
		m := f.machine(1)
		if m.Pool != "dst" || m.PoolStatus != backend.PoolJoining || m.Workflow != "wf-enter" {
			t.Errorf("pool %s status %s workflow %s", m.Pool, m.PoolStatus, m.Workflow)
		}
		if want := []string{"stage:st-a", "bootenv:local", "t1", "t2"}; !reflect.DeepEqual(m.Tasks, want) ||
			m.CurrentTask != -1 || m.WorkflowComplete {
			t.Errorf("tasks %v current %d complete %v", m.Tasks, m.CurrentTask, m.WorkflowComplete)
		}
		if want := []string{"base", "prof-b", "tenant-a"}; !reflect.DeepEqual(m.Profiles, want) {
			t.Errorf("profiles %v, want %v", m.Profiles, want)
		}
		params, _ := json.Marshal(m.Params)
		if want := `{"big":12345678901234567,"kept":1,"rack":1,"shared":"body"}`; string(params) != want {
			t.Errorf("params %s, want %s", params, want)
		}
		if m.Secret != "s3cret" {
			t.Errorf("secret lost: %q", m.Secret)
		}
		if other := f.machine(2); other.Pool != "src" {
			t.Errorf("m002 moved to %s", other.Pool)
		}

		select {
		case e := <-sub.C:
			if e.Type != "machines" || e.Action != "update" || e.Key != uuidFor(1) || e.Principal != "alice" {
				t.Errorf("event %+v", e)
			}
			var obj, orig backend.Machine
			_ = json.Unmarshal(e.Object, &obj)
			_ = json.Unmarshal(e.Original, &orig)
			if obj.Pool != "dst" || orig.Pool != "src" || obj.PoolStatus != backend.PoolJoining {
				t.Errorf("event object pool %s original %s", obj.Pool, orig.Pool)
			}
			if strings.Contains(string(e.Object)+string(e.Original), "s3cret") {
				t.Error("event carries the machine secret")
			}
		default:
			t.Fatal("no event published")
		}

		t.Run("body workflow overrides", func(t *testing.T) {
			res, err := f.svc.Add(f.ctx, "dst", body(map[string]any{"pool/workflow": "wf-body"}), backend.PoolOptions{})
			if err != nil {
				t.Fatal(err)
			}
			m := f.machine(2)
			if m.Workflow != "wf-body" || !reflect.DeepEqual(m.Tasks, []string{"stage:st-b", "t3"}) || res[0].Status != backend.PoolJoining {
				t.Errorf("workflow %s tasks %v status %s", m.Workflow, m.Tasks, res[0].Status)
			}
		})
	})
}

func TestExitWorkflowWhenTargetHasNone(t *testing.T) {
	each(t, func(t *testing.T, f *fixture) {
		f.workflowsAndProfiles()
		f.put(&backend.Pool{Id: "p1", ExitActions: &backend.PoolTransitionActions{Workflow: "wf-exit"}})
		f.machines(1, 1, "p1", nil)
		res, err := f.svc.Remove(f.ctx, "p1", nil, backend.PoolOptions{})
		if err != nil {
			t.Fatal(err)
		}
		m := f.machine(1)
		if res[0].Status != backend.PoolJoining || m.Pool != backend.DefaultPool || m.Workflow != "wf-exit" {
			t.Errorf("status %s pool %s workflow %s", res[0].Status, m.Pool, m.Workflow)
		}
	})
}

func TestRemove(t *testing.T) {
	each(t, func(t *testing.T, f *fixture) {
		f.workflowsAndProfiles()
		f.put(
			&backend.Pool{Id: "parent", EnterActions: &backend.PoolTransitionActions{AddProfiles: []string{"prof-a"}}},
			&backend.Pool{Id: "kid", ParentPool: "parent", ExitActions: &backend.PoolTransitionActions{
				RemoveParameters: []string{"kid/param"}}},
		)
		f.machines(1, 3, "kid", func(m *backend.Machine) { m.Params = map[string]any{"kid/param": 1} })
		f.machines(4, 4, "flat", nil)

		res, err := f.svc.Remove(f.ctx, "kid", body(map[string]any{"pool/count": 2}), backend.PoolOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(res) != 2 {
			t.Fatalf("got %v", res)
		}
		for _, r := range res {
			m := f.machine(machineIndex(t, r))
			if m.Pool != "parent" || m.PoolStatus != backend.PoolFree || len(m.Params) != 0 ||
				!reflect.DeepEqual(m.Profiles, []string{"prof-a"}) {
				t.Errorf("%s: pool %s status %s params %v profiles %v", m.Name, m.Pool, m.PoolStatus, m.Params, m.Profiles)
			}
		}
		t.Run("implicit pool goes to default", func(t *testing.T) {
			res, err := f.svc.Remove(f.ctx, "flat", nil, backend.PoolOptions{})
			if err != nil || len(res) != 1 {
				t.Fatalf("got %v, %v", res, err)
			}
			if m := f.machine(4); m.Pool != backend.DefaultPool {
				t.Errorf("pool %s", m.Pool)
			}
		})
		t.Run("default pool", func(t *testing.T) {
			before := f.snapshot()
			_, err := f.svc.Remove(f.ctx, backend.DefaultPool, nil, backend.PoolOptions{})
			wantCode(t, err, backend.EBADREQUEST, "cannot remove machines from the default pool")
			f.unchanged(before)
		})
		t.Run("unknown pool", func(t *testing.T) {
			_, err := f.svc.Remove(f.ctx, "ghost", nil, backend.PoolOptions{})
			wantCode(t, err, backend.ENOTFOUND, "ghost")
		})
	})
}

func TestAllocateRelease(t *testing.T) {
	each(t, func(t *testing.T, f *fixture) {
		f.workflowsAndProfiles()
		f.put(
			&backend.Pool{Id: "plain"},
			&backend.Pool{Id: "wf",
				AllocateActions: &backend.PoolTransitionActions{Workflow: "wf-alloc", AddProfiles: []string{"tenant-a"}},
				ReleaseActions:  &backend.PoolTransitionActions{Workflow: "wf-release", RemoveProfiles: []string{"tenant-a"}}},
		)
		f.machines(1, 4, "plain", nil)
		f.machines(5, 6, "wf", nil)

		res, err := f.svc.Allocate(f.ctx, "plain", body(map[string]any{"pool/count": 3}), backend.PoolOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(res) != 3 {
			t.Fatalf("got %v", res)
		}
		for _, r := range res {
			if r.Status != backend.PoolInUse || !r.Allocated {
				t.Errorf("%+v: want InUse, allocated", r)
			}
		}
		if !sortedByName(res) {
			t.Errorf("reply not sorted: %v", names(res))
		}
		rel, err := f.svc.Release(f.ctx, "plain", body(map[string]any{"pool/all-machines": true}), backend.PoolOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(names(rel), names(res)) {
			t.Errorf("released %v, want %v", names(rel), names(res))
		}
		for _, r := range rel {
			if r.Status != backend.PoolFree || r.Allocated {
				t.Errorf("%+v: want Free, unallocated", r)
			}
		}

		t.Run("with workflows", func(t *testing.T) {
			res, err := f.svc.Allocate(f.ctx, "wf", body(map[string]any{"pool/machine-list": []string{"Name:m005"}}), backend.PoolOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if res[0].Status != backend.PoolBuilding || !res[0].Allocated {
				t.Fatalf("%+v", res[0])
			}
			m := f.machine(5)
			if m.Workflow != "wf-alloc" || !reflect.DeepEqual(m.Profiles, []string{"tenant-a"}) {
				t.Errorf("workflow %s profiles %v", m.Workflow, m.Profiles)
			}
			// Building is not InUse: a plain release does not take it.
			before := f.snapshot()
			_, err = f.svc.Release(f.ctx, "wf", body(map[string]any{"pool/machine-list": []string{"Name:m005"}}), backend.PoolOptions{})
			wantCode(t, err, backend.ECONFLICT, "Name:m005")
			f.unchanged(before)
			// Forced, it does.
			res, err = f.svc.Release(f.ctx, "wf", body(map[string]any{"pool/machine-list": []string{uuidFor(5)}}), backend.PoolOptions{Force: true})
			if err != nil {
				t.Fatal(err)
			}
			if res[0].Status != backend.PoolDestroying || res[0].Allocated {
				t.Errorf("%+v: want Destroying, unallocated", res[0])
			}
			m = f.machine(5)
			if m.Workflow != "wf-release" || len(m.Profiles) != 0 {
				t.Errorf("workflow %s profiles %v", m.Workflow, m.Profiles)
			}
			// Destroying is not Free: it cannot be allocated again yet.
			_, err = f.svc.Allocate(f.ctx, "wf", body(map[string]any{"pool/machine-list": []string{"Uuid:" + uuidFor(5)}}), backend.PoolOptions{})
			wantCode(t, err, backend.ECONFLICT, uuidFor(5))
		})

		t.Run("releaseToPool", func(t *testing.T) {
			if _, err := f.svc.Allocate(f.ctx, "plain", body(map[string]any{"pool/machine-list": []string{"Name:m001"}}), backend.PoolOptions{}); err != nil {
				t.Fatal(err)
			}
			res, err := f.svc.ReleaseToPool(f.ctx, "Name:m001")
			if err != nil {
				t.Fatal(err)
			}
			want := []backend.PoolResult{{Name: "m001", Uuid: uuidFor(1), Status: backend.PoolFree}}
			if !reflect.DeepEqual(res, want) {
				t.Errorf("got %+v, want %+v", res, want)
			}
			_, err = f.svc.ReleaseToPool(f.ctx, "Name:m001")
			wantCode(t, err, backend.ECONFLICT, "m001")
			_, err = f.svc.ReleaseToPool(f.ctx, "Name:nobody")
			wantCode(t, err, backend.ENOTFOUND, "nobody")
		})
	})
}

func sortedByName(res []backend.PoolResult) bool {
	for i := 1; i < len(res); i++ {
		if res[i-1].Name > res[i].Name {
			return false
		}
	}
	return true
}

func TestMachineList(t *testing.T) {
	each(t, func(t *testing.T, f *fixture) {
		f.put(&backend.Pool{Id: "p1"})
		f.machines(1, 5, "p1", nil)
		f.machines(6, 6, "p1", func(m *backend.Machine) { m.PoolAllocated, m.PoolStatus = true, backend.PoolInUse })
		f.machines(7, 7, "p1", func(m *backend.Machine) { m.Locked = true })

		res, err := f.svc.Allocate(f.ctx, "p1", body(map[string]any{
			"pool/machine-list": []string{"Name:m002", uuidFor(4), "Uuid:" + uuidFor(4)}}), backend.PoolOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := names(res); !reflect.DeepEqual(got, []string{"m002", "m004"}) {
			t.Errorf("got %v", got)
		}
		tests := []struct {
			name   string
			list   []string
			opts   backend.PoolOptions
			code   string
			naming []string
		}{
			{"missing", []string{"Name:m001", "Name:ghost", "00000000-0000-4000-8000-999999999999"}, backend.PoolOptions{},
				backend.ENOTFOUND, []string{"Name:ghost", "999999999999"}},
			{"not eligible", []string{"Name:m001", "Name:m006"}, backend.PoolOptions{}, backend.ECONFLICT, []string{"Name:m006"}},
			{"already allocated", []string{"Name:m002"}, backend.PoolOptions{}, backend.ECONFLICT, []string{"Name:m002"}},
			{"locked", []string{"Name:m007"}, backend.PoolOptions{}, backend.ECONFLICT, []string{"Name:m007", "unlocked"}},
			{"hidden by tenant", []string{"Name:m001", "Name:m003"}, backend.PoolOptions{Visible: []string{uuidFor(1)}},
				backend.ENOTFOUND, []string{"Name:m003"}},
			{"non-unique index", []string{"Arch:amd64"}, backend.PoolOptions{}, backend.EBADREQUEST, []string{"Arch"}},
			{"unknown index", []string{"Colour:red"}, backend.PoolOptions{}, backend.EBADREQUEST, []string{"Colour"}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				before := f.snapshot()
				_, err := f.svc.Allocate(f.ctx, "p1", body(map[string]any{"pool/machine-list": tt.list}), tt.opts)
				wantCode(t, err, tt.code, tt.naming...)
				f.unchanged(before)
			})
		}
	})
}

func TestFilters(t *testing.T) {
	each(t, func(t *testing.T, f *fixture) {
		f.workflowsAndProfiles() // defines param "rack"
		f.machines(1, 4, "p1", func(m *backend.Machine) { m.Arch = "arm64"; m.Params = map[string]any{"rack": 2} })
		f.machines(5, 6, "p1", func(m *backend.Machine) { m.Arch = "arm64"; m.Runnable = false })
		f.machines(7, 8, "p1", nil)

		tests := []struct {
			name   string
			filter []string
			want   []string
		}{
			{"index", []string{"Arch=amd64"}, []string{"m007", "m008"}},
			{"bool op and index ANDed", []string{"Runnable=Eq(false)", "Arch=arm64"}, []string{"m005", "m006"}},
			{"same field twice ANDed", []string{"Name=Re(^m00)", "Name=Re(4$)"}, []string{"m004"}},
			{"param", []string{"rack=2"}, []string{"m001", "m002", "m003", "m004"}},
			{"In", []string{"Name=In(m003,m008)"}, []string{"m003", "m008"}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				// Allocate all matches, check, then release them again.
				res, err := f.svc.Allocate(f.ctx, "p1", body(map[string]any{"pool/all-machines": true, "pool/filter": tt.filter}), backend.PoolOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if got := names(res); !reflect.DeepEqual(got, tt.want) {
					t.Errorf("got %v, want %v", got, tt.want)
				}
				if _, err := f.svc.Release(f.ctx, "p1", body(map[string]any{"pool/all-machines": true}), backend.PoolOptions{}); err != nil {
					t.Fatal(err)
				}
			})
		}
		errs := []struct {
			name   string
			filter []string
			code   string
			naming string
		}{
			{"unknown field", []string{"Colour=red"}, backend.ENOTACCEPTABLE, "Colour"},
			{"bad bool", []string{"Runnable=maybe"}, backend.ENOTACCEPTABLE, "Runnable"},
			{"no =", []string{"Arch"}, backend.EBADREQUEST, "pool/filter"},
			{"control word", []string{"limit=3"}, backend.EBADREQUEST, "limit"},
		}
		for _, tt := range errs {
			t.Run(tt.name, func(t *testing.T) {
				before := f.snapshot()
				_, err := f.svc.Allocate(f.ctx, "p1", body(map[string]any{"pool/filter": tt.filter}), backend.PoolOptions{})
				wantCode(t, err, tt.code, tt.naming)
				f.unchanged(before)
			})
		}
	})
}

func TestMinimum(t *testing.T) {
	each(t, func(t *testing.T, f *fixture) {
		f.put(&backend.Pool{Id: "p1"})
		f.machines(1, 3, "p1", nil)
		f.machines(4, 4, "p1", func(m *backend.Machine) { m.PoolStatus = backend.PoolHoldJoin })

		before := f.snapshot()
		_, err := f.svc.Allocate(f.ctx, "p1", body(map[string]any{"pool/count": 5}), backend.PoolOptions{})
		wantCode(t, err, backend.ECONFLICT, "wanted 5", "found 3")
		f.unchanged(before)

		_, err = f.svc.Allocate(f.ctx, "p1", body(map[string]any{"pool/all-machines": true, "pool/minimum": 4}), backend.PoolOptions{})
		wantCode(t, err, backend.ECONFLICT, "minimum 4", "found 3")
		f.unchanged(before)

		_, err = f.svc.Allocate(f.ctx, "p1", body(map[string]any{"pool/count": 2, "pool/minimum": 3}), backend.PoolOptions{})
		wantCode(t, err, backend.EBADREQUEST, "pool/minimum")
		f.unchanged(before)

		res, err := f.svc.Allocate(f.ctx, "p1", body(map[string]any{"pool/count": 5, "pool/minimum": 2}), backend.PoolOptions{})
		if err != nil || len(res) != 3 {
			t.Fatalf("partial: got %v, %v; want 3 machines", res, err)
		}
		res, err = f.svc.Allocate(f.ctx, "p1", body(map[string]any{"pool/count": 2, "pool/minimum": 0}), backend.PoolOptions{})
		if err != nil || res == nil || len(res) != 0 {
			t.Fatalf("minimum 0: got %#v, %v; want []", res, err)
		}
		// Force lets add and remove take the machine whose join failed.
		res, err = f.svc.Remove(f.ctx, "p1", nil, backend.PoolOptions{Force: true})
		if err != nil || len(res) != 1 || res[0].Name != "m004" || res[0].Status != backend.PoolFree {
			t.Fatalf("forced remove: got %v, %v", res, err)
		}
	})
}

func TestMissingReferences(t *testing.T) {
	each(t, func(t *testing.T, f *fixture) {
		f.workflowsAndProfiles()
		f.put(
			&backend.Pool{Id: "badwf", AllocateActions: &backend.PoolTransitionActions{Workflow: "no-such-wf"}},
			&backend.Pool{Id: "badprof", EnterActions: &backend.PoolTransitionActions{AddProfiles: []string{"no-such-prof"}}},
			&backend.Pool{Id: "ok"},
		)
		f.machines(1, 2, "badwf", nil)
		f.machines(3, 4, "ok", nil)
		tests := []struct {
			name   string
			run    func() error
			naming string
		}{
			{"pool workflow", func() error {
				_, err := f.svc.Allocate(f.ctx, "badwf", nil, backend.PoolOptions{})
				return err
			}, "no-such-wf"},
			{"body workflow", func() error {
				_, err := f.svc.Allocate(f.ctx, "ok", body(map[string]any{"pool/workflow": "nope-wf"}), backend.PoolOptions{})
				return err
			}, "nope-wf"},
			{"pool profile", func() error {
				_, err := f.svc.Add(f.ctx, "badprof", nil, backend.PoolOptions{SourcePool: "ok"})
				return err
			}, "no-such-prof"},
			{"body profile", func() error {
				_, err := f.svc.Allocate(f.ctx, "ok", body(map[string]any{"pool/add-profiles": []string{"prof-a", "nope-prof"}}), backend.PoolOptions{})
				return err
			}, "nope-prof"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				before := f.snapshot()
				wantCode(t, tt.run(), backend.EINVALID, tt.naming)
				f.unchanged(before)
			})
		}
		t.Run("removing a missing profile or param is fine", func(t *testing.T) {
			_, err := f.svc.Allocate(f.ctx, "ok", body(map[string]any{
				"pool/remove-profiles": []string{"nope"}, "pool/remove-parameters": []string{"nope"}}), backend.PoolOptions{})
			if err != nil {
				t.Fatal(err)
			}
		})
	})
}

func TestMalformedBody(t *testing.T) {
	each(t, func(t *testing.T, f *fixture) {
		f.machines(1, 1, "p1", nil)
		before := f.snapshot()
		verbs := map[string]func(context.Context, string, []byte, backend.PoolOptions) ([]backend.PoolResult, error){
			"add": f.svc.Add, "remove": f.svc.Remove, "allocate": f.svc.Allocate, "release": f.svc.Release,
		}
		for name, fn := range verbs {
			t.Run(name, func(t *testing.T) {
				_, err := fn(f.ctx, "p1", []byte(`{"pool/count":"two"}`), backend.PoolOptions{})
				wantCode(t, err, backend.EBADREQUEST, "pool/count")
				_, err = fn(f.ctx, "p1", []byte(`{"pool/wait-timeout":"-3s"}`), backend.PoolOptions{})
				wantCode(t, err, backend.EBADREQUEST, "pool/wait-timeout")
			})
		}
		f.unchanged(before)
	})
}

func TestStatusAndActive(t *testing.T) {
	each(t, func(t *testing.T, f *fixture) {
		f.put(&backend.Pool{Id: "empty"}, &backend.Pool{Id: "p1"})
		f.machines(1, 2, "p1", nil)
		f.machines(3, 3, "p1", func(m *backend.Machine) { m.PoolAllocated, m.PoolStatus = true, backend.PoolInUse })
		f.machines(4, 4, "implicit", nil)
		f.machines(5, 5, backend.DefaultPool, nil)

		active, err := f.svc.Active(f.ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{"default", "implicit", "p1"}; !reflect.DeepEqual(active, want) {
			t.Errorf("active %v, want %v", active, want)
		}
		st, err := f.svc.Status(f.ctx, "p1", nil)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string][]backend.PoolResult{
			backend.PoolFree:  {{Name: "m001", Uuid: uuidFor(1), Status: "Free"}, {Name: "m002", Uuid: uuidFor(2), Status: "Free"}},
			backend.PoolInUse: {{Name: "m003", Uuid: uuidFor(3), Allocated: true, Status: "InUse"}},
		}
		if !reflect.DeepEqual(st, want) {
			t.Errorf("status %+v, want %+v", st, want)
		}
		st, err = f.svc.Status(f.ctx, "p1", []string{uuidFor(3)})
		if err != nil || len(st) != 1 || len(st[backend.PoolInUse]) != 1 {
			t.Errorf("visible status %+v, %v", st, err)
		}
		if st, err := f.svc.Status(f.ctx, "implicit", nil); err != nil || len(st[backend.PoolFree]) != 1 {
			t.Errorf("implicit status %+v, %v", st, err)
		}
		if st, err := f.svc.Status(f.ctx, "empty", nil); err != nil || st == nil || len(st) != 0 {
			t.Errorf("empty status %+v, %v", st, err)
		}
		_, err = f.svc.Status(f.ctx, "ghost", nil)
		wantCode(t, err, backend.ENOTFOUND, "ghost")
	})
}

// complete plays the objects service: when a pool operation's update event
// arrives, finish the machine's workflow after delay and publish the change.
func (f *fixture) completeOnEvent(t *testing.T, delay time.Duration) (done chan struct{}) {
	sub := f.bus.Subscribe(16, func(e backend.Event) bool { return e.Principal == "pool-op" })
	done = make(chan struct{})
	go func() {
		defer close(done)
		defer sub.Close()
		e := <-sub.C
		time.Sleep(delay)
		rec, err := f.st.Get(f.ctx, "machines", e.Key)
		if err != nil {
			t.Error(err)
			return
		}
		m, _ := decodeMachine(rec.Data)
		orig := rec.Data
		m.WorkflowComplete = true
		m.CurrentTask = len(m.Tasks)
		m.PoolStatus = backend.PoolStatusOnComplete(m.PoolStatus)
		data, _ := json.Marshal(m)
		if _, err := f.st.Update(f.ctx, "machines", m.Uuid, rec.Rev, data); err != nil {
			t.Error(err)
			return
		}
		f.bus.Publish(f.ctx, backend.Event{Type: "machines", Action: "update", Key: m.Uuid, Object: data, Original: orig})
	}()
	return done
}

func TestWait(t *testing.T) {
	each(t, func(t *testing.T, f *fixture) {
		f.workflowsAndProfiles()
		f.put(&backend.Pool{Id: "p1",
			AllocateActions: &backend.PoolTransitionActions{Workflow: "wf-alloc"},
			ReleaseActions:  &backend.PoolTransitionActions{Workflow: "wf-release"}})
		f.machines(1, 2, "p1", nil)
		// The wait must wake on the event, not on the periodic re-read.
		f.svc.recheck = time.Hour

		t.Run("reaches stable status", func(t *testing.T) {
			done := f.completeOnEvent(t, 50*time.Millisecond)
			start := time.Now()
			res, err := f.svc.Allocate(f.ctx, "p1", body(map[string]any{"pool/wait-timeout": "10s",
				"pool/machine-list": []string{"Name:m001"}}), backend.PoolOptions{Principal: "pool-op"})
			if err != nil {
				t.Fatal(err)
			}
			<-done
			if res[0].Status != backend.PoolInUse || !res[0].Allocated {
				t.Errorf("got %+v, want InUse", res[0])
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("took %v", d)
			}
			// Terraform's release: wait, then require Free.
			done = f.completeOnEvent(t, 50*time.Millisecond)
			res, err = f.svc.Release(f.ctx, "p1", body(map[string]any{"pool/wait-timeout": "10s",
				"pool/machine-list": []string{uuidFor(1)}, "pool/remove-profiles": []string{}}), backend.PoolOptions{Principal: "pool-op"})
			if err != nil {
				t.Fatal(err)
			}
			<-done
			if res[0].Status != backend.PoolFree || res[0].Allocated {
				t.Errorf("got %+v, want Free", res[0])
			}
		})
		t.Run("times out", func(t *testing.T) {
			start := time.Now()
			res, err := f.svc.Allocate(f.ctx, "p1", body(map[string]any{"pool/wait-timeout": 0.3}), backend.PoolOptions{})
			if err != nil {
				t.Fatal(err)
			}
			d := time.Since(start)
			if d < 300*time.Millisecond || d > 3*time.Second {
				t.Errorf("returned after %v, want about 300ms", d)
			}
			if len(res) != 1 || res[0].Status != backend.PoolBuilding {
				t.Errorf("got %+v, want Building", res)
			}
		})
		t.Run("context ends the wait", func(t *testing.T) {
			if _, err := f.svc.Release(f.ctx, "p1", body(map[string]any{"pool/all-machines": true}), backend.PoolOptions{Force: true}); err != nil {
				t.Fatal(err)
			}
			// Make the released machines Free again without a workflow.
			for _, i := range []int{1, 2} {
				rec, _ := f.st.Get(f.ctx, "machines", uuidFor(i))
				m, _ := decodeMachine(rec.Data)
				m.PoolStatus, m.PoolAllocated = backend.PoolFree, false
				data, _ := json.Marshal(m)
				if _, err := f.st.Update(f.ctx, "machines", m.Uuid, rec.Rev, data); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithTimeout(f.ctx, 200*time.Millisecond)
			defer cancel()
			start := time.Now()
			res, err := f.svc.Allocate(ctx, "p1", body(map[string]any{"pool/wait-timeout": "1h"}), backend.PoolOptions{})
			if err != nil || len(res) != 1 {
				t.Fatalf("got %v, %v", res, err)
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("returned after %v", d)
			}
		})
	})
}

func TestWaitRecheck(t *testing.T) {
	// Another replica completes the workflow: no event here, the periodic
	// re-read sees it.
	each(t, func(t *testing.T, f *fixture) {
		f.workflowsAndProfiles()
		f.put(&backend.Pool{Id: "p1", AllocateActions: &backend.PoolTransitionActions{Workflow: "wf-alloc"}})
		f.machines(1, 1, "p1", nil)
		otherBus := eventbus.NewBus(backend.NewCatalog())
		svc := New(f.st, Options{Bus: otherBus, Recheck: 50 * time.Millisecond})
		done := f.completeOnEvent(t, 100*time.Millisecond)
		// Forward only the operation's own event to the "other replica"
		// that completes the workflow; its completion is not forwarded.
		sub := otherBus.Subscribe(4, nil)
		go func() {
			defer sub.Close()
			e := <-sub.C
			e.Principal = "pool-op"
			f.bus.Publish(f.ctx, e)
		}()
		res, err := svc.Allocate(f.ctx, "p1", body(map[string]any{"pool/wait-timeout": "10s"}), backend.PoolOptions{})
		if err != nil {
			t.Fatal(err)
		}
		<-done
		if res[0].Status != backend.PoolInUse {
			t.Errorf("got %+v, want InUse", res[0])
		}
	})
}

// hiding is a caller who may see everything but the listed scope/key pairs.
type hiding map[string]bool

func (h hiding) CanSee(_ context.Context, scope, key string) (bool, error) {
	return !h[scope+"/"+key], nil
}
func (h hiding) Can(context.Context, ...backend.Claim) (bool, error) { return true, nil }

func (h hiding) Ungranted(context.Context, ...backend.Grant) ([]backend.Claim, error) {
	return nil, nil
}

// TestHiddenReferences: what a manage body names and the caller may not see
// is refused exactly as what does not exist; the pools' own groups are not
// held against the caller.
func TestHiddenReferences(t *testing.T) {
	each(t, func(t *testing.T, f *fixture) {
		f.workflowsAndProfiles()
		f.put(&backend.Pool{Id: "ok"},
			&backend.Pool{Id: "grp", AllocateActions: &backend.PoolTransitionActions{Workflow: "wf-alloc", AddProfiles: []string{"prof-b"}}})
		f.machines(1, 2, "ok", nil)
		f.machines(3, 3, "grp", nil)
		ctx := backend.WithAccess(f.ctx, hiding{"workflows/wf-alloc": true, "profiles/prof-b": true})
		refused := func(b map[string]any) string {
			t.Helper()
			before := f.snapshot()
			_, err := f.svc.Allocate(ctx, "ok", body(b), backend.PoolOptions{})
			f.unchanged(before)
			if backend.ErrorCode(err) != backend.EINVALID {
				t.Fatalf("got %v, want a 422", err)
			}
			return strings.Join(backend.AsError(err).Messages, "\n")
		}
		hidden := refused(map[string]any{"pool/workflow": "wf-alloc"})
		missing := refused(map[string]any{"pool/workflow": "nope-wf"})
		if strings.ReplaceAll(missing, "nope-wf", "wf-alloc") != hidden {
			t.Fatalf("hidden workflow %q, missing %q", hidden, missing)
		}
		hidden = refused(map[string]any{"pool/add-profiles": []string{"prof-a", "prof-b"}})
		missing = refused(map[string]any{"pool/add-profiles": []string{"prof-a", "nope-prof"}})
		if strings.ReplaceAll(missing, "nope-prof", "prof-b") != hidden {
			t.Fatalf("hidden profile %q, missing %q", hidden, missing)
		}
		// The pool's own group names the same hidden objects: it applies.
		res, err := f.svc.Allocate(ctx, "grp", nil, backend.PoolOptions{})
		if err != nil || len(res) != 1 {
			t.Fatalf("pool group: %v %v", res, err)
		}
	})
}
