package objects

import (
	"context"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/provgate/provgate/backend"
)

// hiding is a caller who may see everything but the listed scope/key pairs.
type hiding map[string]bool

func (h hiding) CanSee(_ context.Context, scope, key string) (bool, error) {
	return !h[scope+"/"+key], nil
}
func (h hiding) Can(context.Context, ...backend.Claim) (bool, error) { return true, nil }

// Ungranted: the caller holds everything it hands out.
func (h hiding) Ungranted(context.Context, ...backend.Grant) ([]backend.Claim, error) {
	return nil, nil
}

func as(h hiding) context.Context { return backend.WithAccess(context.Background(), h) }

// wantMessages checks err is a 422 ValidationError with exactly msgs.
func wantMessages(t *testing.T, err error, msgs ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %q", msgs)
	}
	be := backend.AsError(err)
	if be.Code != backend.EINVALID || be.Type != "ValidationError" || !reflect.DeepEqual(be.Messages, msgs) {
		t.Fatalf("got %s %s %q, want 422 ValidationError %q", be.Code, be.Type, be.Messages, msgs)
	}
}

// TestMachineReferencesAsDRP replays DRP's own machine validation cases:
// the references DRP refuses are 422 with DRP's messages, on create and on
// update.
func TestMachineReferencesAsDRP(t *testing.T) {
	each(t, func(t *testing.T, e env) {
		ctx := sys()
		if err := e.svc.Objects.InstallBuiltins(ctx); err != nil {
			t.Fatal(err)
		}
		mustCreate(t, e, "profiles", `{"Name":"jill"}`)
		mustCreate(t, e, "tasks", `{"Name":"jamie"}`)
		// A bootenv that net-boots without OS.Name or a loader template is
		// saved, but not available.
		foo := mustCreate(t, e, "bootenvs", `{"Name":"foo","Kernel":"missing-kernel"}`).(*backend.BootEnv)
		if foo.Available || !reflect.DeepEqual(foo.Errors, []string{"bootenv: Missing OS.Name", "bootenv: Missing elilo or pxelinux template"}) {
			t.Fatalf("bootenv foo: Available %v Errors %q", foo.Available, foo.Errors)
		}
		const id = "24679e38-53a2-4a82-99dd-5280139de00c"
		cases := []struct {
			name, fields string
			msgs         []string
		}{
			{"no name", `"Name":""`, []string{id + ": Invalid Name ``"}},
			{"bad bootenv and stage", `"Name":"foo","BootEnv":"bar","Stage":"baz"`, []string{"Stage baz does not exist", "Bootenv bar does not exist"}},
			{"invalid name", `"Name":"foo/"`, []string{id + ": Invalid Name `foo/`"}},
			{"missing profile", `"Name":"foo","Profiles":["foo"]`, []string{id + ": Profile foo (at 0) does not exist"}},
			{"duplicate profile", `"Name":"foo","Profiles":["jill","jill"]`, []string{id + ": Duplicate profile jill: at 0 and 1"}},
			{"bootenv not available", `"Name":"foo","BootEnv":"foo"`, []string{"BootEnv foo is not available"}},
			{"bootenv only for unknown machines", `"Name":"foo","BootEnv":"ignore"`,
				[]string{"BootEnv ignore does not allow Machine assignments, it has the OnlyUnknown flag."}},
			{"missing task", `"Name":"foo","Tasks":["foo"]`, []string{id + ": Task foo (at 0) does not exist"}},
			{"missing task-list stage", `"Name":"foo","Tasks":["jamie","stage:nost"]`, []string{id + ": Stage nost (at 1) does not exist"}},
			{"malformed task entry", `"Name":"foo","Tasks":["frob:x"]`, []string{id + ": frob:x (at 0) is malformed"}},
			{"missing workflow", `"Name":"foo","Workflow":"nowf"`, []string{"Workflow nowf does not exist"}},
		}
		for _, c := range cases {
			t.Run("create "+c.name, func(t *testing.T) {
				_, err := e.svc.Objects.Create(ctx, "machines", []byte(`{"Uuid":"`+id+`",`+c.fields+`}`))
				wantMessages(t, err, c.msgs...)
			})
		}
		m := mustCreate(t, e, "machines", `{"Uuid":"`+id+`","Name":"foo","BootEnv":"local","Profiles":["jill"],"Tasks":["jamie","action:x","context:y"]}`).(*backend.Machine)
		if !m.Available || m.ReadOnly {
			t.Fatalf("valid machine: Available %v Errors %q ReadOnly %v", m.Available, m.Errors, m.ReadOnly)
		}
		updates := []struct {
			name, patch string
			msgs        []string
		}{
			{"stage", `[{"op":"replace","path":"/Stage","value":"baz"}]`, []string{"Stage baz does not exist"}},
			{"bootenv", `[{"op":"replace","path":"/BootEnv","value":"ignore"}]`,
				[]string{"BootEnv ignore does not allow Machine assignments, it has the OnlyUnknown flag."}},
			{"profile", `[{"op":"replace","path":"/Profiles","value":["jill","foo"]}]`, []string{id + ": Profile foo (at 1) does not exist"}},
			{"duplicate", `[{"op":"replace","path":"/Profiles","value":["jill","jill"]}]`, []string{id + ": Duplicate profile jill: at 0 and 1"}},
			{"task", `[{"op":"add","path":"/Tasks/-","value":"foo"}]`, []string{id + ": Task foo (at 3) does not exist"}},
		}
		for _, u := range updates {
			t.Run("update "+u.name, func(t *testing.T) {
				_, err := e.svc.Objects.Patch(ctx, "machines", id, []byte(u.patch), false)
				wantMessages(t, err, u.msgs...)
			})
		}
		t.Run("stored reference whose object has gone", func(t *testing.T) {
			// Tasks are not held by machines: one can be deleted under a
			// machine, which is then saved but not available.
			if _, err := e.svc.Objects.Delete(ctx, "tasks", "jamie"); err != nil {
				t.Fatal(err)
			}
			got, err := e.svc.Objects.Patch(ctx, "machines", id, []byte(`[{"op":"replace","path":"/Description","value":"x"}]`), false)
			if err != nil {
				t.Fatal(err)
			}
			if got.Env().Available || !reflect.DeepEqual(got.Env().Errors, []string{id + ": Task jamie (at 0) does not exist"}) {
				t.Fatalf("Available %v Errors %q", got.Env().Available, got.Env().Errors)
			}
		})
	})
}

func TestStageWorkflowProfileReferences(t *testing.T) {
	each(t, func(t *testing.T, e env) {
		ctx := sys()
		if err := e.svc.Objects.InstallBuiltins(ctx); err != nil {
			t.Fatal(err)
		}
		mustCreate(t, e, "bootenvs", `{"Name":"netboot","Kernel":"k"}`)
		cases := []struct {
			name, prefix, body string
			msgs               []string
		}{
			{"stage task", "stages", `{"Name":"s1","Tasks":["t9"]}`, []string{"s1: Task t9 (at 0) does not exist"}},
			{"stage profile", "stages", `{"Name":"s1","Profiles":["p9"]}`, []string{"s1: Profile p9 does not exist"}},
			{"stage bootenv", "stages", `{"Name":"s1","BootEnv":"b9"}`, []string{"s1: BootEnv b9 does not exist"}},
			{"stage bootenv not available", "stages", `{"Name":"s1","BootEnv":"netboot"}`,
				[]string{"s1: Stage s1 wants BootEnv netboot, which is not available"}},
			{"workflow stage", "workflows", `{"Name":"w1","Stages":["s9"]}`, []string{"w1: Stage s9 does not exist"}},
			{"profile profile", "profiles", `{"Name":"p1","Profiles":["p9"]}`, []string{"p1: Profile p9 does not exist"}},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				_, err := e.svc.Objects.Create(ctx, c.prefix, []byte(c.body))
				wantMessages(t, err, c.msgs...)
			})
		}
		// The built-in bootenvs serve stages as on DRP, ignore included.
		mustCreate(t, e, "stages", `{"Name":"s-local","BootEnv":"local"}`)
		mustCreate(t, e, "stages", `{"Name":"s-ignore","BootEnv":"ignore"}`)
	})
}

// TestHiddenReferences: a reference a write adds to an object the caller
// may not see is refused exactly as a missing one; references already stored
// are not held against the caller.
func TestHiddenReferences(t *testing.T) {
	each(t, func(t *testing.T, e env) {
		ctx := sys()
		if err := e.svc.Objects.InstallBuiltins(ctx); err != nil {
			t.Fatal(err)
		}
		for _, b := range []struct{ prefix, body string }{
			{"profiles", `{"Name":"p-hidden","Params":{"x":"secret"}}`}, {"profiles", `{"Name":"p-open"}`},
			{"tasks", `{"Name":"t-hidden"}`}, {"bootenvs", `{"Name":"b-hidden"}`},
			{"stages", `{"Name":"s-hidden"}`}, {"workflows", `{"Name":"w-hidden","Stages":["s-hidden"]}`},
			{"params", `{"Name":"hidden/int","Secure":true,"Schema":{"type":"integer"}}`},
		} {
			mustCreate(t, e, b.prefix, b.body)
		}
		mustCreate(t, e, "machines", `{"Name":"other","Pool":"pool-hidden"}`)
		h := hiding{"profiles/p-hidden": true, "tasks/t-hidden": true, "bootenvs/b-hidden": true, "stages/s-hidden": true,
			"workflows/w-hidden": true, "pools/pool-hidden": true, "pools/pool-nobody": true, "params/hidden/int": true}
		uctx := as(h)
		const id = "6f2f1b1e-0000-4000-8000-000000000001"
		// same sends body with the hidden name and with a missing one and
		// wants the same refusal, names swapped.
		same := func(t *testing.T, write func(name string) error, hidden, missing string) {
			t.Helper()
			eh, em := write(hidden), write(missing)
			if eh == nil || em == nil {
				t.Fatalf("hidden: %v, missing: %v; want both refused", eh, em)
			}
			bh, bm := backend.AsError(eh), backend.AsError(em)
			want := strings.ReplaceAll(strings.Join(bm.Messages, "\n"), missing, hidden)
			if bh.Code != backend.EINVALID || bh.Code != bm.Code || bh.Type != bm.Type || strings.Join(bh.Messages, "\n") != want {
				t.Fatalf("hidden %s %s %q, missing %s %s %q", bh.Code, bh.Type, bh.Messages, bm.Code, bm.Type, bm.Messages)
			}
		}
		create := func(field string) func(string) error {
			return func(name string) error {
				v := `"` + name + `"`
				if field == "Profiles" || field == "Tasks" {
					v = `["` + name + `"]`
				}
				_, err := e.svc.Objects.Create(uctx, "machines", []byte(`{"Uuid":"`+id+`","Name":"m1","`+field+`":`+v+`}`))
				return err
			}
		}
		for _, c := range []struct{ field, hidden string }{
			{"Profiles", "p-hidden"}, {"Tasks", "t-hidden"}, {"BootEnv", "b-hidden"}, {"Stage", "s-hidden"},
			{"Workflow", "w-hidden"},
		} {
			t.Run("machine "+c.field, func(t *testing.T) { same(t, create(c.field), c.hidden, "nothing-here") })
		}
		t.Run("pool rule", func(t *testing.T) {
			// A pool no machine names yet, hidden from the caller, is
			// refused like one in use: the answer cannot tell them apart.
			same(t, create("Pool"), "pool-hidden", "pool-nobody")
			for _, pool := range []string{"default", "pool-visible"} {
				if _, err := e.svc.Objects.Create(uctx, "machines", []byte(`{"Name":"m-`+pool+`","Pool":"`+pool+`"}`)); err != nil {
					t.Fatalf("pool %s: %v", pool, err)
				}
			}
		})
		for _, c := range []struct{ name, prefix, tmpl, hidden string }{
			{"stage profile", "stages", `{"Name":"s1","Profiles":["%s"]}`, "p-hidden"},
			{"stage task", "stages", `{"Name":"s1","Tasks":["%s"]}`, "t-hidden"},
			{"stage bootenv", "stages", `{"Name":"s1","BootEnv":"%s"}`, "b-hidden"},
			{"workflow stage", "workflows", `{"Name":"w1","Stages":["%s"]}`, "s-hidden"},
			{"profile profile", "profiles", `{"Name":"p1","Profiles":["%s"]}`, "p-hidden"},
			{"pool group profile", "pools", `{"Id":"pl1","EnterActions":{"AddProfiles":["%s"]}}`, "p-hidden"},
			{"pool group workflow", "pools", `{"Id":"pl1","AllocateActions":{"Workflow":"%s"}}`, "w-hidden"},
		} {
			t.Run(c.name, func(t *testing.T) {
				same(t, func(name string) error {
					_, err := e.svc.Objects.Create(uctx, c.prefix, []byte(strings.Replace(c.tmpl, "%s", name, 1)))
					return err
				}, c.hidden, "nothing-here")
			})
		}
		t.Run("stored references are not held against the caller", func(t *testing.T) {
			mine := mustCreate(t, e, "machines", `{"Name":"mine","Profiles":["p-open","p-hidden"],"Stage":"s-hidden","BootEnv":"b-hidden","Tasks":["t-hidden"],"Pool":"pool-hidden"}`).(*backend.Machine)
			if _, err := e.svc.Objects.Patch(uctx, "machines", mine.Uuid, []byte(`[{"op":"replace","path":"/Description","value":"x"}]`), false); err != nil {
				t.Fatalf("unrelated edit: %v", err)
			}
			if _, err := e.svc.Objects.Patch(uctx, "machines", mine.Uuid, []byte(`[{"op":"replace","path":"/Profiles","value":["p-hidden"]}]`), false); err != nil {
				t.Fatalf("removing a profile: %v", err)
			}
			_, err := e.svc.Objects.Patch(uctx, "machines", mine.Uuid, []byte(`[{"op":"replace","path":"/Profiles","value":["p-hidden","p-hidden"]}]`), false)
			wantMessages(t, err, mine.Uuid+": Duplicate profile p-hidden: at 0 and 1")
		})
		t.Run("hidden param definition is absent", func(t *testing.T) {
			m := mustCreate(t, e, "machines", `{"Name":"pm"}`).(*backend.Machine)
			v, err := e.params().SetParam(uctx, "machines", m.Uuid, "hidden/int", "not-an-int")
			if err != nil || v != "not-an-int" {
				t.Fatalf("got %v %v, want the value stored as given", v, err)
			}
			// For a caller who sees it, the definition checks and seals.
			_, err = e.params().SetParam(ctx, "machines", m.Uuid, "hidden/int", "still-not-an-int")
			wantErr(t, err, backend.EINVALID, "ValidationError", "Invalid value for param hidden/int")
			v, err = e.params().SetParam(ctx, "machines", m.Uuid, "hidden/int", 5)
			if _, sealed := asSecureData(v); err != nil || !sealed {
				t.Fatalf("got %v %v, want a sealed value", v, err)
			}
		})
	})
}

func TestMessagesNameOnlyVisibleObjects(t *testing.T) {
	each(t, func(t *testing.T, e env) {
		ctx := sys()
		mustCreate(t, e, "profiles", `{"Name":"shared"}`)
		a := mustCreate(t, e, "machines", `{"Name":"ma","Profiles":["shared"]}`).(*backend.Machine)
		b := mustCreate(t, e, "machines", `{"Name":"mb","Profiles":["shared"]}`).(*backend.Machine)
		c := mustCreate(t, e, "machines", `{"Name":"mc","Profiles":["shared"]}`).(*backend.Machine)
		mustCreate(t, e, "profiles", `{"Name":"outer","Profiles":["shared"]}`)
		uctx := as(hiding{"machines/" + b.Uuid: true, "machines/" + c.Uuid: true})
		t.Run("in use", func(t *testing.T) {
			_, err := e.svc.Objects.Delete(uctx, "profiles", "shared")
			be := backend.AsError(err)
			want := []string{"In use by Machine ma", "In use by Profile outer", "In use by 2 other objects"}
			if be.Code != backend.ECONFLICT || be.Type != "StillInUseError" || !reflect.DeepEqual(be.Messages, want) {
				t.Fatalf("got %s %s %q, want %q", be.Code, be.Type, be.Messages, want)
			}
			_, err = e.svc.Objects.Delete(as(hiding{"machines/" + c.Uuid: true}), "profiles", "shared")
			got := backend.AsError(err).Messages
			sort.Strings(got)
			if !reflect.DeepEqual(got, []string{"In use by 1 other object", "In use by Machine ma", "In use by Machine mb", "In use by Profile outer"}) {
				t.Fatalf("one hidden: %q", got)
			}
			_, err = e.svc.Objects.Delete(ctx, "profiles", "shared")
			if be := backend.AsError(err); len(be.Messages) != 4 || strings.Contains(strings.Join(be.Messages, " "), "other") {
				t.Fatalf("server-internal caller: %q", be.Messages)
			}
		})
		t.Run("name in use", func(t *testing.T) {
			_, err := e.svc.Objects.Create(uctx, "machines", []byte(`{"Uuid":"6f2f1b1e-0000-4000-8000-000000000009","Name":"mb"}`))
			wantMessages(t, err, "6f2f1b1e-0000-4000-8000-000000000009: Name mb is already in use")
			_, err = e.svc.Objects.Patch(uctx, "machines", a.Uuid, []byte(`[{"op":"replace","path":"/Name","value":"mc"}]`), false)
			wantMessages(t, err, a.Uuid+": Name mc is already in use")
			_, err = e.svc.Objects.Patch(ctx, "machines", a.Uuid, []byte(`[{"op":"replace","path":"/Name","value":"mc"}]`), false)
			wantMessages(t, err, a.Uuid+": Name mc is already in use by machine "+c.Uuid)
		})
	})
}

func TestBuiltinBootEnvs(t *testing.T) {
	each(t, func(t *testing.T, e env) {
		ctx := sys()
		// An older server let a client make a "local" of its own.
		mustCreate(t, e, "bootenvs", `{"Name":"local","Description":"mine"}`)
		for i := 0; i < 2; i++ {
			if err := e.svc.Objects.InstallBuiltins(ctx); err != nil {
				t.Fatal(err)
			}
		}
		revs := map[string]int64{}
		for _, name := range []string{"local", "ignore"} {
			m, rev, err := e.svc.Objects.Get(ctx, "bootenvs", name)
			if err != nil {
				t.Fatal(err)
			}
			b := m.(*backend.BootEnv)
			if !b.ReadOnly || !b.Available || b.OnlyUnknown != (name == "ignore") || b.Bundle != "BasicStore" ||
				b.OS["Name"] != name || !strings.Contains(b.Description, "local hard drive") {
				t.Fatalf("built-in %s: %+v", name, b)
			}
			revs[name] = rev
		}
		if err := e.svc.Objects.InstallBuiltins(ctx); err != nil {
			t.Fatal(err)
		}
		for name, rev := range revs {
			if _, now, _ := e.svc.Objects.Get(ctx, "bootenvs", name); now != rev {
				t.Fatalf("installing again rewrote %s (rev %d to %d)", name, rev, now)
			}
		}
		t.Run("writes are refused", func(t *testing.T) {
			_, err := e.svc.Objects.Patch(ctx, "bootenvs", "local", []byte(`[{"op":"replace","path":"/Description","value":"x"}]`), false)
			wantErr(t, err, backend.EBADREQUEST, "patch", "readonly: local")
			_, err = e.svc.Objects.Patch(ctx, "bootenvs", "local", []byte(`[{"op":"replace","path":"/ReadOnly","value":false}]`), false)
			wantErr(t, err, backend.EBADREQUEST, "patch", "readonly: local")
			_, err = e.svc.Objects.Put(ctx, "bootenvs", "ignore", []byte(`{"Name":"ignore","OnlyUnknown":false}`))
			wantErr(t, err, backend.EBADREQUEST, "replace", "readonly: ignore")
			_, err = e.svc.Objects.Delete(ctx, "bootenvs", "ignore")
			wantErr(t, err, backend.EBADREQUEST, "delete", "readonly: ignore")
			if m, rev, _ := e.svc.Objects.Get(ctx, "bootenvs", "ignore"); rev != revs["ignore"] || !m.(*backend.BootEnv).OnlyUnknown {
				t.Fatalf("ignore changed: %+v", m)
			}
		})
		t.Run("clients cannot make read-only objects", func(t *testing.T) {
			m := mustCreate(t, e, "bootenvs", `{"Name":"mine","ReadOnly":true}`)
			if m.Env().ReadOnly {
				t.Fatal("created ReadOnly")
			}
			m, err := e.svc.Objects.Patch(ctx, "bootenvs", "mine", []byte(`[{"op":"replace","path":"/ReadOnly","value":true}]`), false)
			if err != nil || m.Env().ReadOnly {
				t.Fatalf("patched ReadOnly: %v %v", m, err)
			}
			if _, err := e.svc.Objects.Delete(ctx, "bootenvs", "mine"); err != nil {
				t.Fatal(err)
			}
		})
	})
}

func TestJobMachineImmutable(t *testing.T) {
	each(t, func(t *testing.T, e env) {
		ctx := sys()
		mustCreate(t, e, "tasks", `{"Name":"t1"}`)
		mustCreate(t, e, "stages", `{"Name":"s1","Tasks":["t1"]}`)
		mustCreate(t, e, "workflows", `{"Name":"w1","Stages":["s1"]}`)
		a := mustCreate(t, e, "machines", `{"Name":"ja","Workflow":"w1"}`).(*backend.Machine)
		b := mustCreate(t, e, "machines", `{"Name":"jb","Workflow":"w1"}`).(*backend.Machine)
		var job *backend.Job
		for i := 0; i < 3 && job == nil; i++ {
			_, j, err := e.svc.Jobs.CreateJob(ctx, []byte(`{"Machine":"`+a.Uuid+`"}`))
			if err != nil {
				t.Fatal(err)
			}
			job = j
		}
		_, err := e.svc.Objects.Patch(ctx, "jobs", job.Uuid, []byte(`[{"op":"replace","path":"/Machine","value":"`+b.Uuid+`"},{"op":"replace","path":"/State","value":"failed"}]`), false)
		wantMessages(t, err, "Machine cannot be changed")
		moved := *job
		moved.Machine = b.Uuid
		_, err = e.svc.Objects.Put(ctx, "jobs", job.Uuid, []byte(toJSON(t, moved)))
		wantMessages(t, err, "Machine cannot be changed")
		if got := machineOf(t, e, b.Uuid); !got.Runnable {
			t.Fatal("refused move made the other machine unrunnable")
		}
		if m, _, _ := e.svc.Objects.Get(ctx, "jobs", job.Uuid); m.(*backend.Job).Machine != a.Uuid || m.(*backend.Job).State != backend.JobCreated {
			t.Fatalf("job after refused moves: %+v", m)
		}
	})
}

// TestBuiltinSuperuserRole: the superuser role holds exactly the superuser
// claim and is read-only, so no request can empty it (which would lock
// every administrator out); a copy an older server let a client change is
// put back at start-up.
func TestBuiltinSuperuserRole(t *testing.T) {
	each(t, func(t *testing.T, e env) {
		ctx := sys()
		// An older server let the superuser role lose its claim.
		mustCreate(t, e, "roles", `{"Name":"superuser","Claims":[{"scope":"machines","action":"get","specific":"*"}]}`)
		if err := e.svc.Objects.InstallBuiltins(ctx); err != nil {
			t.Fatal(err)
		}
		m, rev, err := e.svc.Objects.Get(ctx, "roles", "superuser")
		if err != nil {
			t.Fatal(err)
		}
		r := m.(*backend.Role)
		if !r.ReadOnly || !r.Available || len(r.Claims) != 1 || r.Claims[0] != (backend.Claim{Scope: "*", Action: "*", Specific: "*"}) {
			t.Fatalf("superuser role %+v", r)
		}
		_, err = e.svc.Objects.Patch(ctx, "roles", "superuser", []byte(`[{"op":"replace","path":"/Claims","value":[]}]`), false)
		wantErr(t, err, backend.EBADREQUEST, "patch", "readonly: superuser")
		_, err = e.svc.Objects.Put(ctx, "roles", "superuser", []byte(`{"Name":"superuser","Claims":[]}`))
		wantErr(t, err, backend.EBADREQUEST, "replace", "readonly: superuser")
		_, err = e.svc.Objects.Delete(ctx, "roles", "superuser")
		wantErr(t, err, backend.EBADREQUEST, "delete", "readonly: superuser")
		// In use, the users are reported first (DRP's answer).
		mustCreate(t, e, "users", `{"Name":"root","Roles":["superuser"]}`)
		_, err = e.svc.Objects.Delete(ctx, "roles", "superuser")
		wantErr(t, err, backend.ECONFLICT, "StillInUseError", "In use by User root")
		if err := e.svc.Objects.InstallBuiltins(ctx); err != nil {
			t.Fatal(err)
		}
		if _, now, _ := e.svc.Objects.Get(ctx, "roles", "superuser"); now != rev {
			t.Fatalf("installing again rewrote the role (rev %d to %d)", rev, now)
		}
	})
}
