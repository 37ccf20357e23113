package objects

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/provgate/provgate/backend"
)

func machineOf(t *testing.T, e env, uuid string) *backend.Machine {
	t.Helper()
	m, _, err := e.svc.Objects.Get(sys(), "machines", uuid)
	if err != nil {
		t.Fatal(err)
	}
	return m.(*backend.Machine)
}

func setJobState(t *testing.T, e env, id string, states ...string) {
	t.Helper()
	for _, s := range states {
		if _, err := e.svc.Objects.Patch(sys(), "jobs", id, []byte(`[{"op":"replace","path":"/State","value":"`+s+`"}]`), false); err != nil {
			t.Fatalf("job %s to %s: %v", id, s, err)
		}
	}
}

func TestJobLifecycle(t *testing.T) {
	each(t, func(t *testing.T, e env) {
		ctx := sys()
		mustCreate(t, e, "tasks", `{"Name":"t1"}`)
		mustCreate(t, e, "tasks", `{"Name":"t2"}`)
		mustCreate(t, e, "bootenvs", `{"Name":"be1"}`)
		mustCreate(t, e, "stages", `{"Name":"s1","BootEnv":"be1","Tasks":["t1","t2"]}`)
		mustCreate(t, e, "workflows", `{"Name":"w1","Stages":["s1"]}`)
		m := mustCreate(t, e, "machines", `{"Name":"jm","Workflow":"w1","Pool":"p1","PoolStatus":"Joining"}`).(*backend.Machine)
		req := []byte(`{"Machine":"` + m.Uuid + `","Context":""}`)
		create := func(t *testing.T, want backend.JobOutcome) *backend.Job {
			t.Helper()
			st, j, err := e.svc.Jobs.CreateJob(ctx, req)
			if err != nil || st != want {
				t.Fatalf("got %d %v %v, want %d", st, j, err, want)
			}
			return j
		}
		t.Run("no machine field", func(t *testing.T) {
			_, _, err := e.svc.Jobs.CreateJob(ctx, []byte(`{"Machine":""}`))
			wantErr(t, err, backend.EBADREQUEST, "action", "Create request must have Machine field")
		})
		t.Run("unknown machine", func(t *testing.T) {
			_, _, err := e.svc.Jobs.CreateJob(ctx, []byte(`{"Machine":"3e7031fe-3062-45f1-835c-92541bc9cbd3"}`))
			wantErr(t, err, backend.EINVALID, "ValidationError", "Machine 3e7031fe-3062-45f1-835c-92541bc9cbd3 does not exist")
		})
		t.Run("stage and bootenv roll over with nothing to run", func(t *testing.T) {
			if j := create(t, backend.JobNone); j != nil {
				t.Fatalf("got job %v", j)
			}
			mc := machineOf(t, e, m.Uuid)
			if mc.Stage != "s1" || mc.BootEnv != "be1" || mc.CurrentTask != 1 || mc.CurrentJob == "" {
				t.Fatalf("got Stage %q BootEnv %q CurrentTask %d CurrentJob %q", mc.Stage, mc.BootEnv, mc.CurrentTask, mc.CurrentJob)
			}
			if toJSON(t, mc.Params["change-stage/map"]) != `{"none":"s1"}` {
				t.Fatalf("got change-stage/map %v", mc.Params["change-stage/map"])
			}
			log, err := e.svc.Jobs.JobLog(ctx, mc.CurrentJob)
			if err != nil || !strings.Contains(string(log), "BootEnv changed from  to be1") {
				t.Fatalf("got log %q %v", log, err)
			}
		})
		var j1 *backend.Job
		t.Run("201 for first task", func(t *testing.T) {
			j1 = create(t, backend.JobNew)
			mc := machineOf(t, e, m.Uuid)
			if j1.Task != "t1" || j1.State != "created" || j1.CurrentIndex != 2 || mc.CurrentJob != j1.Uuid || mc.CurrentTask != 2 || !j1.Current {
				t.Fatalf("got job %+v machine task %d job %s", j1, mc.CurrentTask, mc.CurrentJob)
			}
		})
		t.Run("409 while created", func(t *testing.T) {
			_, _, err := e.svc.Jobs.CreateJob(ctx, req)
			wantErr(t, err, backend.ECONFLICT, "Conflict", "already has running or created job")
		})
		t.Run("not deletable while running", func(t *testing.T) {
			setJobState(t, e, j1.Uuid, "running")
			_, err := e.svc.Objects.Delete(ctx, "jobs", j1.Uuid)
			wantErr(t, err, backend.EINVALID, "ValidationError", "Jobs "+j1.Uuid+" is not in a deletable state: running")
		})
		t.Run("failed makes machine not runnable and holds", func(t *testing.T) {
			sub := e.bus.Subscribe(16, func(ev backend.Event) bool { return ev.Type == "jobs" && ev.Key == j1.Uuid })
			defer sub.Close()
			setJobState(t, e, j1.Uuid, "failed")
			mc := machineOf(t, e, m.Uuid)
			if mc.Runnable || mc.PoolStatus != "HoldJoin" {
				t.Fatalf("got Runnable %v PoolStatus %s", mc.Runnable, mc.PoolStatus)
			}
			select {
			case ev := <-sub.C:
				var obj, orig backend.Job
				_ = json.Unmarshal(ev.Object, &obj)
				_ = json.Unmarshal(ev.Original, &orig)
				if ev.Action != "update" || obj.State != "failed" || orig.State != "running" || obj.EndTime.IsZero() {
					t.Fatalf("got event %s %s->%s", ev.Action, orig.State, obj.State)
				}
			case <-time.After(2 * time.Second):
				t.Fatal("no jobs update event")
			}
			_, _, err := e.svc.Jobs.CreateJob(ctx, req)
			wantErr(t, err, backend.ECONFLICT, "Conflict", "is not runnable")
		})
		var j2 *backend.Job
		t.Run("failed task is retried", func(t *testing.T) {
			if _, err := e.svc.Objects.Patch(ctx, "machines", m.Uuid, []byte(`[{"op":"replace","path":"/Runnable","value":true},{"op":"replace","path":"/PoolStatus","value":"Joining"}]`), false); err != nil {
				t.Fatal(err)
			}
			j2 = create(t, backend.JobNew)
			if j2.Task != "t1" || j2.Previous != j1.Uuid {
				t.Fatalf("got %+v", j2)
			}
			old, _, _ := e.svc.Objects.Get(ctx, "jobs", j1.Uuid)
			if old.(*backend.Job).Current {
				t.Fatal("previous job still Current")
			}
		})
		t.Run("incomplete is handed back", func(t *testing.T) {
			setJobState(t, e, j2.Uuid, "running", "incomplete")
			j := create(t, backend.JobAgain)
			if j.Uuid != j2.Uuid || j.State != "created" {
				t.Fatalf("got %+v", j)
			}
		})
		t.Run("last task finishing completes the workflow", func(t *testing.T) {
			setJobState(t, e, j2.Uuid, "running", "finished")
			j3 := create(t, backend.JobNew)
			if j3.Task != "t2" {
				t.Fatalf("got %+v", j3)
			}
			if mc := machineOf(t, e, m.Uuid); mc.WorkflowComplete {
				t.Fatal("complete too early")
			}
			setJobState(t, e, j3.Uuid, "running", "finished")
			mc := machineOf(t, e, m.Uuid)
			if !mc.WorkflowComplete || mc.PoolStatus != "Free" || !mc.Runnable {
				t.Fatalf("got WorkflowComplete %v PoolStatus %s", mc.WorkflowComplete, mc.PoolStatus)
			}
			create(t, backend.JobNone)
			if mc := machineOf(t, e, m.Uuid); mc.CurrentTask != 4 {
				t.Fatalf("got CurrentTask %d", mc.CurrentTask)
			}
			if _, err := e.svc.Objects.Delete(ctx, "jobs", j3.Uuid); err != nil {
				t.Fatal(err)
			}
		})
		t.Run("job state validation", func(t *testing.T) {
			_, err := e.svc.Objects.Patch(ctx, "jobs", j1.Uuid, []byte(`[{"op":"replace","path":"/State","value":"fred"}]`), false)
			wantErr(t, err, backend.EINVALID, "ValidationError", "Invalid State `fred`")
			_, err = e.svc.Objects.Patch(ctx, "jobs", j1.Uuid, []byte(`[{"op":"replace","path":"/ExitState","value":"fred"}]`), false)
			wantErr(t, err, backend.EINVALID, "ValidationError", "Invalid ExitState `fred`")
		})
		t.Run("job log", func(t *testing.T) {
			if err := e.svc.Jobs.AppendJobLog(ctx, j1.Uuid, []byte("a\n")); err != nil {
				t.Fatal(err)
			}
			_ = e.svc.Jobs.AppendJobLog(ctx, j1.Uuid, []byte("b\n"))
			log, err := e.svc.Jobs.JobLog(ctx, j1.Uuid)
			if err != nil || string(log) != "a\nb\n" {
				t.Fatalf("got %q %v", log, err)
			}
			err = e.svc.Jobs.AppendJobLog(ctx, "3e7031fe-3062-45f1-835c-92541bc9cbd3", []byte("x"))
			wantErr(t, err, backend.ENOTFOUND, "replace", "Not Found")
		})
	})
}

func TestJobContextMismatch(t *testing.T) {
	each(t, func(t *testing.T, e env) {
		mustCreate(t, e, "tasks", `{"Name":"t1"}`)
		m := mustCreate(t, e, "machines", `{"Name":"cm","Tasks":["t1"],"CurrentTask":-1}`).(*backend.Machine)
		st, j, err := e.svc.Jobs.CreateJob(sys(), []byte(`{"Machine":"`+m.Uuid+`","Context":"drpcli-runner"}`))
		if err != nil || st != backend.JobNone || j != nil {
			t.Fatalf("got %d %v %v", st, j, err)
		}
		st, j, err = e.svc.Jobs.CreateJob(sys(), []byte(`{"Machine":"`+m.Uuid+`"}`))
		if err != nil || st != backend.JobNew || j.Task != "t1" {
			t.Fatalf("got %d %v %v", st, j, err)
		}
	})
}

func TestWait(t *testing.T) {
	each(t, func(t *testing.T, e env) {
		ctx := sys()
		mustCreate(t, e, "profiles", `{"Name":"wp"}`)
		m, rev, _ := e.svc.Objects.Get(ctx, "profiles", "wp")
		tag := backend.ModelETag(m, rev)
		t.Run("times out without change", func(t *testing.T) {
			changed, err := e.svc.Objects.Wait(ctx, "profiles", "wp", tag, 50*time.Millisecond)
			if err != nil || changed {
				t.Fatalf("got %v %v", changed, err)
			}
		})
		t.Run("stale etag returns at once", func(t *testing.T) {
			changed, err := e.svc.Objects.Wait(ctx, "profiles", "Name:wp", `"other"`, time.Minute)
			if err != nil || !changed {
				t.Fatalf("got %v %v", changed, err)
			}
		})
		t.Run("wakes on change", func(t *testing.T) {
			done := make(chan bool, 1)
			go func() {
				c, _ := e.svc.Objects.Wait(ctx, "profiles", "wp", tag, 10*time.Second)
				done <- c
			}()
			time.Sleep(100 * time.Millisecond)
			start := time.Now()
			if _, err := e.params().SetParam(ctx, "profiles", "wp", "k1", 1); err != nil {
				t.Fatal(err)
			}
			select {
			case c := <-done:
				if !c || time.Since(start) > 5*time.Second {
					t.Fatalf("got %v", c)
				}
			case <-time.After(8 * time.Second):
				t.Fatal("Wait did not wake")
			}
		})
		t.Run("cancelled", func(t *testing.T) {
			m, rev, _ := e.svc.Objects.Get(ctx, "profiles", "wp")
			cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			defer cancel()
			_, err := e.svc.Objects.Wait(cctx, "profiles", "wp", backend.ModelETag(m, rev), time.Minute)
			if err == nil {
				t.Fatal("want ctx error")
			}
		})
		t.Run("missing", func(t *testing.T) {
			_, err := e.svc.Objects.Wait(ctx, "profiles", "ghost", tag, time.Second)
			wantErr(t, err, backend.ENOTFOUND, "read", "Not Found")
		})
	})
}

func TestEventsAfterCommit(t *testing.T) {
	each(t, func(t *testing.T, e env) {
		ctx := backend.WithPrincipal(sys(), "user:rocketskates")
		sub := e.bus.Subscribe(16, func(ev backend.Event) bool { return ev.Type == "users" })
		defer sub.Close()
		if _, err := e.svc.Objects.Create(ctx, "users", []byte(`{"Name":"-bad"}`)); err == nil {
			t.Fatal("want validation error")
		}
		err := e.svc.InTx(ctx, func(ctx context.Context) error {
			if _, err := e.svc.Objects.Create(ctx, "users", []byte(`{"Name":"rolled"}`)); err != nil {
				return err
			}
			return backend.Errorf(backend.EINTERNAL, "abort")
		})
		if err == nil {
			t.Fatal("want abort")
		}
		if _, _, err := e.svc.Objects.Get(ctx, "users", "rolled"); !backend.IsCode(err, backend.ENOTFOUND) {
			t.Fatalf("rolled back user exists: %v", err)
		}
		mustCreate(t, e, "users", `{"Name":"ev1","Password":"pw"}`)
		select {
		case ev := <-sub.C:
			if ev.Action != "create" || ev.Key != "ev1" || strings.Contains(string(ev.Object), "Secret") || strings.Contains(string(ev.Object), "PasswordHash") {
				t.Fatalf("got %+v %s", ev, ev.Object)
			}
		case <-time.After(2 * time.Second):
			t.Fatal("no event")
		}
		select {
		case ev := <-sub.C:
			t.Fatalf("unexpected event %+v", ev)
		default:
		}
		got, err := e.svc.Objects.Create(ctx, "users", []byte(`{"Name":"ev2"}`))
		if err != nil {
			t.Fatal(err)
		}
		ev := <-sub.C
		if ev.Principal != "user:rocketskates" || got.Key() != "ev2" {
			t.Fatalf("got %+v", ev)
		}
	})
}
