package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// poolResult is the wire shape of one PoolResult (docs/design.md §11.1).
type poolResult struct {
	Name      string
	Uuid      string
	Allocated bool
	Status    string
}

// e2eMachine is the part of a machine the pool and callback tests look at.
type e2eMachine struct {
	Name             string
	Uuid             string
	Pool             string
	PoolStatus       string
	PoolAllocated    bool
	Workflow         string
	WorkflowComplete bool
	Runnable         bool
	Profiles         []string
	Params           map[string]any
	Tasks            []string
	CurrentJob       string
}

func getMachine(t testing.TB, s *tserver, key string) e2eMachine {
	t.Helper()
	var m e2eMachine
	s.Must(200, "GET", "/machines/"+key, nil, admin()).JSON(t, &m)
	return m
}

// mkWorkflow creates tasks, one stage holding them and a workflow of that
// stage; the machine's task list is then stage:<wf>-stage, tasks....
func mkWorkflow(t testing.TB, s *tserver, wf string, tasks ...string) {
	t.Helper()
	for _, task := range tasks {
		if r := s.Do("GET", "/tasks/"+task, nil, admin()); r.Status == 404 {
			s.Must(201, "POST", "/tasks", map[string]any{"Name": task}, admin())
		}
	}
	s.Must(201, "POST", "/stages", map[string]any{"Name": wf + "-stage", "Tasks": tasks}, admin())
	s.Must(201, "POST", "/workflows", map[string]any{"Name": wf, "Stages": []string{wf + "-stage"}}, admin())
}

func mkProfile(t testing.TB, s *tserver, name string) {
	t.Helper()
	s.Must(201, "POST", "/profiles", map[string]any{"Name": name}, admin())
}

// nextJob asks for the machine's next job as its agent would: the job, or
// nil when nothing is left to run.
func nextJob(t testing.TB, s *tserver, uuid string) map[string]any {
	t.Helper()
	r := s.Do("POST", "/jobs", map[string]any{"Machine": uuid}, admin())
	switch r.Status {
	case 201, 202:
		return r.Map(t)
	case 204:
		return nil
	}
	t.Fatalf("POST /jobs for %s: %s", uuid, r)
	return nil
}

// nextTaskJob asks until the server hands out a job for a task (stage
// changes answer 204 first).
func nextTaskJob(t testing.TB, s *tserver, uuid string) map[string]any {
	t.Helper()
	for i := 0; i < 10; i++ {
		if j := nextJob(t, s, uuid); j != nil {
			return j
		}
	}
	t.Fatalf("no job for %s", uuid)
	return nil
}

func setJobState(t testing.TB, s *tserver, job, state string) {
	t.Helper()
	s.Must(200, "PATCH", "/jobs/"+job, []map[string]any{{"op": "replace", "path": "/State", "value": state}}, admin())
}

// runWorkflow plays the agent: every job of the machine's task list runs
// and finishes, until the workflow is complete. A 204 only means "nothing
// now" (a stage change, for one); the agent asks again.
func runWorkflow(t testing.TB, s *tserver, uuid string) {
	t.Helper()
	for i := 0; i < 50; i++ {
		j := nextJob(t, s, uuid)
		if j == nil {
			if getMachine(t, s, uuid).WorkflowComplete {
				return
			}
			continue
		}
		setJobState(t, s, j["Uuid"].(string), "running")
		setJobState(t, s, j["Uuid"].(string), "finished")
	}
	t.Fatalf("workflow of %s did not end after 50 jobs", uuid)
}

// poolOp posts a manage body and decodes the []PoolResult reply.
func poolOp(t testing.TB, s *tserver, authz, path string, body any) []poolResult {
	t.Helper()
	var pr []poolResult
	s.Must(200, "POST", path, body, authz).JSON(t, &pr)
	return pr
}

// drpcliBody is a manage body as drpcli always sends it (docs/design.md §11.1).
func drpcliBody(count, minimum int, wait, workflow string, extra map[string]any) map[string]any {
	b := map[string]any{"pool/all-machines": false, "pool/count": count, "pool/minimum": minimum,
		"pool/wait-timeout": wait, "pool/workflow": workflow}
	for k, v := range extra {
		b[k] = v
	}
	return b
}

func wantAll(t testing.TB, what string, pr []poolResult, n int, status string, allocated bool) {
	t.Helper()
	if len(pr) != n {
		t.Fatalf("%s: got %d results %v, want %d", what, len(pr), pr, n)
	}
	for _, r := range pr {
		if r.Status != status || r.Allocated != allocated || r.Uuid == "" || r.Name == "" {
			t.Fatalf("%s: got %+v, want Status %s Allocated %v with Name and Uuid", what, r, status, allocated)
		}
	}
}

// TestE2EPools drives pool operations over HTTP with drpcli's and
// Terraform's exact bodies (docs/design.md §11).
func TestE2EPools(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, s *tserver) {
		mkProfile(t, s, "alpha")
		mkProfile(t, s, "beta")
		mkProfile(t, s, "gamma")
		mkWorkflow(t, s, "wf2", "t-a")
		mkWorkflow(t, s, "wf-enter", "t-e1", "t-e2")
		mkWorkflow(t, s, "wf-alloc", "t-b1")
		mkWorkflow(t, s, "wf-release", "t-r1")

		t.Run("drpcli_bodies", func(t *testing.T) {
			s := s.On(t)
			s.Must(201, "POST", "/pools", map[string]any{"Id": "d1", "ParentPool": "d-src"}, admin())
			uuids := map[string]string{}
			for i := 1; i <= 8; i++ {
				n := fmt.Sprintf("dm%d", i)
				uuids[n] = s.On(t).AddMachine(n, map[string]any{"Pool": "d-src", "Profiles": []string{"gamma"},
					"Params": map[string]any{"p": 1, "q": 2, "keep": true}})

			}
			// drpcli pools manage add d1: the source is d1's ParentPool.
			pr := poolOp(t, s, admin(), "/pools/d1/addMachines", drpcliBody(1, 1, "", "", nil))
			wantAll(t, "add", pr, 1, "Free", false)
			if m := getMachine(t, s, pr[0].Uuid); m.Pool != "d1" {
				t.Fatalf("added machine is in pool %q", m.Pool)
			}
			// --source-pool --count 2 --minimum 1 --wait-timeout 30s
			pr = poolOp(t, s, admin(), "/pools/d1/addMachines?source-pool=d-src", drpcliBody(2, 1, "30s", "", nil))
			wantAll(t, "add source-pool", pr, 2, "Free", false)
			// allocate --count 3 --force
			pr = poolOp(t, s, admin(), "/pools/d1/allocateMachines?force=true", drpcliBody(3, 3, "", "", nil))
			wantAll(t, "allocate", pr, 3, "InUse", true)
			// release --machine-list Name:x --wait-timeout 5m
			rel := pr[0].Name
			pr = poolOp(t, s, admin(), "/pools/d1/releaseMachines",
				drpcliBody(0, 0, "5m", "", map[string]any{"pool/machine-list": []string{"Name:" + rel}}))
			wantAll(t, "release", pr, 1, "Free", false)
			if pr[0].Name != rel {
				t.Fatalf("released %s, want %s", pr[0].Name, rel)
			}
			// remove --machine-list 'Name:x,<uuid>': back to the parent pool.
			pr = poolOp(t, s, admin(), "/pools/d1/releaseMachines",
				drpcliBody(0, 0, "", "", map[string]any{"pool/machine-list": []string{"Name:" + pr0(t, s, "d1", "InUse")}}))
			wantAll(t, "release 2", pr, 1, "Free", false)
			remA, remB := pr[0].Name, rel
			pr = poolOp(t, s, admin(), "/pools/d1/removeMachines",
				drpcliBody(0, 0, "", "", map[string]any{"pool/machine-list": []string{"Name:" + remA, uuids[remB]}}))
			wantAll(t, "remove", pr, 2, "Free", false)
			for _, r := range pr {
				if m := getMachine(t, s, r.Uuid); m.Pool != "d-src" || m.PoolAllocated {
					t.Fatalf("removed machine %s: pool %q allocated %v", r.Name, m.Pool, m.PoolAllocated)
				}
			}
			// add --all-machines --new-workflow wf2 --add-profiles 'a, b'
			// --remove-profiles c --add-parameters --remove-parameters p,q
			// 'Runnable=Eq(true)' Arch=amd64
			body := `{"pool/add-parameters":{"x":1,"y":"z"},"pool/add-profiles":["alpha","beta"],"pool/all-machines":true,"pool/count":0,
 "pool/filter":["Runnable=Eq(true)","Arch=amd64"],"pool/minimum":0,"pool/remove-parameters":["p","q"],
 "pool/remove-profiles":["gamma"],"pool/wait-timeout":"","pool/workflow":"wf2"}`
			pr = poolOp(t, s, admin(), "/pools/d1/addMachines", body)
			wantAll(t, "add all-machines", pr, 7, "Joining", false)
			m := getMachine(t, s, pr[0].Uuid)
			if m.Pool != "d1" || m.Workflow != "wf2" || len(m.Tasks) == 0 || m.WorkflowComplete {
				t.Fatalf("add all-machines machine: %+v", m)
			}
			if strings.Join(m.Profiles, ",") != "alpha,beta" {
				t.Fatalf("profiles %v, want [alpha beta]", m.Profiles)
			}
			if m.Params["x"] != float64(1) || m.Params["y"] != "z" || m.Params["keep"] != true {
				t.Fatalf("params %v: want x=1 y=z keep=true", m.Params)
			}
			if _, ok := m.Params["p"]; ok {
				t.Fatalf("param p not removed: %v", m.Params)
			}
			// The workflow completes through jobs: Joining → Free.
			for _, r := range pr {
				runWorkflow(t, s, r.Uuid)
			}
			var st map[string][]poolResult
			s.Must(200, "GET", "/pools/d1/status", nil, admin()).JSON(t, &st)
			if len(st) != 2 || len(st["Free"]) != 7 || len(st["InUse"]) != 1 {
				t.Fatalf("status after the workflows: %v", st)
			}

			// machines releaseToPool <id> with {}.
			pr = poolOp(t, s, admin(), "/pools/d1/allocateMachines", drpcliBody(1, 1, "", "", nil))
			wantAll(t, "allocate one", pr, 1, "InUse", true)
			var rtp []poolResult
			s.Must(200, "POST", "/machines/"+pr[0].Uuid+"/releaseToPool", "{}", admin()).JSON(t, &rtp)
			wantAll(t, "releaseToPool", rtp, 1, "Free", false)
			if rtp[0].Uuid != pr[0].Uuid {
				t.Fatalf("releaseToPool released %v", rtp)
			}
		})

		t.Run("terraform", func(t *testing.T) {
			s := s.On(t)
			s.Must(201, "POST", "/pools", map[string]any{"Id": "tf"}, admin())
			for i := 0; i < 3; i++ {
				s.On(t).AddMachine(fmt.Sprintf("tfm%d", i), map[string]any{"Pool": "tf"})
			}
			pr := poolOp(t, s, admin(), "/pools/tf/allocateMachines", map[string]any{"pool/wait-timeout": "5m"})
			wantAll(t, "terraform allocate", pr, 1, "InUse", true)
			if !strings.HasPrefix(pr[0].Name, "tfm") {
				t.Fatalf("pr[0] = %+v", pr[0])
			}
			pr = poolOp(t, s, admin(), "/pools/tf/releaseMachines", map[string]any{"pool/wait-timeout": "5m",
				"pool/machine-list": []string{pr[0].Uuid}, "pool/remove-profiles": []string{}, "pool/remove-parameters": []string{}})
			if len(pr) != 1 || pr[0].Status != "Free" {
				t.Fatalf("terraform release: %v, want pr[0].Status Free", pr)
			}
		})

		t.Run("active_and_status", func(t *testing.T) {
			s := s.On(t)
			s.On(t).AddMachine("implicit-1", map[string]any{"Pool": "implicit-pool"})
			s.On(t).AddMachine("in-default", nil)
			var active []string
			s.Must(200, "GET", "/pools-active", nil, admin()).JSON(t, &active)
			for _, want := range []string{"default", "d1", "implicit-pool", "tf"} {
				if !slices.Contains(active, want) {
					t.Fatalf("pools-active %v lacks %s", active, want)
				}
			}
			if !sort.StringsAreSorted(active) {
				t.Fatalf("pools-active not sorted: %v", active)
			}
			var st map[string][]poolResult
			s.Must(200, "GET", "/pools/implicit-pool/status", nil, admin()).JSON(t, &st)
			if len(st["Free"]) != 1 || st["Free"][0].Name != "implicit-1" {
				t.Fatalf("implicit pool status: %v", st)
			}
			s.Must(404, "GET", "/pools/implicit-pool", nil, admin())
			wantDRPError(t, s.Do("GET", "/pools/no-such-pool/status", nil, admin()), 404, "", "")
			// A pool object without machines has an empty status.
			s.Must(201, "POST", "/pools", map[string]any{"Id": "empty"}, admin())
			if r := s.Must(200, "GET", "/pools/empty/status", nil, admin()); strings.TrimSpace(string(r.Body)) != "{}" {
				t.Fatalf("empty pool status %s", r.Body)
			}
		})

		t.Run("pool_object_crud", func(t *testing.T) {
			s := s.On(t)
			var p map[string]any
			s.Must(201, "POST", "/pools", map[string]any{"Id": "crud", "Description": "one",
				"EnterActions": map[string]any{"AddProfiles": []string{"alpha"}}}, admin()).JSON(t, &p)
			if p["Id"] != "crud" || p["Description"] != "one" {
				t.Fatalf("created %v", p)
			}
			s.Must(409, "POST", "/pools", map[string]any{"Id": "crud"}, admin())
			r := s.Must(200, "PATCH", "/pools/crud", `[{"op":"replace","path":"/Description","value":"two"}]`, admin())
			if r.Map(t)["Description"] != "two" {
				t.Fatalf("patched %s", r.Body)
			}
			r = s.Must(200, "PUT", "/pools/crud", map[string]any{"Id": "crud", "Description": "three"}, admin())
			if m := r.Map(t); m["Description"] != "three" || m["EnterActions"] != nil {
				t.Fatalf("put %s", r.Body)
			}
			var list []map[string]any
			s.Must(200, "GET", "/pools", nil, admin()).JSON(t, &list)
			found := false
			for _, x := range list {
				found = found || x["Id"] == "crud"
			}
			if !found {
				t.Fatalf("pool list lacks crud: %v", list)
			}
			u := s.On(t).AddMachine("crud-m", map[string]any{"Pool": "crud"})
			wantDRPError(t, s.Do("DELETE", "/pools/crud", nil, admin()), 409, "", "")
			pr := poolOp(t, s, admin(), "/pools/crud/removeMachines", drpcliBody(0, 0, "", "",
				map[string]any{"pool/machine-list": []string{u}}))
			wantAll(t, "remove crud", pr, 1, "Free", false)
			s.Must(200, "DELETE", "/pools/crud", nil, admin())
			s.Must(404, "GET", "/pools/crud", nil, admin())
		})

		t.Run("action_groups_and_statuses", func(t *testing.T) {
			s := s.On(t)
			mkProfile(t, s, "pa")
			s.Must(201, "POST", "/pools", map[string]any{"Id": "ag",
				"EnterActions":    map[string]any{"Workflow": "wf-enter", "AddProfiles": []string{"pa"}, "AddParameters": map[string]any{"kk": 1}},
				"AllocateActions": map[string]any{"Workflow": "wf-alloc", "AddParameters": map[string]any{"owner": "me"}},
				"ReleaseActions":  map[string]any{"Workflow": "wf-release", "RemoveProfiles": []string{"pa"}, "RemoveParameters": []string{"owner"}},
			}, admin())
			u1 := s.On(t).AddMachine("ag1", nil)
			u2 := s.On(t).AddMachine("ag2", nil)
			pr := poolOp(t, s, admin(), "/pools/ag/addMachines", drpcliBody(0, 0, "", "",
				map[string]any{"pool/machine-list": []string{u1, u2}}))
			wantAll(t, "enter", pr, 2, "Joining", false)
			m := getMachine(t, s, u1)
			if m.Workflow != "wf-enter" || !slices.Contains(m.Profiles, "pa") || m.Params["kk"] != float64(1) {
				t.Fatalf("enter actions not applied: %+v", m)
			}
			wantTasks := []string{"stage:wf-enter-stage", "t-e1", "t-e2"}
			if strings.Join(m.Tasks, ",") != strings.Join(wantTasks, ",") {
				t.Fatalf("tasks %v, want %v", m.Tasks, wantTasks)
			}
			// A Joining machine cannot be allocated yet.
			wantDRPError(t, s.Do("POST", "/pools/ag/allocateMachines", drpcliBody(2, 2, "", "", nil), admin()), 409, "", "")
			// ag1 finishes its enter workflow: Free.
			runWorkflow(t, s, u1)
			if m := getMachine(t, s, u1); m.PoolStatus != "Free" || !m.WorkflowComplete {
				t.Fatalf("after the enter workflow: %+v", m)
			}
			// ag2's job fails: HoldJoin and not runnable.
			j := nextTaskJob(t, s, u2)
			setJobState(t, s, j["Uuid"].(string), "running")
			setJobState(t, s, j["Uuid"].(string), "failed")
			if m := getMachine(t, s, u2); m.PoolStatus != "HoldJoin" || m.Runnable {
				t.Fatalf("after a failed enter job: %+v", m)
			}
			// Allocate ag1: Building with the allocate workflow, then InUse.
			pr = poolOp(t, s, admin(), "/pools/ag/allocateMachines", drpcliBody(1, 1, "", "", nil))
			wantAll(t, "allocate", pr, 1, "Building", true)
			if m := getMachine(t, s, u1); m.Workflow != "wf-alloc" || m.Params["owner"] != "me" {
				t.Fatalf("allocate actions not applied: %+v", m)
			}
			runWorkflow(t, s, u1)
			var st map[string][]poolResult
			s.Must(200, "GET", "/pools/ag/status", nil, admin()).JSON(t, &st)
			if len(st["InUse"]) != 1 || st["InUse"][0].Uuid != u1 || len(st["HoldJoin"]) != 1 || st["HoldJoin"][0].Uuid != u2 {
				t.Fatalf("status %v", st)
			}
			// Release: Destroying, profiles and params of the release group.
			pr = poolOp(t, s, admin(), "/pools/ag/releaseMachines", drpcliBody(1, 1, "", "", nil))
			wantAll(t, "release", pr, 1, "Destroying", false)
			if m := getMachine(t, s, u1); m.Workflow != "wf-release" || slices.Contains(m.Profiles, "pa") || m.Params["owner"] != nil {
				t.Fatalf("release actions not applied: %+v", m)
			}
			// A released machine cannot be allocated before it is Free.
			wantDRPError(t, s.Do("POST", "/pools/ag/allocateMachines", drpcliBody(1, 1, "", "", nil), admin()), 409, "", "")
			runWorkflow(t, s, u1)
			if m := getMachine(t, s, u1); m.PoolStatus != "Free" || m.PoolAllocated {
				t.Fatalf("after the release workflow: %+v", m)
			}
		})

		t.Run("wait_timeout", func(t *testing.T) {
			s := s.On(t)
			s.Must(201, "POST", "/pools", map[string]any{"Id": "wt",
				"ReleaseActions": map[string]any{"Workflow": "wf-release"}}, admin())
			u1 := s.On(t).AddMachine("wt1", map[string]any{"Pool": "wt"})
			u2 := s.On(t).AddMachine("wt2", map[string]any{"Pool": "wt"})
			poolOp(t, s, admin(), "/pools/wt/allocateMachines", drpcliBody(2, 2, "", "", nil))

			// The release waits for the release workflow, run by an agent
			// elsewhere, and answers Free.
			var wg sync.WaitGroup
			wg.Add(1)
			agentErr := make(chan string, 1)
			go func() {
				defer wg.Done()
				deadline := time.Now().Add(20 * time.Second)
				for time.Now().Before(deadline) {
					if m := getMachineNoFatal(s, u1); m != nil && m.PoolStatus == "Destroying" {
						if msg := runWorkflowNoFatal(s, u1); msg != "" {
							agentErr <- msg
						}
						return
					}
					time.Sleep(50 * time.Millisecond)
				}
				agentErr <- "machine never reached Destroying"
			}()
			start := time.Now()
			pr := poolOp(t, s, admin(), "/pools/wt/releaseMachines",
				drpcliBody(0, 0, "15s", "", map[string]any{"pool/machine-list": []string{"Name:wt1"}}))
			wg.Wait()
			select {
			case msg := <-agentErr:
				t.Fatal(msg)
			default:
			}
			if len(pr) != 1 || pr[0].Status != "Free" || pr[0].Allocated {
				t.Fatalf("release with wait: %v, want Free", pr)
			}
			if d := time.Since(start); d > 12*time.Second {
				t.Fatalf("release took %s", d)
			}

			// Nobody runs the workflow: the reply comes when the timeout
			// passes, with the transitional status.
			start = time.Now()
			pr = poolOp(t, s, admin(), "/pools/wt/releaseMachines",
				drpcliBody(0, 0, "1", "", map[string]any{"pool/machine-list": []string{u2}}))
			d := time.Since(start)
			if len(pr) != 1 || pr[0].Status != "Destroying" {
				t.Fatalf("release past its timeout: %v, want Destroying", pr)
			}
			// Without the timeout the reply would wait for a workflow nobody
			// runs; the bound leaves room for a loaded machine.
			if d < 900*time.Millisecond || d > 20*time.Second {
				t.Fatalf("release with wait-timeout 1 answered after %s", d)
			}
		})

		t.Run("bad_input", func(t *testing.T) {
			s := s.On(t)
			s.Must(201, "POST", "/pools", map[string]any{"Id": "bad"}, admin())
			for i := 0; i < 2; i++ {
				s.On(t).AddMachine(fmt.Sprintf("bad%d", i), map[string]any{"Pool": "bad"})
			}
			snapshot := func() string {
				return string(s.Must(200, "GET", "/machines?sort=Name", nil, admin()).Body)
			}
			cases := []struct {
				name   string
				method string
				path   string
				body   any
				want   int
				msg    string
			}{
				{"status_unknown_pool", "GET", "/pools/nope/status", nil, 404, ""},
				{"negative_count", "POST", "/pools/bad/allocateMachines", `{"pool/count":-1}`, 400, "pool/count"},
				{"non_numeric_count", "POST", "/pools/bad/allocateMachines", `{"pool/count":"two"}`, 400, "pool/count"},
				{"minimum_above_count", "POST", "/pools/bad/allocateMachines", drpcliBody(1, 2, "", "", nil), 400, "pool/minimum"},
				{"malformed_wait", "POST", "/pools/bad/allocateMachines", drpcliBody(1, 1, "soon", "", nil), 400, "pool/wait-timeout"},
				{"missing_machine", "POST", "/pools/bad/allocateMachines", drpcliBody(0, 0, "", "",
					map[string]any{"pool/machine-list": []string{"Name:bad0", "Name:ghost"}}), 404, "ghost"},
				{"unknown_filter_field", "POST", "/pools/bad/allocateMachines", drpcliBody(1, 1, "", "",
					map[string]any{"pool/filter": []string{"Bogus=1"}}), 406, "Bogus"},
				{"missing_workflow", "POST", "/pools/bad/allocateMachines", drpcliBody(1, 1, "", "no-such-wf", nil), 422, "no-such-wf"},
				{"missing_profile", "POST", "/pools/bad/allocateMachines", drpcliBody(1, 1, "", "",
					map[string]any{"pool/add-profiles": []string{"no-such-profile"}}), 422, "no-such-profile"},
				{"remove_from_default", "POST", "/pools/default/removeMachines", drpcliBody(1, 1, "", "", nil), 400, "default"},
				{"minimum_not_met", "POST", "/pools/bad/allocateMachines", drpcliBody(5, 3, "", "", nil), 409, "found 2"},
				{"unknown_pool_op", "POST", "/pools/nope-pool/allocateMachines", drpcliBody(1, 1, "", "", nil), 404, ""},
				{"unknown_key", "POST", "/pools/bad/allocateMachines", `{"pool/cuont":1}`, 400, "pool/cuont"},
				{"release_to_pool_unknown", "POST", "/machines/Name:ghost/releaseToPool", "{}", 404, ""},
			}
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					s := s.On(t)
					before := snapshot()
					wantDRPError(t, s.Do(c.method, c.path, c.body, admin()), c.want, "", c.msg)
					if after := snapshot(); after != before {
						t.Fatalf("machines changed by a refused request")
					}
				})
			}
		})
	})
}

func pr0(t testing.TB, s *tserver, pool, status string) string {
	t.Helper()
	var st map[string][]poolResult
	s.Must(200, "GET", "/pools/"+pool+"/status", nil, admin()).JSON(t, &st)
	if len(st[status]) == 0 {
		t.Fatalf("pool %s has no %s machine: %v", pool, status, st)
	}
	return st[status][0].Name
}

func getMachineNoFatal(s *tserver, key string) *e2eMachine {
	r, err := s.Send("GET", "/machines/"+key, nil, admin())
	if err != nil {
		return nil
	}
	var m e2eMachine
	if json.Unmarshal(r.Body, &m) != nil {
		return nil
	}
	return &m
}

// runWorkflowNoFatal is runWorkflow for goroutines: it returns a problem
// instead of failing the test.
func runWorkflowNoFatal(s *tserver, uuid string) string {
	for i := 0; i < 50; i++ {
		sr, err := s.Send("POST", "/jobs", fmt.Sprintf(`{"Machine":%q}`, uuid), admin())
		st, b := sr.Status, sr.Body
		if err != nil {
			return err.Error()
		}
		if st == 204 {
			if m := getMachineNoFatal(s, uuid); m != nil && m.WorkflowComplete {
				return ""
			}
			continue
		}
		if st != 201 && st != 202 {
			return fmt.Sprintf("POST /jobs: %d %s", st, b)
		}
		var j struct{ Uuid string }
		_ = json.Unmarshal(b, &j)
		for _, state := range []string{"running", "finished"} {
			sr, err := s.Send("PATCH", "/jobs/"+j.Uuid, fmt.Sprintf(`[{"op":"replace","path":"/State","value":%q}]`, state), admin())
			st, b := sr.Status, sr.Body
			if err != nil || st != 200 {
				return fmt.Sprintf("PATCH job %s: %d %s %v", state, st, b, err)
			}
		}
	}
	return "workflow did not end"
}

// TestE2EPoolsTenant: a tenant user neither sees nor moves machines its
// tenant hides, through pool operations or status.
func TestE2EPoolsTenant(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, s *tserver) {
		vis := s.On(t).AddMachine("tv1", map[string]any{"Pool": "tp"})
		hid := s.On(t).AddMachine("th1", map[string]any{"Pool": "tp"})
		hid2 := s.On(t).AddMachine("th2", map[string]any{"Pool": "tp"})
		s.Must(201, "POST", "/pools", map[string]any{"Id": "tp"}, admin())
		s.AddRole("pool-operator", [3]string{"pools", "*", "*"}, [3]string{"machines", "*", "*"})
		s.AddUser("tu", "tu-Pa55word!", "pool-operator")
		s.Must(201, "POST", "/tenants", map[string]any{"Name": "t1", "Users": []string{"tu"},
			"Members": map[string]any{"machines": []string{vis}}}, admin())
		tu := basic("tu", "tu-Pa55word!")
		// Tenant data reaches the policies asynchronously on other
		// replicas; here it is local, but allow the sync a moment.
		deadline := time.Now().Add(5 * time.Second)
		for s.Do("GET", "/machines/"+hid, nil, tu).Status != 404 {
			if time.Now().After(deadline) {
				t.Fatal("tenant never hid th1")
			}
			time.Sleep(100 * time.Millisecond)
		}
		snapshot := func() string { return string(s.Must(200, "GET", "/machines?sort=Name", nil, admin()).Body) }

		t.Run("status_shows_only_visible", func(t *testing.T) {
			s := s.On(t)
			var st map[string][]poolResult
			s.Must(200, "GET", "/pools/tp/status", nil, tu).JSON(t, &st)
			if len(st) != 1 || len(st["Free"]) != 1 || st["Free"][0].Uuid != vis {
				t.Fatalf("tenant status %v", st)
			}
		})
		t.Run("status_of_hidden_only_pool", func(t *testing.T) {
			s := s.On(t)
			s.On(t).AddMachine("th3", map[string]any{"Pool": "hidden-only"})
			wantDRPError(t, s.Do("GET", "/pools/hidden-only/status", nil, tu), 404, "", "")
			// Nor is such a pool listed as active for the tenant user.
			var active []string
			s.Must(200, "GET", "/pools-active", nil, tu).JSON(t, &active)
			if slices.Contains(active, "hidden-only") || !slices.Contains(active, "tp") {
				t.Fatalf("tenant pools-active %v", active)
			}
			s.Must(200, "GET", "/pools-active", nil, admin()).JSON(t, &active)
			if !slices.Contains(active, "hidden-only") {
				t.Fatalf("admin pools-active %v", active)
			}
		})
		refused := []struct {
			name string
			path string
			body any
			want int
		}{
			{"allocate_hidden_by_name", "/pools/tp/allocateMachines", drpcliBody(0, 0, "", "",
				map[string]any{"pool/machine-list": []string{"Name:th1"}}), 404},
			{"allocate_hidden_by_uuid", "/pools/tp/allocateMachines", drpcliBody(0, 0, "", "",
				map[string]any{"pool/machine-list": []string{hid2}}), 404},
			{"allocate_more_than_visible", "/pools/tp/allocateMachines", drpcliBody(2, 2, "", "", nil), 409},
			{"add_hidden", "/pools/other/addMachines?source-pool=tp", drpcliBody(0, 0, "", "",
				map[string]any{"pool/machine-list": []string{hid}}), 404},
			{"release_to_pool_hidden", "/machines/" + hid + "/releaseToPool", "{}", 404},
		}
		for _, c := range refused {
			t.Run(c.name, func(t *testing.T) {
				s := s.On(t)
				before := snapshot()
				wantDRPError(t, s.Do("POST", c.path, c.body, tu), c.want, "", "")
				if snapshot() != before {
					t.Fatal("machines changed by a refused request")
				}
			})
		}
		t.Run("all_machines_moves_only_visible", func(t *testing.T) {
			pr := poolOp(t, s, tu, "/pools/tp/allocateMachines", map[string]any{"pool/all-machines": true})
			if len(pr) != 1 || pr[0].Uuid != vis {
				t.Fatalf("tenant all-machines allocate: %v", pr)
			}
			for _, u := range []string{hid, hid2} {
				if m := getMachine(t, s, u); m.PoolAllocated {
					t.Fatalf("hidden machine %s allocated", u)
				}
			}
		})
	}, licenseArgs(t)...)
}

// TestE2EPoolsTwoServers: two server processes on one PostgreSQL database
// allocate from one pool concurrently; no machine is handed out twice
// (docs/design.md §11.3).
func TestE2EPoolsTwoServers(t *testing.T) {
	t.Parallel()
	var pg *dbCase
	for _, db := range databases(t) {
		if db.DSN != "" {
			pg = &db
		}
	}
	if pg == nil {
		t.Skip("PROVGATE_TEST_DATABASE not set")
	}
	s1 := startE2E(t, *pg)
	s2 := startE2E(t, *pg)
	// Bearer tokens: concurrent cold Basic logins are bounded (docs/design.md §8).
	auth1 := bearer(s1.Token("rocketskates", admin(), ""))
	auth2 := bearer(s2.Token("rocketskates", admin(), ""))
	const total = 200
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	createErr := make(chan string, total)
	for i := 0; i < total; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			sr, err := s1.Send("POST", "/machines", fmt.Sprintf(`{"Name":"cc%03d","Pool":"cc"}`, i), auth1)
			st, b := sr.Status, sr.Body
			if err != nil || st != 201 {
				createErr <- fmt.Sprintf("create cc%03d: %d %s %v", i, st, b, err)
			}
		}()
	}
	wg.Wait()
	close(createErr)
	for msg := range createErr {
		t.Fatalf("%s\nstderr:\n%s", msg, s1.Stderr.String())
	}

	var mu sync.Mutex
	got := map[string]int{}
	var problems []string
	for i, s := range []*tserver{s1, s2} {
		authz := []string{auth1, auth2}[i]
		for g := 0; g < 16; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					sr, err := s.Send("POST", "/pools/cc/allocateMachines", `{"pool/count":1}`, authz)
					st, b := sr.Status, sr.Body
					mu.Lock()
					switch {
					case err != nil:
						problems = append(problems, err.Error())
					case st == 409 && strings.Contains(string(b), "found 0"):
						mu.Unlock()
						return
					case st == 409:
						// A lost race is a retryable conflict, not a failure.
					case st != 200:
						problems = append(problems, fmt.Sprintf("%d %s", st, b))
					default:
						var pr []poolResult
						if err := json.Unmarshal(b, &pr); err != nil || len(pr) != 1 {
							problems = append(problems, fmt.Sprintf("reply %s", b))
						} else {
							got[pr[0].Uuid]++
						}
					}
					stop := len(problems) > 0
					mu.Unlock()
					if stop {
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	if len(problems) > 0 {
		t.Fatalf("allocation problems: %v", problems[:min(5, len(problems))])
	}
	if len(got) != total {
		t.Fatalf("allocated %d distinct machines, want %d", len(got), total)
	}
	for u, n := range got {
		if n != 1 {
			t.Fatalf("machine %s allocated %d times", u, n)
		}
	}
	var st map[string][]poolResult
	s2.Must(200, "GET", "/pools/cc/status", nil, admin()).JSON(t, &st)
	if len(st) != 1 || len(st["InUse"]) != total {
		t.Fatalf("status after the race: %d statuses, %d InUse", len(st), len(st["InUse"]))
	}
}
