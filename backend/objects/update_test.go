package objects

import (
	"encoding/json"
	"testing"

	"github.com/provgate/provgate/backend"
)

func TestPatch(t *testing.T) {
	each(t, func(t *testing.T, e env) {
		ctx := sys()
		mustCreate(t, e, "stages", `{"Name":"john","Description":"x"}`)
		t.Run("test and replace with from", func(t *testing.T) {
			m, err := e.svc.Objects.Patch(ctx, "stages", "john", []byte(`[{"op":"test","path":"/Description","from":"","value":"x"},{"op":"replace","path":"/Description","from":"","value":"new"}]`), false)
			if err != nil || m.(*backend.Stage).Description != "new" {
				t.Fatalf("got %v %v", m, err)
			}
		})
		t.Run("params add with escaped pointer", func(t *testing.T) {
			m, err := e.svc.Objects.Patch(ctx, "stages", "Name:john", []byte(`[{"op":"add","path":"/Params/callback~1action","from":"","value":"go"}]`), false)
			if err != nil || m.(*backend.Stage).Params["callback/action"] != "go" {
				t.Fatalf("got %v %v", m, err)
			}
		})
		t.Run("empty patch", func(t *testing.T) {
			m, err := e.svc.Objects.Patch(ctx, "stages", "john", []byte(`[]`), false)
			if err != nil || m.(*backend.Stage).Description != "new" {
				t.Fatalf("got %v %v", m, err)
			}
		})
		errs := []struct{ name, key, patch, code, typ, msg string }{
			{"failed test", "john", `[{"op":"test","path":"/Description","from":"","value":"old"},{"op":"replace","path":"/Description","value":"z"}]`,
				backend.ECONFLICT, "patch", `Test op failed at "/Description"`},
			{"bad path", "john", `[{"op":"replace","path":"/Params/nope/deeper","value":1}]`, backend.ECONFLICT, "patch", `path "/Params/nope/deeper" does not exist`},
			{"key change", "john", `[{"op":"replace","path":"/Name","value":"jane"}]`, backend.EBADREQUEST, "patch", "Key change from john to jane not allowed"},
			{"bad op", "john", `[{"op":"frob","path":"/Name"}]`, backend.EBADREQUEST, "patch", "invalid op"},
			{"not json", "john", `{`, backend.EBADREQUEST, "patch", "unexpected end"},
			{"wrong type", "john", `[{"op":"replace","path":"/Reboot","value":"yes"}]`, backend.EINVALID, "ValidationError", "Reboot"},
			{"missing task", "john", `[{"op":"replace","path":"/Tasks","value":["nosuch"]},{"op":"replace","path":"/Name","value":"john"}]`,
				backend.EINVALID, "ValidationError", "john: Task nosuch (at 0) does not exist"},
			{"missing", "ghost", `[]`, backend.ENOTFOUND, "patch", "Not Found"},
		}
		for _, tc := range errs {
			t.Run(tc.name, func(t *testing.T) {
				_, err := e.svc.Objects.Patch(ctx, "stages", tc.key, []byte(tc.patch), false)
				if tc.code == "" {
					if err != nil {
						t.Fatal(err)
					}
					return
				}
				wantErr(t, err, tc.code, tc.typ, tc.msg)
			})
		}
		t.Run("a refused patch changes nothing", func(t *testing.T) {
			m, _, _ := e.svc.Objects.Get(ctx, "stages", "john")
			if st := m.(*backend.Stage); len(st.Tasks) != 0 || !st.Available {
				t.Fatalf("got Tasks %v Available %v", st.Tasks, st.Available)
			}
		})
		t.Run("whole document test", func(t *testing.T) {
			m, _, _ := e.svc.Objects.Get(ctx, "stages", "john")
			p := `[{"op":"test","path":"","value":` + toJSON(t, m) + `},{"op":"replace","path":"/Description","value":"w"}]`
			if _, err := e.svc.Objects.Patch(ctx, "stages", "john", []byte(p), false); err != nil {
				t.Fatal(err)
			}
		})
	})
}

func TestPatchSecrets(t *testing.T) {
	each(t, func(t *testing.T, e env) {
		ctx := sys()
		mustCreate(t, e, "users", `{"Name":"sam","Password":"pw"}`)
		secret := rawRecord(t, e, "users", "sam")["Secret"]
		t.Run("test on secret fails", func(t *testing.T) {
			_, err := e.svc.Objects.Patch(ctx, "users", "sam", []byte(`[{"op":"test","path":"/Secret","value":"`+secret.(string)+`"}]`), false)
			wantErr(t, err, backend.ECONFLICT, "patch", "Test op failed")
		})
		t.Run("unrelated patch keeps secrets", func(t *testing.T) {
			u, err := e.svc.Objects.Patch(ctx, "users", "sam", []byte(`[{"op":"replace","path":"/Description","value":"d"}]`), false)
			if err != nil || u.(*backend.User).Secret != "" {
				t.Fatalf("got %v %v", u, err)
			}
			raw := rawRecord(t, e, "users", "sam")
			if raw["Secret"] != secret || raw["PasswordHash"] == nil {
				t.Fatalf("got %v", raw)
			}
		})
		t.Run("writing secret rotates it", func(t *testing.T) {
			if _, err := e.svc.Objects.Patch(ctx, "users", "sam", []byte(`[{"op":"replace","path":"/Secret","value":"chosen"}]`), false); err != nil {
				t.Fatal(err)
			}
			got := rawRecord(t, e, "users", "sam")["Secret"]
			if got == secret || got == "chosen" {
				t.Fatalf("got Secret %v", got)
			}
		})
		t.Run("set password rotates secret", func(t *testing.T) {
			before := rawRecord(t, e, "users", "sam")["Secret"]
			if _, err := e.svc.Accounts.SetPassword(ctx, "sam", "new"); err != nil {
				t.Fatal(err)
			}
			h, s, _ := e.svc.Accounts.PasswordHash(ctx, "sam")
			if string(h) != "16384$8$1$73616c74$new" || s == before {
				t.Fatalf("got %q %q", h, s)
			}
		})
	})
}

func TestLockedMachine(t *testing.T) {
	each(t, func(t *testing.T, e env) {
		ctx := sys()
		m := mustCreate(t, e, "machines", `{"Name":"lk1","Locked":true}`).(*backend.Machine)
		_, err := e.svc.Objects.Patch(ctx, "machines", m.Uuid, []byte(`[{"op":"replace","path":"/Description","value":"x"}]`), false)
		wantErr(t, err, backend.ECONFLICT, "patch", "Locked")
		_, err = e.params().SetParam(ctx, "machines", m.Uuid, "foo", 1)
		wantErr(t, err, backend.ECONFLICT, "action", "Locked")
		_, err = e.svc.Objects.Delete(ctx, "machines", m.Uuid)
		wantErr(t, err, backend.ECONFLICT, "delete", "Locked")
		got, err := e.svc.Objects.Patch(ctx, "machines", m.Uuid, []byte(`[{"op":"replace","path":"/Locked","value":false}]`), false)
		if err != nil || got.(*backend.Machine).Locked {
			t.Fatalf("unlock: %v %v", got, err)
		}
	})
}

func TestPut(t *testing.T) {
	each(t, func(t *testing.T, e env) {
		ctx := sys()
		m := mustCreate(t, e, "machines", `{"Name":"pm1"}`).(*backend.Machine)
		secret := rawRecord(t, e, "machines", m.Uuid)["Secret"]
		m.Description = "replaced"
		got, err := e.svc.Objects.Put(ctx, "machines", m.Uuid, []byte(toJSON(t, m)))
		if err != nil || got.(*backend.Machine).Description != "replaced" {
			t.Fatalf("got %v %v", got, err)
		}
		if rawRecord(t, e, "machines", m.Uuid)["Secret"] != secret {
			t.Fatal("Put without Secret changed it")
		}
		other := *m
		other.Uuid = "3e7031fe-3062-45f1-835c-92541bc9cbd3"
		_, err = e.svc.Objects.Put(ctx, "machines", m.Uuid, []byte(toJSON(t, &other)))
		wantErr(t, err, backend.EBADREQUEST, "replace", "Key change from "+m.Uuid+" to 3e7031fe-3062-45f1-835c-92541bc9cbd3 not allowed")
		_, err = e.svc.Objects.Put(ctx, "machines", "Name:nope", []byte(`{}`))
		wantErr(t, err, backend.ENOTFOUND, "replace", "Not Found")
		_, err = e.svc.Objects.Put(ctx, "machines", m.Uuid, []byte(`{"Name":1}`))
		wantErr(t, err, backend.EBADREQUEST, "replace", "Name")
	})
}

func TestWorkflowOnMachine(t *testing.T) {
	each(t, func(t *testing.T, e env) {
		ctx := sys()
		mustCreate(t, e, "tasks", `{"Name":"t1"}`)
		mustCreate(t, e, "bootenvs", `{"Name":"sledgehammer"}`)
		mustCreate(t, e, "stages", `{"Name":"s1","BootEnv":"sledgehammer","Tasks":["t1"]}`)
		mustCreate(t, e, "workflows", `{"Name":"w1","Stages":["s1"]}`)
		m := mustCreate(t, e, "machines", `{"Name":"wm1","Workflow":"w1"}`).(*backend.Machine)
		if toJSON(t, m.Tasks) != `["stage:s1","bootenv:sledgehammer","t1"]` || m.CurrentTask != -1 || m.WorkflowComplete {
			t.Fatalf("create: got %v %d %v", m.Tasks, m.CurrentTask, m.WorkflowComplete)
		}
		got, err := e.svc.Objects.Patch(ctx, "machines", m.Uuid, []byte(`[{"op":"replace","path":"/Workflow","value":""}]`), false)
		gm := got.(*backend.Machine)
		if err != nil || len(gm.Tasks) != 0 || !gm.WorkflowComplete {
			t.Fatalf("clear: got %v %v", gm, err)
		}
		got, _ = e.svc.Objects.Patch(ctx, "machines", m.Uuid, []byte(`[{"op":"replace","path":"/Workflow","value":"w1"}]`), false)
		if len(got.(*backend.Machine).Tasks) != 3 {
			t.Fatalf("set: got %v", got.(*backend.Machine).Tasks)
		}
	})
}

// TestMachineWithoutWorkflow: as in DRP (its api TestWaitFor), a machine
// made without a workflow has Stage "none" and a complete (empty) task list;
// removing a workflow returns it there, and setting one keeps the stage until
// the first job request rolls it over (docs/design.md §10.1).
func TestMachineWithoutWorkflow(t *testing.T) {
	each(t, func(t *testing.T, e env) {
		ctx := sys()
		mustCreate(t, e, "tasks", `{"Name":"t1"}`)
		mustCreate(t, e, "stages", `{"Name":"s1","Tasks":["t1"]}`)
		mustCreate(t, e, "workflows", `{"Name":"w1","Stages":["s1"]}`)
		m := mustCreate(t, e, "machines", drpcliMachine("nw1")).(*backend.Machine)
		if m.Stage != "none" || !m.WorkflowComplete || !m.Runnable || m.CurrentTask != 0 || len(m.Tasks) != 0 {
			t.Fatalf("create: got Stage %q WorkflowComplete %v Runnable %v CurrentTask %d Tasks %v",
				m.Stage, m.WorkflowComplete, m.Runnable, m.CurrentTask, m.Tasks)
		}
		raw := rawRecord(t, e, "machines", m.Uuid)
		if raw["Stage"] != "none" || raw["WorkflowComplete"] != true {
			t.Fatalf("stored: got Stage %v WorkflowComplete %v", raw["Stage"], raw["WorkflowComplete"])
		}
		if gm := machineOf(t, e, m.Uuid); gm.Stage != "none" || !gm.WorkflowComplete {
			t.Fatalf("get: got Stage %q WorkflowComplete %v", gm.Stage, gm.WorkflowComplete)
		}
		t.Run("given tasks are not complete", func(t *testing.T) {
			m := mustCreate(t, e, "machines", `{"Name":"nw2","Tasks":["t1"]}`).(*backend.Machine)
			if m.Stage != "none" || m.WorkflowComplete {
				t.Fatalf("got Stage %q WorkflowComplete %v", m.Stage, m.WorkflowComplete)
			}
		})
		t.Run("a given stage stays", func(t *testing.T) {
			m := mustCreate(t, e, "machines", `{"Name":"nw3","Stage":"s1"}`).(*backend.Machine)
			if m.Stage != "s1" || !m.WorkflowComplete {
				t.Fatalf("got Stage %q WorkflowComplete %v", m.Stage, m.WorkflowComplete)
			}
			got, err := e.svc.Objects.Patch(ctx, "machines", m.Uuid, []byte(`[{"op":"replace","path":"/Stage","value":""}]`), false)
			if err != nil || got.(*backend.Machine).Stage != "none" {
				t.Fatalf("clearing the stage: got %v %v", got, err)
			}
		})
		t.Run("a workflow set later", func(t *testing.T) {
			got, err := e.svc.Objects.Patch(ctx, "machines", m.Uuid, []byte(`[{"op":"test","path":"/Stage","value":"none"},{"op":"replace","path":"/Workflow","value":"w1"}]`), false)
			if err != nil {
				t.Fatal(err)
			}
			gm := got.(*backend.Machine)
			if gm.Stage != "none" || gm.WorkflowComplete || gm.CurrentTask != -1 || toJSON(t, gm.Tasks) != `["stage:s1","t1"]` {
				t.Fatalf("got Stage %q WorkflowComplete %v CurrentTask %d Tasks %v", gm.Stage, gm.WorkflowComplete, gm.CurrentTask, gm.Tasks)
			}
			st, _, err := e.svc.Jobs.CreateJob(ctx, []byte(`{"Machine":"`+m.Uuid+`","Context":""}`))
			if err != nil || st != backend.JobNone {
				t.Fatalf("first job request: got %d %v", st, err)
			}
			if gm := machineOf(t, e, m.Uuid); gm.Stage != "s1" || gm.WorkflowComplete || toJSON(t, gm.Params["change-stage/map"]) != `{"none":"s1"}` {
				t.Fatalf("rolled over: got Stage %q WorkflowComplete %v change-stage/map %v", gm.Stage, gm.WorkflowComplete, gm.Params["change-stage/map"])
			}
		})
		t.Run("a workflow removed", func(t *testing.T) {
			got, err := e.svc.Objects.Patch(ctx, "machines", m.Uuid, []byte(`[{"op":"replace","path":"/Workflow","value":""}]`), false)
			if err != nil {
				t.Fatal(err)
			}
			gm := got.(*backend.Machine)
			if gm.Stage != "none" || !gm.WorkflowComplete || gm.CurrentTask != -1 || len(gm.Tasks) != 0 {
				t.Fatalf("got Stage %q WorkflowComplete %v CurrentTask %d Tasks %v", gm.Stage, gm.WorkflowComplete, gm.CurrentTask, gm.Tasks)
			}
		})
		t.Run("a stored machine without a stage reads as none", func(t *testing.T) {
			key := "6e7031fe-3062-45f1-835c-92541bc9cbd3"
			if _, err := e.st.Create(ctx, "machines", key, []byte(`{"Name":"old1","Uuid":"`+key+`","Stage":"","Available":true,"Validated":true}`)); err != nil {
				t.Fatal(err)
			}
			if gm := machineOf(t, e, key); gm.Stage != "none" {
				t.Fatalf("got Stage %q", gm.Stage)
			}
		})
	})
}

func TestDelete(t *testing.T) {
	each(t, func(t *testing.T, e env) {
		ctx := sys()
		mustCreate(t, e, "roles", `{"Name":"ops"}`)
		mustCreate(t, e, "users", `{"Name":"rocketskates","Roles":["ops"]}`)
		mustCreate(t, e, "users", `{"Name":"bob"}`)
		mustCreate(t, e, "tenants", `{"Name":"t1","Users":["bob","rocketskates"]}`)
		mustCreate(t, e, "profiles", `{"Name":"pf"}`)
		mc := mustCreate(t, e, "machines", `{"Name":"dm1","Pool":"p1","Profiles":["pf"]}`).(*backend.Machine)
		mustCreate(t, e, "pools", `{"Id":"p1"}`)
		mustCreate(t, e, "profiles", `{"Name":"other"}`)
		mustCreate(t, e, "tenants", `{"Name":"t2","Members":{"profiles":["pf","other"],"machines":["`+mc.Uuid+`"]}}`)
		tests := []struct{ name, prefix, key, code, typ, msg string }{
			{"role in use", "roles", "ops", backend.ECONFLICT, "StillInUseError", "In use by User rocketskates"},
			{"tenant with users", "tenants", "t1", backend.ECONFLICT, "StillInUseError", "Constraining Users: [bob rocketskates]"},
			{"pool with machines", "pools", "p1", backend.ECONFLICT, "StillInUseError", "In use by Machine dm1"},
			{"profile in use", "profiles", "pf", backend.ECONFLICT, "StillInUseError", "In use by Machine dm1"},
			{"missing", "roles", "ghost", backend.ENOTFOUND, "delete", "Not Found"},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				_, err := e.svc.Objects.Delete(ctx, tc.prefix, tc.key)
				wantErr(t, err, tc.code, tc.typ, tc.msg)
			})
		}
		t.Run("machine removed from tenant members", func(t *testing.T) {
			got, err := e.svc.Objects.Delete(ctx, "machines", "Name:dm1")
			if err != nil || got.(*backend.Machine).Name != "dm1" || got.(*backend.Machine).Secret != "" {
				t.Fatalf("got %v %v", got, err)
			}
			tn, _, _ := e.svc.Objects.Get(ctx, "tenants", "t2")
			if toJSON(t, tn.(*backend.Tenant).Members) != `{"machines":[],"profiles":["pf","other"]}` {
				t.Fatalf("got %v", tn.(*backend.Tenant).Members)
			}
			if _, err := e.svc.Objects.Delete(ctx, "pools", "p1"); err != nil {
				t.Fatal(err)
			}
		})
		t.Run("user removed from tenant users", func(t *testing.T) {
			if _, err := e.svc.Objects.Delete(ctx, "users", "bob"); err != nil {
				t.Fatal(err)
			}
			tn, _, _ := e.svc.Objects.Get(ctx, "tenants", "t1")
			if toJSON(t, tn.(*backend.Tenant).Users) != `["rocketskates"]` {
				t.Fatalf("got %v", tn.(*backend.Tenant).Users)
			}
		})
	})
}

func TestTenantCreateMembership(t *testing.T) {
	each(t, func(t *testing.T, e env) {
		mustCreate(t, e, "tenants", `{"Name":"t3","Members":{"profiles":[]}}`)
		ctx := backend.WithTenant(sys(), "t3")
		if _, err := e.svc.Objects.Create(ctx, "profiles", []byte(`{"Name":"mine"}`)); err != nil {
			t.Fatal(err)
		}
		if _, err := e.svc.Objects.Create(ctx, "stages", []byte(`{"Name":"unrestricted"}`)); err != nil {
			t.Fatal(err)
		}
		tn, _, _ := e.svc.Objects.Get(ctx, "tenants", "t3")
		if toJSON(t, tn.(*backend.Tenant).Members) != `{"profiles":["mine"]}` {
			t.Fatalf("got %v", tn.(*backend.Tenant).Members)
		}
	})
}

func TestConcurrentPatchesRetry(t *testing.T) {
	each(t, func(t *testing.T, e env) {
		ctx := sys()
		mustCreate(t, e, "profiles", `{"Name":"busy"}`)
		const n = 6
		errs := make(chan error, n)
		for i := 0; i < n; i++ {
			go func(i int) {
				_, err := e.params().SetParam(ctx, "profiles", "busy", "k"+string(rune('a'+i)), i)
				errs <- err
			}(i)
		}
		failed := 0
		for i := 0; i < n; i++ {
			if err := <-errs; err != nil {
				failed++
				t.Logf("concurrent write: %v", err)
			}
		}
		params, err := e.params().Params(ctx, "profiles", "busy", false, false)
		if err != nil || len(params)+failed != n || failed > 0 {
			t.Fatalf("got %d params, %d failures (%v)", len(params), failed, err)
		}
	}, func(o *Options) { o.MaxRetries = 20 })
}

// TestPatchWholeDocumentTest: drpcli's -r/--ref update sends one test of the
// whole document against the reference object decoded into DRP's model,
// which always carries "Secret":"". That test passes on an unchanged user
// or machine and keeps the stored Secret; a stale reference still fails,
// and the Secret itself stays untestable.
func TestPatchWholeDocumentTest(t *testing.T) {
	each(t, func(t *testing.T, e env) {
		ctx := sys()
		mustCreate(t, e, "users", `{"Name":"sam","Password":"pw"}`)
		m := mustCreate(t, e, "machines", drpcliMachine("pm1")).(*backend.Machine)
		for _, c := range []struct{ prefix, key string }{{"users", "sam"}, {"machines", m.Uuid}} {
			t.Run(c.prefix, func(t *testing.T) {
				secret := rawRecord(t, e, c.prefix, c.key)["Secret"]
				cur, _, err := e.svc.Objects.Get(ctx, c.prefix, c.key)
				if err != nil {
					t.Fatal(err)
				}
				var ref map[string]any
				if err := json.Unmarshal([]byte(toJSON(t, cur)), &ref); err != nil {
					t.Fatal(err)
				}
				ref["Secret"] = ""
				patch := func(ref map[string]any, desc string) error {
					_, err := e.svc.Objects.Patch(ctx, c.prefix, c.key, []byte(toJSON(t, []map[string]any{
						{"op": "test", "path": "", "from": "", "value": ref},
						{"op": "replace", "path": "/Description", "from": "", "value": desc},
					})), false)
					return err
				}
				if err := patch(ref, "paranoid"); err != nil {
					t.Fatalf("whole-document test with the reference: %v", err)
				}
				raw := rawRecord(t, e, c.prefix, c.key)
				if raw["Description"] != "paranoid" || raw["Secret"] != secret {
					t.Fatalf("after patch: Description %v, Secret kept %v", raw["Description"], raw["Secret"] == secret)
				}
				// The reference is now stale (Description changed).
				wantErr(t, patch(ref, "again"), backend.ECONFLICT, "patch", "Test op failed")
				// The stored Secret is not what the test compares against.
				ref["Description"], ref["Secret"] = "paranoid", secret
				wantErr(t, patch(ref, "again"), backend.ECONFLICT, "patch", "Test op failed")
			})
		}
	})
}

// TestBootEnvDRPShape: a bootenv reads with every member of DRP's BootEnv
// and OsInfo (blank when unset, given values kept), so drpcli's -r/--ref
// whole-document test, made from DRP's model, matches it.
func TestBootEnvDRPShape(t *testing.T) {
	each(t, func(t *testing.T, e env) {
		ctx := sys()
		mustCreate(t, e, "bootenvs", `{"Name":"be1","OS":{"Name":"centos-8","Extra":"kept"}}`)
		got, _, err := e.svc.Objects.Get(ctx, "bootenvs", "be1")
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(toJSON(t, got)), &m); err != nil {
			t.Fatal(err)
		}
		want := map[string]any{"Name": "centos-8", "Extra": "kept", "Family": "", "Codename": "", "Version": "",
			"IsoFile": "", "IsoSha256": "", "IsoUrl": "", "SupportedArchitectures": map[string]any{}}
		if toJSON(t, m["OS"]) != toJSON(t, want) || toJSON(t, m["Loaders"]) != "{}" {
			t.Fatalf("OS %v Loaders %v", m["OS"], m["Loaders"])
		}
		patch := toJSON(t, []map[string]any{
			{"op": "test", "path": "", "from": "", "value": m},
			{"op": "replace", "path": "/Description", "from": "", "value": "paranoid"},
		})
		if _, err := e.svc.Objects.Patch(ctx, "bootenvs", "be1", []byte(patch), false); err != nil {
			t.Fatalf("whole-document test: %v", err)
		}
	})
}
