package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// End-to-end tests of the event stream (GET /api/v3/ws) and of the agent's
// loop (docs/design.md §10, §13): a Go client plays drpcli's part over the
// real websocket against the real server, on every database.

func TestE2EEvents(t *testing.T) {
	forEachDB(t, func(t *testing.T, s *tserver) {
		t.Run("register_and_acknowledge", func(t *testing.T) { evRegister(t, s.accOn(t)) })
		t.Run("agent_runs_a_workflow", func(t *testing.T) { evAgentWorkflow(t, s.accOn(t)) })
	})
}

// evRegister: each register and deregister frame gets exactly one
// acknowledgement in DRP's shape; anything else gets an error event, so a
// client counting acknowledgements never hangs.
func evRegister(t *testing.T, s *tserver) {
	c := s.mustWS(t, admin())
	m := s.accMachine("ev-reg", nil)
	ack := c.register("machines.update." + m)
	if ack.Principal != "" || string(ack.Object) != "null" || string(ack.Original) != "null" || ack.Time.IsZero() {
		t.Fatalf("acknowledgement %+v", ack)
	}
	raw := string(c.raw[len(c.raw)-1])
	for _, k := range []string{`"Time":`, `"Type":"websocket"`, `"Action":"register"`, `"Key":"machines.update.` + m + `"`,
		`"Principal":""`, `"Object":null`, `"Original":null`} {
		if !strings.Contains(raw, k) {
			t.Fatalf("acknowledgement %s lacks %s", raw, k)
		}
	}
	s.Must(200, "PATCH", "/machines/"+m, accPatch("replace", "/Description", "one"), admin())
	e := c.next(5*time.Second, "the machine's update", is("machines", "update", m))
	if e.Principal != "user:rocketskates" || e.obj(t)["Description"] != "one" {
		t.Fatalf("event %+v %s", e, e.Object)
	}
	var orig map[string]any
	if err := json.Unmarshal(e.Original, &orig); err != nil || orig["Description"] != "" {
		t.Fatalf("Original %s", e.Original)
	}
	if strings.Contains(string(e.Object), `"Secret"`) {
		t.Fatalf("the event carries the machine Secret: %s", e.Object)
	}
	// A filter of another action does not match; comma lists and * do.
	c.register("machines.save,delete.*")
	s.Must(200, "PATCH", "/machines/"+m, accPatch("replace", "/Description", "two"), admin())
	c.next(5*time.Second, "the second update", is("machines", "update", m))
	c.send("deregister machines.update." + m)
	c.next(5*time.Second, "acknowledgement of deregister", is("websocket", "deregister", "machines.update."+m))
	s.Must(200, "PATCH", "/machines/"+m, accPatch("replace", "/Description", "three"), admin())
	c.none(500*time.Millisecond, "an update after deregister", is("machines", "update", m))
	s.Must(200, "DELETE", "/machines/"+m, nil, admin())
	c.next(5*time.Second, "the delete", is("machines", "delete", m))

	c.send("register nonsense")
	e = c.next(5*time.Second, "an error event", is("websocket", "error", "register nonsense"))
	if !strings.Contains(string(e.Object), "<type>.<action>.<key>") {
		t.Fatalf("error event %s", e.Object)
	}
	c.send("subscribe x.y.z")
	c.next(5*time.Second, "an error event", is("websocket", "error", "subscribe x.y.z"))

	// Posted events are published, with the poster as Principal.
	c.register("custom.*.*")
	s.Must(200, "POST", "/events", map[string]any{"Type": "custom", "Action": "ping", "Key": "k1", "Object": map[string]any{"a": 1}}, admin())
	e = c.next(5*time.Second, "the posted event", is("custom", "ping", "k1"))
	if e.Principal != "user:rocketskates" || string(e.Object) != `{"a":1}` {
		t.Fatalf("posted event %+v %s", e, e.Object)
	}
}

// evAgentWorkflow plays the DRP agent (drpcli machines processjobs) with
// the machine token a task rendered: a three-task workflow runs to
// completion through the pool's enter workflow, which settles the
// machine's pool status.
func evAgentWorkflow(t *testing.T, s *tserver) {
	adm := admin()
	s.Must(201, "POST", "/tasks", map[string]any{"Name": "ev-token", "Templates": []map[string]any{
		{"Name": "tokens", "Path": "", "Contents": "op={{.GenerateToken}}\ninf={{.GenerateInfiniteToken}}\n"}}}, adm)
	s.Must(201, "POST", "/stages", map[string]any{"Name": "ev-token-stage", "Tasks": []string{"ev-token"}}, adm)
	s.Must(201, "POST", "/workflows", map[string]any{"Name": "ev-token-wf", "Stages": []string{"ev-token-stage"}}, adm)
	for i, name := range []string{"ev-t1", "ev-t2", "ev-t3"} {
		task := map[string]any{"Name": name, "Templates": []map[string]any{
			{"Name": name + ".sh", "Path": "", "Contents": "#!/bin/sh\necho task {{.Machine.Name}} " + name + "\n"}}}
		if i == 0 {
			task["ExtraClaims"] = []map[string]string{{"scope": "profiles", "action": "get", "specific": "*"}}
		}
		s.Must(201, "POST", "/tasks", task, adm)
	}
	s.Must(201, "POST", "/stages", map[string]any{"Name": "ev-stage", "Tasks": []string{"ev-t1", "ev-t2", "ev-t3"}}, adm)
	s.Must(201, "POST", "/workflows", map[string]any{"Name": "ev-wf", "Stages": []string{"ev-stage"}}, adm)
	s.Must(201, "POST", "/pools", map[string]any{"Id": "ev-pool", "EnterActions": map[string]any{"Workflow": "ev-wf"}}, adm)
	s.Must(201, "POST", "/profiles", map[string]any{"Name": "ev-prof"}, adm)

	m := s.accMachine("ev-agent", map[string]any{"Workflow": "ev-token-wf"})
	other := s.accMachine("ev-other", nil)
	_, inf := accRenderTokens(t, s, penJob(t, s, m, adm))
	tok := bearer(inf)
	// The token-rendering job ends; the machine joins the pool, whose enter
	// workflow the agent then runs.
	cur := s.Must(200, "GET", "/machines/"+m, nil, adm).Map(t)
	s.Must(200, "PATCH", "/jobs/"+cur["CurrentJob"].(string), accPatch("replace", "/State", "finished"), adm)
	var res []map[string]any
	s.Must(200, "POST", "/pools/ev-pool/addMachines", map[string]any{"pool/machine-list": []string{m}}, adm).JSON(t, &res)
	if len(res) != 1 || res[0]["Status"] != "Joining" {
		t.Fatalf("addMachines: %v", res)
	}

	c := s.mustWS(t, tok)
	c.register("machines.update." + m)
	c.register("machines.save." + m)
	// Step 1: the agent reads its machine; it may not read another.
	s.Must(200, "GET", "/machines/"+m, nil, tok)
	s.Must(404, "GET", "/machines/"+other, nil, tok)

	var jobs []string
	for i := 0; i < 10; i++ {
		r := s.Do("POST", "/jobs", map[string]any{"Machine": m, "Context": ""}, tok)
		if r.Status == 204 {
			// Nothing to run now: a stage change was rolled over, or the
			// list ended (the agent waits for a change, then asks again).
			if s.Must(200, "GET", "/machines/"+m, nil, tok).Map(t)["WorkflowComplete"] == true {
				break
			}
			continue
		}
		if r.Status != 201 {
			t.Fatalf("POST /jobs: %s", r)
		}
		var job struct {
			Uuid, Task, State, Token string
			ExtraClaims          []map[string]string
		}
		r.JSON(t, &job)
		if job.State != "created" || job.Token == "" {
			t.Fatalf("job %s", r.Body)
		}
		jobs = append(jobs, job.Uuid)
		s.Must(200, "GET", "/tasks/"+job.Task, nil, tok)
		s.Must(200, "PATCH", "/jobs/"+job.Uuid, []map[string]any{
			{"op": "test", "path": "/State", "value": "created"}, {"op": "replace", "path": "/State", "value": "running"}}, tok)
		var acts []struct{ Name, Path, Content string }
		s.Must(200, "GET", "/jobs/"+job.Uuid+"/actions?os=linux", nil, tok).JSON(t, &acts)
		if len(acts) != 1 || !strings.Contains(acts[0].Content, "task ev-agent "+job.Task) {
			t.Fatalf("actions of %s: %+v", job.Task, acts)
		}
		s.Must(204, "PUT", "/jobs/"+job.Uuid+"/log", "ran "+job.Task+"\n", tok, "Content-Type", "application/octet-stream")
		// RS_TOKEN: the task script calls the API with the job token.
		jt := bearer(job.Token)
		s.Must(200, "GET", "/machines/"+m, nil, jt)
		s.Must(404, "GET", "/machines/"+other, nil, jt)
		if job.Task == "ev-t1" {
			if len(job.ExtraClaims) != 1 || job.ExtraClaims[0]["scope"] != "profiles" {
				t.Fatalf("ExtraClaims %v", job.ExtraClaims)
			}
			s.Must(200, "GET", "/profiles/ev-prof", nil, jt)
			s.Must(403, "GET", "/profiles/ev-prof", nil, tok)
		} else {
			s.Must(403, "GET", "/profiles/ev-prof", nil, jt)
		}
		s.Must(200, "PATCH", "/jobs/"+job.Uuid, []map[string]any{
			{"op": "test", "path": "/State", "value": "running"}, {"op": "replace", "path": "/State", "value": "finished"},
			{"op": "replace", "path": "/ExitState", "value": "complete"}}, tok)
		// The job token ends with its job.
		s.Must(403, "GET", "/machines/"+m, nil, jt)
		e := c.next(5*time.Second, "the machine's update for "+job.Task, is("machines", "update", m))
		if e.obj(t)["CurrentJob"] == nil {
			t.Fatalf("machine event %s", e.Object)
		}
	}
	if len(jobs) != 3 {
		t.Fatalf("ran %d jobs, want 3", len(jobs))
	}
	final := s.Must(200, "GET", "/machines/"+m, nil, tok).Map(t)
	if final["WorkflowComplete"] != true || final["PoolStatus"] != "Free" || final["CurrentTask"].(float64) != 4 {
		t.Fatalf("machine after the workflow: WorkflowComplete %v PoolStatus %v CurrentTask %v",
			final["WorkflowComplete"], final["PoolStatus"], final["CurrentTask"])
	}
	// The stream saw the workflow complete and the pool status settle.
	c.next(5*time.Second, "the completion", func(e wsEvent) bool {
		return is("machines", "update", m)(e) && e.obj(t)["WorkflowComplete"] == true && e.obj(t)["PoolStatus"] == "Free"
	})
	log := s.Must(200, "GET", "/jobs/"+jobs[1]+"/log", nil, tok)
	if string(log.Body) != "ran ev-t2\n" {
		t.Fatalf("log %q", log.Body)
	}
}
