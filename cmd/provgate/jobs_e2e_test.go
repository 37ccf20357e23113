package main

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// End-to-end tests of workflows and jobs (docs/design.md §10): task list
// expansion, job creation outcomes, state effects and logs, on SQLite and
// PostgreSQL. TestE2EObjects (objects_e2e_test.go) runs them.

// obJobBody is drpcli's "machines jobs create" body: a full zero Job.
func obJobBody(machine string) string {
	return `{` + drpEnv + `,"Uuid":"","Previous":"","Machine":"` + machine + `","Task":"","Stage":"","Context":"",` +
		`"State":"","ExitState":"","StartTime":"0001-01-01T00:00:00Z","EndTime":"0001-01-01T00:00:00Z","Archived":false,` +
		`"Current":false,"CurrentIndex":0,"NextIndex":0,"Workflow":"","BootEnv":""}`
}

func testWorkflowJobs(t *testing.T, s *tserver) {
	obMust(t, s, 201, "POST", "/bootenvs", `{"Name":"wj-benv"}`)
	obMust(t, s, 201, "POST", "/tasks", `{"Name":"wj-t1"}`)
	obMust(t, s, 201, "POST", "/tasks", `{"Name":"wj-t2"}`)
	obMust(t, s, 201, "POST", "/stages", `{"Name":"wj-s1","BootEnv":"wj-benv","Tasks":["wj-t1","wj-t2"]}`)
	obMust(t, s, 201, "POST", "/stages", `{"Name":"wj-s2","Tasks":["wj-t1"]}`)
	obMust(t, s, 201, "POST", "/workflows", `{"Name":"wj-wf","Stages":["wj-s1","wj-s2"]}`)
	m := obObj(t, obMust(t, s, 201, "POST", "/machines", obMachineBody("wj1")))
	id := m["Uuid"].(string)
	mp := "/machines/" + id
	// Without a workflow there is nothing to run (DRP: Stage "none").
	if m["Stage"] != "none" || m["WorkflowComplete"] != true {
		t.Errorf("created: Stage %v WorkflowComplete %v", m["Stage"], m["WorkflowComplete"])
	}
	wantTasks := []any{"stage:wj-s1", "bootenv:wj-benv", "wj-t1", "wj-t2", "stage:wj-s2", "wj-t1"}
	t.Run("set-workflow", func(t *testing.T) {
		r := obMust(t, s, 200, "PATCH", mp, `[{"op":"test","path":"/Workflow","from":"","value":""},{"op":"replace","path":"/Workflow","from":"","value":"wj-wf"}]`)
		m = obObj(t, r)
		if !reflect.DeepEqual(m["Tasks"], wantTasks) {
			t.Errorf("Tasks %v, want %v", m["Tasks"], wantTasks)
		}
		if m["CurrentTask"] != -1.0 || m["WorkflowComplete"] != false {
			t.Errorf("CurrentTask %v WorkflowComplete %v", m["CurrentTask"], m["WorkflowComplete"])
		}
		// The stage changes when the first job request rolls "stage:" over.
		if m["Stage"] != "none" {
			t.Errorf("Stage %v, want none", m["Stage"])
		}
	})
	// nextJob posts jobs until one is made (201) or nothing is left (204).
	nextJob := func(t *testing.T) (int, map[string]any) {
		t.Helper()
		for i := 0; i < 6; i++ {
			r := obCall(t, s, "POST", "/jobs", obJobBody(id))
			switch r.Status {
			case 201, 202:
				return r.Status, obObj(t, r)
			case 204:
				if len(r.Body) != 0 {
					t.Errorf("204 with body %q", r.Body)
				}
				mm := obObj(t, obMust(t, s, 200, "GET", mp, nil))
				if ct, _ := mm["CurrentTask"].(float64); int(ct) >= len(wantTasks) {
					return 204, nil
				}
			default:
				t.Fatalf("POST /jobs: %d %s", r.Status, r.Body)
			}
		}
		t.Fatal("no job after 6 tries")
		return 0, nil
	}
	patchState := func(t *testing.T, j, from, to string) map[string]any {
		t.Helper()
		return obObj(t, obMust(t, s, 200, "PATCH", "/jobs/"+j,
			fmt.Sprintf(`[{"op":"test","path":"/State","value":%q},{"op":"replace","path":"/State","value":%q}]`, from, to)))
	}
	var job map[string]any
	t.Run("create-201", func(t *testing.T) {
		st, j := nextJob(t)
		if st != 201 || j["State"] != "created" || j["Task"] != "wj-t1" || j["Machine"] != id {
			t.Fatalf("job %d %v", st, j)
		}
		job = j
		if mm := obObj(t, obMust(t, s, 200, "GET", mp, nil)); mm["CurrentJob"] != j["Uuid"] || mm["Stage"] != "wj-s1" || mm["BootEnv"] != "wj-benv" {
			t.Errorf("machine CurrentJob %v Stage %v BootEnv %v", mm["CurrentJob"], mm["Stage"], mm["BootEnv"])
		}
	})
	if job == nil {
		t.FailNow()
	}
	jid := job["Uuid"].(string)
	t.Run("conflict-409", func(t *testing.T) {
		wantDRPError(t, obCall(t, s, "POST", "/jobs", obJobBody(id)), 409, "Conflict", "already has running or created job")
	})
	t.Run("missing-machine-422", func(t *testing.T) {
		u := "0b3a1c7e-1111-4222-8333-444455556666"
		wantDRPError(t, obCall(t, s, "POST", "/jobs", obJobBody(u)), 422, "ValidationError", "Machine "+u+" does not exist")
	})
	t.Run("no-machine-400", func(t *testing.T) {
		wantDRPError(t, obCall(t, s, "POST", "/jobs", `{"Uuid":""}`), 400, "", "Machine")
	})
	t.Run("log", func(t *testing.T) {
		r := obCall(t, s, "PUT", "/jobs/"+jid+"/log", "line\n")
		wantDRPError(t, r, 415, "PUT", "content type").about(t, "jobs", "*")
		r = obCall(t, s, "PUT", "/jobs/"+jid+"/log", "hello\n", "Content-Type", "application/octet-stream")
		if r.Status != 204 || len(r.Body) != 0 {
			t.Fatalf("PUT log: %d %q", r.Status, r.Body)
		}
		obMust(t, s, 204, "PUT", "/jobs/"+jid+"/log", "world\n", "Content-Type", "application/octet-stream")
		g := obRawCall(t, s, s.Base+"/jobs/"+jid+"/log", "GET", nil, "Accept", "application/octet-stream")
		if g.Status != 200 || string(g.Body) != "hello\nworld\n" {
			t.Errorf("GET log %d %q", g.Status, g.Body)
		}
		if ct := g.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/octet-stream") {
			t.Errorf("log Content-Type %q", ct)
		}
		wantDRPError(t, obCall(t, s, "GET", "/jobs/0b3a1c7e-1111-4222-8333-444455556666/log", nil), 404, "", "Not Found").about(t, "jobs", "*")
	})
	t.Run("delete-created-422", func(t *testing.T) {
		wantDRPError(t, obCall(t, s, "DELETE", "/jobs/"+jid, nil), 422, "ValidationError", "is not in a deletable state: created").about(t, "jobs", jid)
	})
	t.Run("fail-makes-not-runnable", func(t *testing.T) {
		patchState(t, jid, "created", "running")
		wantDRPError(t, obCall(t, s, "PATCH", "/jobs/"+jid, `[{"op":"test","path":"/State","value":"created"},{"op":"replace","path":"/State","value":"running"}]`),
			409, "PATCH", "").about(t,
			"jobs", jid)

		j := obObj(t, obMust(t, s, 200, "PATCH", "/jobs/"+jid,
			`[{"op":"test","path":"/State","value":"running"},{"op":"replace","path":"/State","value":"failed"},{"op":"replace","path":"/ExitState","value":"failed"}]`))
		if j["State"] != "failed" {
			t.Errorf("job %v", j)
		}
		if mm := obObj(t, obMust(t, s, 200, "GET", mp, nil)); mm["Runnable"] != false {
			t.Errorf("machine Runnable %v after failed job", mm["Runnable"])
		}
		wantDRPError(t, obCall(t, s, "POST", "/jobs", obJobBody(id)), 409, "Conflict", "is not runnable")
		wantDRPError(t, obCall(t, s, "PATCH", "/jobs/"+jid, `[{"op":"replace","path":"/ExitState","value":"fred"}]`), 422, "ValidationError", "fred").about(t, "jobs", jid)
	})
	t.Run("retry-incomplete-finish", func(t *testing.T) {
		obMust(t, s, 200, "PATCH", mp, `[{"op":"test","path":"/Runnable","from":"","value":false},{"op":"replace","path":"/Runnable","from":"","value":true}]`)
		st, j := nextJob(t)
		if st != 201 || j["Task"] != "wj-t1" || j["Uuid"] == jid {
			t.Fatalf("retry job %d %v", st, j)
		}
		j2 := j["Uuid"].(string)
		patchState(t, j2, "created", "running")
		patchState(t, j2, "running", "incomplete")
		st, j = nextJob(t)
		// The agent re-runs it from created, as it does a new job (§8.4).
		if st != 202 || j["Uuid"] != j2 || j["State"] != "created" {
			t.Fatalf("incomplete job: %d %v, want 202 with %s created", st, j, j2)
		}
		patchState(t, j2, "created", "running")
		patchState(t, j2, "running", "finished")
		tasks := []string{"wj-t2", "wj-t1"}
		for _, want := range tasks {
			st, j = nextJob(t)
			if st != 201 || j["Task"] != want {
				t.Fatalf("next job %d %v, want task %s", st, j, want)
			}
			patchState(t, j["Uuid"].(string), "created", "running")
			patchState(t, j["Uuid"].(string), "running", "finished")
		}
		st, _ = nextJob(t)
		if st != 204 {
			t.Fatalf("after last task: %d, want 204", st)
		}
		mm := obObj(t, obMust(t, s, 200, "GET", mp, nil))
		if mm["WorkflowComplete"] != true || mm["Stage"] != "wj-s2" {
			t.Errorf("WorkflowComplete %v Stage %v", mm["WorkflowComplete"], mm["Stage"])
		}
		r := obCall(t, s, "POST", "/jobs", obJobBody(id))
		if r.Status != 204 || len(r.Body) != 0 {
			t.Errorf("nothing to do: %d %q", r.Status, r.Body)
		}
		d := obObj(t, obMust(t, s, 200, "DELETE", "/jobs/"+j2, nil))
		if d["Uuid"] != j2 {
			t.Errorf("deleted job %v", d)
		}
		l := obList(t, obMust(t, s, 200, "GET", "/jobs?Machine="+id+"&sort=StartTime&reverse=true", nil))
		if len(l) < 3 {
			t.Errorf("jobs of machine: %d", len(l))
		}
		obMust(t, s, 200, "HEAD", "/jobs?State=finished", nil)
	})
	t.Run("remove-workflow", func(t *testing.T) {
		mm := obObj(t, obMust(t, s, 200, "PATCH", mp, `[{"op":"replace","path":"/Workflow","value":""}]`))
		if mm["Stage"] != "none" || mm["WorkflowComplete"] != true || mm["CurrentTask"] != -1.0 || len(mm["Tasks"].([]any)) != 0 {
			t.Errorf("Stage %v WorkflowComplete %v CurrentTask %v Tasks %v", mm["Stage"], mm["WorkflowComplete"], mm["CurrentTask"], mm["Tasks"])
		}
		if r := obCall(t, s, "POST", "/jobs", obJobBody(id)); r.Status != 204 {
			t.Errorf("nothing to do: %d %q", r.Status, r.Body)
		}
	})
}

// testDRPWaitForMachine: the machine of DRP v4.8's api TestWaitFor, created
// with no workflow, comes back with Stage "none" and WorkflowComplete true,
// which "drpcli machines wait <uuid> WorkflowComplete true" then sees at
// once; list filters find it under Stage none.
func testDRPWaitForMachine(t *testing.T, s *tserver) {
	const id = "3e7031fe-3062-45f1-835c-92541bc9cbd3"
	body := `{"Address":"192.168.100.110","BootEnv":"local","Meta":{"feature-flags":"change-stage-v2"},"Name":"john","Uuid":"` + id + `","Validated":true}`
	for _, m := range []map[string]any{
		obObj(t, obMust(t, s, 201, "POST", "/machines", body)),
		obObj(t, obMust(t, s, 200, "GET", "/machines/"+id, nil)),
	} {
		want := map[string]any{"Name": "john", "Uuid": id, "Address": "192.168.100.110", "BootEnv": "local",
			"Stage": "none", "WorkflowComplete": true, "Runnable": true, "CurrentTask": 0.0, "Workflow": "",
			"Pool": "default", "PoolStatus": "Free", "Validated": true, "Available": true}
		for k, v := range want {
			if !reflect.DeepEqual(m[k], v) {
				t.Errorf("%s = %#v, want %#v", k, m[k], v)
			}
		}
		if _, ok := m["Secret"]; ok {
			t.Errorf("Secret returned: %v", m["Secret"])
		}
	}
	l := obList(t, obMust(t, s, 200, "GET", "/machines?Stage=none&Name=john", nil))
	if len(l) != 1 || l[0]["Uuid"] != id {
		t.Errorf("machines?Stage=none: %v", l)
	}
	obMust(t, s, 200, "DELETE", "/machines/"+id, nil)
}
