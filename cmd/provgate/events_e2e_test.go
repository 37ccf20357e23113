package main

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"
)

// End-to-end tests of the event stream (GET /api/v3/ws) and of the agent's
// loop (docs/design.md §10, §13): a Go client plays drpcli's part over the
// real websocket against the real server, on every database.

func TestE2EEvents(t *testing.T) {
	t.Parallel()
	lic := append(licenseArgs(t), receiverArgs...)
	forEachDB(t, func(t *testing.T, s *tserver) {
		t.Run("register_and_acknowledge", func(t *testing.T) { evRegister(t, s.On(t)) })
		t.Run("agent_runs_a_workflow", func(t *testing.T) { evAgentWorkflow(t, s.On(t)) })
		t.Run("failing_task", func(t *testing.T) { evFailingTask(t, s.On(t)) })
		t.Run("filtered_per_principal_and_tenant", func(t *testing.T) { evFiltered(t, s.On(t)) })
		t.Run("credentials_that_end_close_the_socket", func(t *testing.T) { evRevoked(t, s.On(t)) })
		t.Run("lost_access_stops_delivery", func(t *testing.T) { evLostAccess(t, s.On(t)) })
		t.Run("bursts_in_order_decided_when_sent", func(t *testing.T) { evBurst(t, s.On(t)) })
		t.Run("job_tokens", func(t *testing.T) { evJobTokens(t, s.On(t)) })
		t.Run("authentication_forms_and_limits", func(t *testing.T) { evAuthForms(t, s.On(t)) })
	}, lic...)
}

// evMachineToken gives a new machine an infinite operations token (rendered
// by a task, the only way machine tokens are made) and returns the machine
// and the token's Authorization. The token job is finished.
func evMachineToken(t *testing.T, s *tserver, name string, extra map[string]any) (string, string) {
	t.Helper()
	adm := admin()
	if s.Do("GET", "/workflows/ev-token-wf", nil, adm).Status == 404 {
		s.Must(201, "POST", "/tasks", map[string]any{"Name": "ev-token", "Templates": []map[string]any{
			{"Name": "tokens", "Path": "", "Contents": "op={{.GenerateToken}}\ninf={{.GenerateInfiniteToken}}\n"}}}, adm)
		s.Must(201, "POST", "/stages", map[string]any{"Name": "ev-token-stage", "Tasks": []string{"ev-token"}}, adm)
		s.Must(201, "POST", "/workflows", map[string]any{"Name": "ev-token-wf", "Stages": []string{"ev-token-stage"}}, adm)
	}
	body := map[string]any{"Workflow": "ev-token-wf"}
	for k, v := range extra {
		body[k] = v
	}
	m := s.AddMachine(name, body)
	job := penJob(t, s, m, adm)
	_, inf := renderTokens(t, s, job, admin())
	s.Must(200, "PATCH", "/jobs/"+job, jsonPatch("replace", "/State", "finished"), adm)
	return m, bearer(inf)
}

// evJob asks for machine m's next job as authz until one is made, and
// returns it with its token.
func evJob(t *testing.T, s *tserver, m, authz string) (id, token string) {
	t.Helper()
	for i := 0; i < 8; i++ {
		r := s.Do("POST", "/jobs", map[string]any{"Machine": m}, authz)
		switch r.Status {
		case 204:
			continue
		case 201, 202:
			var j struct{ Uuid, Token string }
			r.JSON(t, &j)
			return j.Uuid, j.Token
		}
		t.Fatalf("POST /jobs for %s: %s", m, r)
	}
	t.Fatalf("no job for %s", m)
	return "", ""
}

func evSetState(t *testing.T, s *tserver, job, from, to, authz string) {
	t.Helper()
	s.Must(200, "PATCH", "/jobs/"+job, []map[string]any{
		{"op": "test", "path": "/State", "value": from}, {"op": "replace", "path": "/State", "value": to}}, authz)
}

// evRegister: each register and deregister frame gets exactly one
// acknowledgement in DRP's shape; anything else gets an error event, so a
// client counting acknowledgements never hangs.
func evRegister(t *testing.T, s *tserver) {
	c := s.mustWS(t, admin())
	m := s.AddMachine("ev-reg", nil)
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
	s.Must(200, "PATCH", "/machines/"+m, jsonPatch("replace", "/Description", "one"), admin())
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
	s.Must(200, "PATCH", "/machines/"+m, jsonPatch("replace", "/Description", "two"), admin())
	c.next(5*time.Second, "the second update", is("machines", "update", m))
	c.send("deregister machines.update." + m)
	c.next(5*time.Second, "acknowledgement of deregister", is("websocket", "deregister", "machines.update."+m))
	s.Must(200, "PATCH", "/machines/"+m, jsonPatch("replace", "/Description", "three"), admin())
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

	m, tok := evMachineToken(t, s, "ev-agent", nil)
	other := s.AddMachine("ev-other", nil)
	// The machine joins the pool, whose enter workflow the agent runs.
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
			ExtraClaims              []map[string]string
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

// evFailingTask: a failed task holds the machine's pool status, makes it
// not runnable and sends jobfail; the stream shows it.
func evFailingTask(t *testing.T, s *tserver) {
	adm := admin()
	rc := newReceiver(t)
	jobfailPlugin(t, s, rc)
	s.Must(201, "POST", "/tasks", map[string]any{"Name": "ev-fail", "Templates": []map[string]any{
		{"Name": "fail.sh", "Path": "", "Contents": "#!/bin/sh\nexit 1\n"}}}, adm)
	s.Must(201, "POST", "/stages", map[string]any{"Name": "ev-fail-stage", "Tasks": []string{"ev-fail"}}, adm)
	s.Must(201, "POST", "/workflows", map[string]any{"Name": "ev-fail-wf", "Stages": []string{"ev-fail-stage"}}, adm)
	s.Must(201, "POST", "/pools", map[string]any{"Id": "ev-fpool", "EnterActions": map[string]any{"Workflow": "ev-fail-wf"}}, adm)
	m, tok := evMachineToken(t, s, "ev-failing", nil)
	c := s.mustWS(t, tok)
	c.register("machines.update." + m)
	watcher := s.mustWS(t, adm)
	watcher.register("jobs.*.*")
	s.Must(200, "POST", "/pools/ev-fpool/addMachines", map[string]any{"pool/machine-list": []string{m}}, adm)

	id, jt := evJob(t, s, m, tok)
	evSetState(t, s, id, "created", "running", tok)
	s.Must(204, "PUT", "/jobs/"+id+"/log", "exit 1\n", tok, "Content-Type", "application/octet-stream")
	// The agent marks its machine not runnable, then fails the job.
	s.Must(200, "PATCH", "/machines/"+m, []map[string]any{
		{"op": "test", "path": "/Runnable", "value": true}, {"op": "replace", "path": "/Runnable", "value": false}}, tok)
	s.Must(200, "PATCH", "/jobs/"+id, []map[string]any{
		{"op": "test", "path": "/State", "value": "running"}, {"op": "replace", "path": "/State", "value": "failed"},
		{"op": "replace", "path": "/ExitState", "value": "failed"}}, tok)
	s.Must(403, "GET", "/machines/"+m, nil, bearer(jt))

	got := s.Must(200, "GET", "/machines/"+m, nil, tok).Map(t)
	if got["PoolStatus"] != "HoldJoin" || got["Runnable"] != false || got["WorkflowComplete"] != false {
		t.Fatalf("machine after the failure: PoolStatus %v Runnable %v WorkflowComplete %v",
			got["PoolStatus"], got["Runnable"], got["WorkflowComplete"])
	}
	c.next(5*time.Second, "the HoldJoin update", func(e wsEvent) bool {
		return is("machines", "update", m)(e) && e.obj(t)["PoolStatus"] == "HoldJoin"
	})
	watcher.next(5*time.Second, "the failed job", func(e wsEvent) bool {
		return is("jobs", "update", id)(e) && e.obj(t)["State"] == "failed"
	})
	hits := rc.waitFor(t, "/jobfail", 1, 10*time.Second)
	if hits[0].Header.Get("X-Provgate-Job") != id {
		t.Fatalf("jobfail for job %q, want %q", hits[0].Header.Get("X-Provgate-Job"), id)
	}
	r := s.Do("POST", "/jobs", map[string]any{"Machine": m}, tok)
	wantDRPError(t, r, 409, "", "is not runnable")
}

// evFiltered: a subscriber receives only the events of objects it may get
// now; a machine token only its machine's and its jobs' events, whatever it
// registers.
func evFiltered(t *testing.T, s *tserver) {
	adm := admin()
	s.AddRole("ev-mget", [3]string{"machines", "get,list", "*"}, [3]string{"jobs", "get", "*"})
	s.AddUser("ev-carol", "ev-carol-pw-1", "ev-mget")
	s.AddUser("ev-dave", "ev-dave-pw-1", "ev-mget")
	a, atok := evMachineToken(t, s, "ev-f-a", nil)
	b := s.AddMachine("ev-f-b", map[string]any{"Workflow": "ev-token-wf"})
	s.Must(201, "POST", "/tenants", map[string]any{"Name": "ev-t", "Users": []string{"ev-carol"},
		"Members": map[string][]string{"machines": {a}}}, adm)

	carol := s.mustWS(t, basic("ev-carol", "ev-carol-pw-1"))
	dave := s.mustWS(t, bearer(s.Token("ev-dave", basic("ev-dave", "ev-dave-pw-1"), "")))
	mach := s.mustWS(t, atok)
	root := s.mustWS(t, adm)
	for _, c := range []*wsClient{carol, dave, mach, root} {
		c.register("*.*.*")
	}

	s.Must(200, "PATCH", "/machines/"+b, jsonPatch("replace", "/Description", "b1"), adm)
	s.Must(201, "POST", "/profiles", map[string]any{"Name": "ev-f-prof"}, adm)
	s.Must(200, "POST", "/events", map[string]any{"Type": "custom", "Action": "note", "Key": "x"}, adm)
	s.Must(200, "POST", "/events", map[string]any{"Type": "machines", "Action": "note", "Key": b}, adm)
	bJob := penJob(t, s, b, adm)
	s.Must(201, "POST", "/workflows", map[string]any{"Name": "ev-f-wf", "Stages": []string{"ev-token-stage"}}, adm)
	s.Must(200, "PATCH", "/machines/"+a, jsonPatch("replace", "/Workflow", "ev-f-wf"), adm)
	aJob := penJob(t, s, a, adm)
	s.Must(200, "PATCH", "/machines/"+a, jsonPatch("replace", "/Description", "sentinel"), adm)
	sentinel := func(e wsEvent) bool {
		return is("machines", "update", a)(e) && e.obj(t)["Description"] == "sentinel"
	}
	for name, c := range map[string]*wsClient{"carol": carol, "dave": dave, "machine token": mach, "admin": root} {
		c.t = t
		c.next(10*time.Second, name+"'s sentinel", sentinel)
		c.next(time.Second, name+"'s job of A", is("jobs", "create", aJob))
		profile := is("profiles", "create", "ev-f-prof")
		custom := is("custom", "note", "x")
		bUpdate := is("machines", "", b)
		bJobs := is("jobs", "", bJob)
		switch name {
		case "admin":
			c.next(time.Second, "admin's profile event", profile)
			c.next(time.Second, "admin's posted event", custom)
			c.next(time.Second, "admin's B update", bUpdate)
			c.next(time.Second, "admin's B job", bJobs)
			continue
		case "dave":
			c.next(time.Second, "dave's B update", bUpdate)
			c.next(time.Second, "dave's B job", bJobs)
		default:
			// Carol's tenant hides B; the machine token sees one machine.
			c.none(50*time.Millisecond, name+" an event of machine B", bUpdate)
			c.none(50*time.Millisecond, name+" an event of B's job", bJobs)
		}
		c.none(50*time.Millisecond, name+" a profile event (no profiles get)", profile)
		c.none(50*time.Millisecond, name+" a posted event of another type (no events list)", custom)
	}
}

// evRevoked: a credential that stops being valid closes the socket: a
// rotated user or system Secret, a password change, a removed user, a new
// machine Secret, an expired token.
func evRevoked(t *testing.T, s *tserver) {
	adm := admin()
	s.AddRole("ev-rget", [3]string{"machines", "get", "*"})
	wantClosed := func(t *testing.T, c *wsClient, reason string) {
		t.Helper()
		code, text := c.closed(10 * time.Second)
		if code != 1008 || text != reason {
			t.Fatalf("closed with %d %q, want 1008 %q", code, text, reason)
		}
	}
	t.Run("user Secret rotated mid-stream", func(t *testing.T) {
		s := s.On(t)
		s.AddUser("ev-erin", "ev-erin-pw-1", "ev-rget")
		c := s.mustWS(t, bearer(s.Token("ev-erin", basic("ev-erin", "ev-erin-pw-1"), "")))
		c.register("machines.*.*")
		s.Must(200, "POST", "/users/ev-erin/secret", nil, adm)
		wantClosed(t, c, "credentials no longer valid")
	})
	t.Run("password changed", func(t *testing.T) {
		s := s.On(t)
		s.AddUser("ev-fred", "ev-fred-pw-1", "ev-rget")
		c := s.mustWS(t, bearer(s.Token("ev-fred", basic("ev-fred", "ev-fred-pw-1"), "")))
		basicC := s.mustWS(t, basic("ev-fred", "ev-fred-pw-1"))
		s.Must(200, "PUT", "/users/ev-fred/password", map[string]any{"Password": "ev-fred-pw-2"}, adm)
		wantClosed(t, c, "credentials no longer valid")
		wantClosed(t, basicC, "credentials no longer valid")
	})
	t.Run("user removed", func(t *testing.T) {
		s := s.On(t)
		s.AddUser("ev-gail", "ev-gail-pw-1", "ev-rget")
		c := s.mustWS(t, basic("ev-gail", "ev-gail-pw-1"))
		s.Must(200, "DELETE", "/users/ev-gail", nil, adm)
		wantClosed(t, c, "credentials no longer valid")
	})
	t.Run("machine Secret changed", func(t *testing.T) {
		s := s.On(t)
		m, tok := evMachineToken(t, s, "ev-rev-m", nil)
		c := s.mustWS(t, tok)
		s.Must(200, "PATCH", "/machines/"+m, jsonPatch("replace", "/Secret", "new"), adm)
		wantClosed(t, c, "credentials no longer valid")
	})
	t.Run("token expired", func(t *testing.T) {
		s := s.On(t)
		s.AddUser("ev-hank", "ev-hank-pw-1", "ev-rget")
		c := s.mustWS(t, bearer(s.Token("ev-hank", basic("ev-hank", "ev-hank-pw-1"), "?ttl=2")))
		wantClosed(t, c, "token expired")
	})
	t.Run("system Secret rotated", func(t *testing.T) {
		s := s.On(t)
		_, mtok := evMachineToken(t, s, "ev-rev-sys", nil)
		m := s.mustWS(t, mtok)
		u := s.mustWS(t, bearer(s.Token("rocketskates", adm, "")))
		b := s.mustWS(t, adm)
		s.Must(200, "POST", "/system/actions/rotateSecret", nil, adm)
		wantClosed(t, m, "credentials no longer valid")
		wantClosed(t, u, "credentials no longer valid")
		// Basic credentials do not depend on the system Secret.
		b.register("machines.*.*")
	})
}

// evLostAccess: losing access stops delivery at once, while the socket
// stays open for what the caller may still see.
func evLostAccess(t *testing.T, s *tserver) {
	adm := admin()
	s.AddRole("ev-lget", [3]string{"machines", "get", "*"})
	s.AddUser("ev-ivy", "ev-ivy-pw-1", "ev-lget")
	s.AddUser("ev-jon", "ev-jon-pw-1", "ev-lget")
	m := s.AddMachine("ev-lost", nil)
	kept := s.AddMachine("ev-kept", nil)
	ivy := s.mustWS(t, bearer(s.Token("ev-ivy", basic("ev-ivy", "ev-ivy-pw-1"), "")))
	jon := s.mustWS(t, basic("ev-jon", "ev-jon-pw-1"))
	for _, c := range []*wsClient{ivy, jon} {
		c.register("machines.update.*")
	}
	s.Must(200, "PATCH", "/machines/"+m, jsonPatch("replace", "/Description", "seen"), adm)
	ivy.next(5*time.Second, "ivy's update", is("machines", "update", m))
	jon.next(5*time.Second, "jon's update", is("machines", "update", m))

	// Ivy loses her role; a tenant starts hiding the machine from Jon.
	s.Must(200, "PATCH", "/users/ev-ivy", jsonPatch("replace", "/Roles", []string{}), adm)
	s.Must(201, "POST", "/tenants", map[string]any{"Name": "ev-lt", "Users": []string{"ev-jon"},
		"Members": map[string][]string{"machines": {kept}}}, adm)
	s.Must(200, "PATCH", "/machines/"+m, jsonPatch("replace", "/Description", "unseen"), adm)
	s.Must(200, "PATCH", "/machines/"+kept, jsonPatch("replace", "/Description", "still seen"), adm)
	jon.next(5*time.Second, "jon's update of the machine his tenant shows", is("machines", "update", kept))
	jon.none(100*time.Millisecond, "an update of the machine his tenant hides", is("machines", "update", m))
	ivy.none(500*time.Millisecond, "an update after losing the role", is("machines", "update", ""))
}

// evBurst: back-to-back writes reach each subscriber in order, though a
// busy socket sends several in one write (docs/design.md §13.2); a role
// taken away between two writes stops delivery with the next event, though
// that event may wait for its socket's next write.
func evBurst(t *testing.T, s *tserver) {
	adm := admin()
	s.AddRole("ev-bget", [3]string{"machines", "get", "*"})
	s.AddUser("ev-bo", "ev-bo-pw-1", "ev-bget")
	m := s.AddMachine("ev-burst", nil)
	bo := s.mustWS(t, bearer(s.Token("ev-bo", basic("ev-bo", "ev-bo-pw-1"), "")))
	root := s.mustWS(t, adm)
	for _, c := range []*wsClient{bo, root} {
		c.register("machines.update." + m)
	}
	const n = 40
	for i := 0; i < n; i++ {
		s.Must(200, "PATCH", "/machines/"+m, jsonPatch("replace", "/Description", strconv.Itoa(i)), adm)
	}
	for name, c := range map[string]*wsClient{"ev-bo": bo, "admin": root} {
		for i := 0; i < n; i++ {
			e := c.next(10*time.Second, name+"'s update "+strconv.Itoa(i), is("machines", "update", m))
			if d := e.obj(t)["Description"]; d != strconv.Itoa(i) {
				t.Fatalf("%s: update %d has Description %v: out of order", name, i, d)
			}
		}
	}
	s.Must(200, "PATCH", "/machines/"+m, jsonPatch("replace", "/Description", "before"), adm)
	s.Must(200, "PATCH", "/users/ev-bo", jsonPatch("replace", "/Roles", []string{}), adm)
	s.Must(200, "PATCH", "/machines/"+m, jsonPatch("replace", "/Description", "after"), adm)
	root.next(5*time.Second, "admin's update after the role change", func(e wsEvent) bool {
		return is("machines", "update", m)(e) && e.obj(t)["Description"] == "after"
	})
	bo.none(500*time.Millisecond, "an update published after losing the role", func(e wsEvent) bool {
		return is("machines", "update", m)(e) && e.obj(t)["Description"] == "after"
	})
}

// evJobTokens: a job token is never wider than its creator allows, never
// stored, ends with its job, and its extra claims reach no other machine.
func evJobTokens(t *testing.T, s *tserver) {
	adm := admin()
	s.Must(201, "POST", "/tasks", map[string]any{"Name": "ev-jt", "ExtraClaims": []map[string]string{
		{"scope": "machines", "action": "*", "specific": "*"}, {"scope": "profiles", "action": "get", "specific": "*"}}}, adm)
	s.Must(201, "POST", "/stages", map[string]any{"Name": "ev-jt-stage", "Tasks": []string{"ev-jt", "ev-jt", "ev-jt"}}, adm)
	s.Must(201, "POST", "/workflows", map[string]any{"Name": "ev-jt-wf", "Stages": []string{"ev-jt-stage"}}, adm)
	s.Must(201, "POST", "/profiles", map[string]any{"Name": "ev-jt-prof"}, adm)
	m, tok := evMachineToken(t, s, "ev-jt-m", nil)
	other := s.AddMachine("ev-jt-other", nil)
	s.Must(200, "PATCH", "/machines/"+m, jsonPatch("replace", "/Workflow", "ev-jt-wf"), adm)

	t.Run("from the machine's token", func(t *testing.T) {
		s := s.On(t)
		id, jt := evJob(t, s, m, tok)
		if jt == "" {
			t.Fatal("no job token")
		}
		j := bearer(jt)
		s.Must(200, "GET", "/profiles/ev-jt-prof", nil, j)
		// A tenant listing the machine restricts its extra claims too.
		s.Must(201, "POST", "/tenants", map[string]any{"Name": "ev-jt-t",
			"Members": map[string][]string{"machines": {m}, "profiles": {}}}, adm)
		s.Must(404, "GET", "/profiles/ev-jt-prof", nil, j)
		s.Must(200, "DELETE", "/tenants/ev-jt-t", nil, adm)
		s.Must(200, "GET", "/profiles/ev-jt-prof", nil, j)
		// Extra claims on every machine still reach only its own.
		for _, p := range []string{"/machines/" + other, "/machines/Name:ev-jt-other"} {
			if r := s.Do("GET", p, nil, j); r.Status != 404 {
				t.Fatalf("GET %s with the job token: %s, want 404", p, r)
			}
		}
		s.Must(404, "DELETE", "/machines/"+other, nil, j)
		// Neither the token nor a client's extra claims are stored.
		stored := s.Must(200, "GET", "/jobs/"+id, nil, adm)
		if strings.Contains(string(stored.Body), jt) || strings.Contains(string(stored.Body), `"Token"`) {
			t.Fatalf("the stored job carries its token: %s", stored.Body)
		}
		s.Must(200, "PATCH", "/jobs/"+id, jsonPatch("add", "/ExtraClaims", []map[string]string{{"scope": "*", "action": "*", "specific": "*"}}), tok)
		if strings.Contains(string(s.Must(200, "GET", "/jobs/"+id, nil, adm).Body), `"ExtraClaims"`) {
			t.Fatal("a client wrote a job's ExtraClaims")
		}
		// A job token subscribing to everything gets its machine's events.
		c := s.mustWS(t, j)
		c.register("*.*.*")
		s.Must(200, "PATCH", "/machines/"+other, jsonPatch("replace", "/Description", "x"), adm)
		s.Must(200, "PATCH", "/machines/"+m, jsonPatch("replace", "/Description", "own"), adm)
		c.next(5*time.Second, "its machine's update", is("machines", "update", m))
		c.none(50*time.Millisecond, "another machine's update", is("machines", "", other))
		evSetState(t, s, id, "created", "running", tok)
		evSetState(t, s, id, "running", "finished", tok)
		s.Must(403, "GET", "/profiles/ev-jt-prof", nil, j)
		if code, text := c.closed(10 * time.Second); code != 1008 || text != "credentials no longer valid" {
			t.Fatalf("job token stream closed with %d %q", code, text)
		}
	})
	t.Run("from a user", func(t *testing.T) {
		s := s.On(t)
		// A user who may create the machine's jobs but holds less than
		// the token would carry gets no token.
		s.AddRole("ev-jobber", [3]string{"jobs", "create,get,update", m}, [3]string{"machines", "get", m})
		s.AddUser("ev-kim", "ev-kim-pw-1", "ev-jobber")
		id, jt := evJob(t, s, m, basic("ev-kim", "ev-kim-pw-1"))
		if jt != "" {
			t.Fatalf("a user without the machine's rights got a job token for %s", id)
		}
		s.Must(200, "PATCH", "/jobs/"+id, jsonPatch("replace", "/State", "finished"), adm)
		// The superuser holds everything: it gets one, bound to itself.
		id, jt = evJob(t, s, m, adm)
		if jt == "" {
			t.Fatal("the superuser got no job token")
		}
		s.Must(200, "GET", "/profiles/ev-jt-prof", nil, bearer(jt))
		s.Must(200, "PATCH", "/jobs/"+id, jsonPatch("replace", "/State", "failed"), adm)
		s.Must(403, "GET", "/profiles/ev-jt-prof", nil, bearer(jt))
	})
}

// evAuthForms: the stream takes the Authorization header (Bearer or Basic)
// or DRP's ?token=, refuses without credentials, and limits the sockets of
// one principal.
func evAuthForms(t *testing.T, s *tserver) {
	tok := s.Token("rocketskates", admin(), "")
	for name, o := range map[string]wsDialOpt{
		"token query":      {query: "?token=" + tok},
		"user:pass query":  {query: "?token=rocketskates:" + e2eAdminPassword},
		"bad token query":  {query: "?token=nope"},
		"no credentials":   {},
		"wrong basic pass": {query: "?token=rocketskates:wrong"},
	} {
		c, res, err := s.dialWS(t, "", o)
		switch name {
		case "token query", "user:pass query":
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			c.register("machines.*.*")
		default:
			want := 403
			if name == "no credentials" {
				want = 401
			}
			if err == nil || res == nil || res.StatusCode != want {
				t.Fatalf("%s: dial error %v, response %v, want %d", name, err, res, want)
			}
		}
	}
	if r := s.Do("GET", "/ws", nil, admin()); r.Status != 400 {
		t.Fatalf("GET /ws without an upgrade: %s", r)
	}
	s.AddRole("ev-few", [3]string{"machines", "get", "*"})
	s.AddUser("ev-lee", "ev-lee-pw-1", "ev-few")
	lee := basic("ev-lee", "ev-lee-pw-1")
	var open []*wsClient
	for i := 0; i < 16; i++ {
		open = append(open, s.mustWS(t, lee))
	}
	_, res, err := s.dialWS(t, bearer(s.Token("ev-lee", lee, "")))
	if err == nil || res == nil || res.StatusCode != 429 {
		t.Fatalf("17th stream of one user: %v %v, want 429", err, res)
	}
	_ = open[0].conn.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, _, err := s.dialWS(t, lee)
		if err == nil {
			c.register("machines.*.*")
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no stream after one closed: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestE2EEventsSlowConsumer: a client that does not read is disconnected
// once its buffer is full, with a close reason that says so; the server
// and other subscribers go on.
func TestE2EEventsSlowConsumer(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, s *tserver) {
		slow := s.mustWS(t, admin(), wsDialOpt{paused: true})
		if err := slow.conn.WriteMessage(1, []byte("register big.*.*")); err != nil {
			t.Fatal(err)
		}
		fast := s.mustWS(t, admin())
		fast.register("big.*.*")
		big := strings.Repeat("x", 512<<10)
		// 8 MiB: more than the server's socket buffer and the slow
		// client's small window hold, so the server's writer blocks and
		// the buffer of 4 events overflows; the posts end within the
		// test servers' write timeout (testStreamWriteTimeout).
		for i := 0; i < 16; i++ {
			s.Must(200, "POST", "/events", map[string]any{"Type": "big", "Action": "blob", "Key": strconv.Itoa(i),
				"Object": map[string]any{"Data": big}}, admin())
		}
		for i := 0; i < 16; i++ {
			fast.next(20*time.Second, "the fast subscriber's event", is("big", "blob", strconv.Itoa(i)))
		}
		slow.startReading()
		code, text := slow.closed(30 * time.Second)
		if code != 1008 || !strings.HasPrefix(text, "slow consumer: more than 4 events waiting") {
			t.Fatalf("slow consumer closed with %d %q", code, text)
		}
		fast.register("machines.*.*")
		s.Must(200, "GET", "/info", nil, admin())
	}, "--event-buffer", "4")
}

// TestE2EEventsReplicas: two servers on one PostgreSQL database. A change
// made through one reaches the other's event streams, long polls and pool
// waits by notification; a role change or Secret rotation made through one
// is enforced on the other's streams.
func TestE2EEventsReplicas(t *testing.T) {
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
	lic := licenseArgs(t)
	s1 := startE2E(t, *pg, lic...)
	s2 := startE2E(t, *pg, lic...)
	adm := admin()
	watch := s2.mustWS(t, adm)
	watch.register("machines.*.*")
	watch.register("jobs.*.*")
	watch.register("note.*.*")

	start := time.Now()
	var m struct{ Uuid string }
	s1.Must(201, "POST", "/machines", map[string]any{"Name": "rep-m1"}, adm).JSON(t, &m)
	e := watch.next(5*time.Second, "the create made through the other server", is("machines", "create", m.Uuid))
	t.Logf("a create through server 1 reached a stream on server 2 after %s", time.Since(start))
	if e.obj(t)["Name"] != "rep-m1" || e.Principal != "user:rocketskates" || strings.Contains(string(e.Object), `"Secret"`) {
		t.Fatalf("relayed event %+v %s", e, e.Object)
	}
	s1.Must(200, "PATCH", "/machines/"+m.Uuid, jsonPatch("replace", "/Description", "d1"), adm)
	if e := watch.next(5*time.Second, "the update", is("machines", "update", m.Uuid)); e.obj(t)["Description"] != "d1" {
		t.Fatalf("relayed update %s", e.Object)
	}
	s1.Must(200, "POST", "/events", map[string]any{"Type": "note", "Action": "hello", "Key": "k"}, adm)
	watch.next(5*time.Second, "the posted event", is("note", "hello", "k"))

	t.Run("long poll woken", func(t *testing.T) {
		r := s2.Must(200, "GET", "/machines/"+m.Uuid, nil, adm)
		etag := r.Header.Get("ETag")
		done := s2.Go("GET", "/machines/"+m.Uuid, nil, adm, "If-None-Match", etag, "Prefer", "wait=60s")
		time.Sleep(300 * time.Millisecond)
		start := time.Now()
		s1.Must(200, "PATCH", "/machines/"+m.Uuid, jsonPatch("replace", "/Description", "d2"), adm)
		r = await(t, done, 30*time.Second, "the long poll on server 2, woken by the write on server 1").resp
		if r.Status != 200 || !strings.Contains(string(r.Body), `"d2"`) {
			t.Fatalf("long poll: %s", r)
		}
		t.Logf("the long poll on server 2 answered %s after the write on server 1", time.Since(start))
	})

	t.Run("pool wait woken", func(t *testing.T) {
		s1.Must(201, "POST", "/tasks", map[string]any{"Name": "rep-t"}, adm)
		s1.Must(201, "POST", "/stages", map[string]any{"Name": "rep-s", "Tasks": []string{"rep-t"}}, adm)
		s1.Must(201, "POST", "/workflows", map[string]any{"Name": "rep-wf", "Stages": []string{"rep-s"}}, adm)
		s1.Must(201, "POST", "/pools", map[string]any{"Id": "rep-pool", "EnterActions": map[string]any{"Workflow": "rep-wf"}}, adm)
		done := s2.Go("POST", "/pools/rep-pool/addMachines", map[string]any{
			"pool/machine-list": []string{m.Uuid}, "pool/wait-timeout": "60s"}, adm)
		// The agent runs the enter workflow through server 1.
		deadline := time.Now().Add(20 * time.Second)
		var job string
		for job == "" && time.Now().Before(deadline) {
			r := s1.Do("POST", "/jobs", map[string]any{"Machine": m.Uuid}, adm)
			if r.Status == 201 {
				var j struct{ Uuid string }
				r.JSON(t, &j)
				job = j.Uuid
			} else {
				time.Sleep(50 * time.Millisecond)
			}
		}
		if job == "" {
			t.Fatal("the machine got no job from its pool's enter workflow")
		}
		watch.next(5*time.Second, "the job created through server 1", is("jobs", "create", job))
		evSetState(t, s1, job, "created", "running", adm)
		evSetState(t, s1, job, "running", "finished", adm)
		r := await(t, done, 30*time.Second, "the pool wait on server 2, ended by the workflow completed on server 1").resp
		var res []map[string]any
		r.JSON(t, &res)
		if r.Status != 200 || len(res) != 1 || res[0]["Status"] != "Free" {
			t.Fatalf("pool wait: %s", r)
		}
	})

	t.Run("authorization changes made through the other server", func(t *testing.T) {
		s1.AddRole("rep-get", [3]string{"machines", "get", "*"})
		s1.AddUser("rep-bob", "rep-bob-pw-1", "rep-get")
		s1.AddUser("rep-cy", "rep-cy-pw-1", "rep-get")
		bob := s2.mustWS(t, bearer(s2.Token("rep-bob", basic("rep-bob", "rep-bob-pw-1"), "")))
		bob.register("machines.update.*")
		cy := s2.mustWS(t, bearer(s2.Token("rep-cy", basic("rep-cy", "rep-cy-pw-1"), "")))
		cy.register("machines.update.*")
		s1.Must(200, "PATCH", "/machines/"+m.Uuid, jsonPatch("replace", "/Description", "d3"), adm)
		bob.next(5*time.Second, "bob's update", is("machines", "update", m.Uuid))
		// Bob loses his role and Cy's Secret is rotated, both through server 1.
		s1.Must(200, "PATCH", "/users/rep-bob", jsonPatch("replace", "/Roles", []string{}), adm)
		s1.Must(200, "POST", "/users/rep-cy/secret", nil, adm)
		if code, text := cy.closed(10 * time.Second); code != 1008 || text != "credentials no longer valid" {
			t.Fatalf("cy's stream closed with %d %q", code, text)
		}
		s1.Must(200, "PATCH", "/machines/"+m.Uuid, jsonPatch("replace", "/Description", "d4"), adm)
		watch.next(5*time.Second, "the admin's update", func(e wsEvent) bool {
			return is("machines", "update", m.Uuid)(e) && e.obj(t)["Description"] == "d4"
		})
		bob.none(500*time.Millisecond, "an update after losing the role on the other server", is("machines", "update", m.Uuid))
	})
}
