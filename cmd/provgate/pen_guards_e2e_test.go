package main

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestE2EPenGuards replays the second penetration test's findings that are
// not about granting (docs/reliability.md): authority a pool's action
// groups, a posted event, a callback destination or server-internal work
// could take without holding it. Each subtest sends the attacker's requests
// through the running server and checks that they are refused and change
// nothing.
//
// The server allows callbacks to 127.0.0.2 only (a receiver standing for
// an ordinary host), so that 127.0.0.1 shows the default refusal of the
// server's own loopback, and denies the documentation range 192.0.2.0/24.
func TestE2EPenGuards(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, s *tserver) {
		t.Run("pool_action_groups_need_the_callers_claims", func(t *testing.T) { penPoolGroups(t, s.On(t)) })
		t.Run("posted_events_never_pass_for_store_changes", func(t *testing.T) { penPostedStoreChanges(t, s.On(t)) })
		t.Run("callback_destinations_are_checked_when_dialed", func(t *testing.T) { penCallbackDestinations(t, s.On(t)) })
		t.Run("internal_work_declares_system_access", func(t *testing.T) { penSystemWork(t, s.On(t)) })
	}, append(licenseArgs(t), "--callback-allow", "127.0.0.2/32", "--callback-deny", "192.0.2.0/24")...)
}

// machineJSON is a machine as the admin reads it, to prove that a refused
// operation changed nothing.
func machineJSON(t *testing.T, s *tserver, uuid string) string {
	t.Helper()
	return string(s.Must(200, "GET", "/machines/"+uuid, nil, admin()).Body)
}

// penPoolGroups: an operator who may move machines through pools and read
// machines, nothing more, cannot set params, profiles or a workflow on
// them through the action groups an administrator configured on a pool:
// each is 403 naming the claim a PATCH would need, and nothing changes
// (the machine stays in its pool). Given exactly those claims, the same
// operation works.
func penPoolGroups(t *testing.T, s *tserver) {
	adm := admin()
	mkWorkflow(t, s, "pg-wf", "pg-task")
	mkProfile(t, s, "pg-prof")
	s.Must(201, "POST", "/pools", map[string]any{"Id": "pg-enter",
		"EnterActions": map[string]any{"AddParameters": map[string]any{"pg/boot-args": "init=/bin/sh"}}}, adm)
	s.Must(201, "POST", "/pools", map[string]any{"Id": "pg-alloc",
		"AllocateActions": map[string]any{"Workflow": "pg-wf", "AddProfiles": []string{"pg-prof"}}}, adm)
	m1 := s.AddMachine("pg-m1", nil)
	m2 := s.AddMachine("pg-m2", map[string]any{"Pool": "pg-alloc"})
	s.AddRole("pg-mover", [3]string{"pools", "get,list,action:addMachines,action:removeMachines,action:allocateMachines,action:releaseMachines", "*"},
		[3]string{"machines", "get,list", "*"})
	s.AddUser("pg-att", "pg-att-pw-1", "pg-mover")
	att := basic("pg-att", "pg-att-pw-1")

	for _, tc := range []struct {
		path, machine, claim string
	}{
		{"/pools/pg-enter/addMachines", m1, "machines update:/Params/pg~1boot-args " + m1},
		{"/pools/pg-alloc/allocateMachines", m2, "machines update:/Profiles " + m2},
	} {
		before := machineJSON(t, s, tc.machine)
		r := s.Do("POST", tc.path, map[string]any{"pool/machine-list": []string{tc.machine}}, att)
		wantDRPError(t, r, http.StatusForbidden, "AUTH", "Requires: "+tc.claim).about(t, "machines", tc.machine)
		if after := machineJSON(t, s, tc.machine); after != before {
			t.Fatalf("%s was refused but changed the machine:\nbefore %s\nafter  %s", tc.path, before, after)
		}
	}
	// The workflow alone is named when the profile claim is held.
	s.AddRole("pg-profiles", [3]string{"machines", "update:/Profiles", "*"})
	s.Must(200, "PATCH", "/users/pg-att", jsonPatch("add", "/Roles/-", "pg-profiles"), adm)
	r := s.Do("POST", "/pools/pg-alloc/allocateMachines", map[string]any{"pool/machine-list": []string{m2}}, att)
	wantDRPError(t, r, http.StatusForbidden, "AUTH", "Requires: machines update:/Workflow "+m2)

	// What the operator could do by hand, it may do through the pools.
	s.AddRole("pg-editor", [3]string{"machines", "update:/Params/pg~1boot-args,update:/Workflow", "*"})
	s.Must(200, "PATCH", "/users/pg-att", jsonPatch("add", "/Roles/-", "pg-editor"), adm)
	poolOp(t, s, att, "/pools/pg-enter/addMachines", map[string]any{"pool/machine-list": []string{m1}})
	var got struct {
		Pool     string
		Params   map[string]any
		Workflow string
		Profiles []string
	}
	s.Must(200, "GET", "/machines/"+m1, nil, adm).JSON(t, &got)
	if got.Pool != "pg-enter" || got.Params["pg/boot-args"] != "init=/bin/sh" {
		t.Fatalf("add with the claims: machine %+v", got)
	}
	poolOp(t, s, att, "/pools/pg-alloc/allocateMachines", map[string]any{"pool/machine-list": []string{m2}})
	s.Must(200, "GET", "/machines/"+m2, nil, adm).JSON(t, &got)
	if got.Workflow != "pg-wf" || len(got.Profiles) != 1 || got.Profiles[0] != "pg-prof" {
		t.Fatalf("allocate with the claims: machine %+v", got)
	}
}

// penPostedStoreChanges: a client holding "events post" cannot make up a
// change of a stored object: a forged "machines update" with
// WorkflowComplete true (and every store action on stored kinds, in any
// case) is 422 and reaches no stream: not the admin's, not the machine's
// agent, not a "drpcli machines wait" on it. Other posted events that name
// an object reach only the subscribers who may see that object, whatever
// the case of their Type.
func penPostedStoreChanges(t *testing.T, s *tserver) {
	adm := admin()
	victim, agent := evMachineToken(t, s, "pe-victim", nil)
	own := s.AddMachine("pe-own", nil)
	s.AddRole("pe-poster", [3]string{"events", "post,list", "*"}, [3]string{"machines", "get,list", "*"})
	s.AddUser("pe-att", "pe-att-pw-1", "pe-poster")
	s.Must(201, "POST", "/tenants", map[string]any{"Name": "pe-t", "Users": []string{"pe-att"},
		"Members": map[string][]string{"machines": {own}}}, adm)
	att := basic("pe-att", "pe-att-pw-1")
	s.Must(404, "GET", "/machines/"+victim, nil, att)

	root := s.mustWS(t, adm)
	root.register("*.*.*")
	agentWS := s.mustWS(t, agent)
	agentWS.register("machines.*." + victim)
	wait := s.mustWS(t, adm) // what "drpcli machines wait <uuid> WorkflowComplete true" listens to
	wait.register("machines.update." + victim)
	wait.register("machines.save." + victim)
	watcher := s.mustWS(t, att) // the attacker's own stream: tenant pe-t, events list
	watcher.register("*.*.*")

	forged := map[string]any{"Uuid": victim, "Name": "pe-victim", "WorkflowComplete": true, "Stage": "complete",
		"CurrentTask": -1, "Runnable": true}
	for _, typ := range []string{"machines", "Machines", " MACHINES", "jobs", "profiles"} {
		for _, action := range []string{"create", "save", "update", "delete", "Update"} {
			r := s.Do("POST", "/events", map[string]any{"Type": typ, "Action": action, "Key": victim,
				"Object": forged, "Original": map[string]any{"Uuid": victim, "WorkflowComplete": false}}, att)
			wantDRPError(t, r, http.StatusUnprocessableEntity, "ValidationError", "only the server reports changes of stored objects")
		}
	}
	// Events that change nothing are notifications: "Machines note" names
	// the victim, which the attacker's tenant hides.
	s.Must(200, "POST", "/events", map[string]any{"Type": "Machines", "Action": "note", "Key": victim}, att)
	s.Must(200, "POST", "/events", map[string]any{"Type": "machines", "Action": "note", "Key": own}, att)

	s.Must(200, "PATCH", "/machines/"+victim, jsonPatch("replace", "/Description", "pe-sentinel"), adm)
	sentinel := func(e wsEvent) bool {
		return is("machines", "update", victim)(e) && strings.Contains(string(e.Object), "pe-sentinel")
	}
	posted := func(e wsEvent) bool { return e.Principal == "user:pe-att" }
	forgedChange := func(e wsEvent) bool {
		return posted(e) && e.Action != "note"
	}
	for name, c := range map[string]*wsClient{"admin": root, "agent": agentWS, "machines wait": wait} {
		c.t = t
		c.next(10*time.Second, name+"'s real change", sentinel)
		c.none(100*time.Millisecond, name+" a forged store change", forgedChange)
	}
	// The admin sees both notes, the victim's as a machines event.
	root.next(time.Second, "the note on the victim", func(e wsEvent) bool { return posted(e) && e.Type == "machines" && e.Key == victim })
	root.next(time.Second, "the note on its own machine", func(e wsEvent) bool { return posted(e) && e.Key == own })
	// The attacker's stream sees the note on its own machine, never the
	// one naming the hidden victim.
	watcher.t = t
	watcher.next(10*time.Second, "the note on its own machine", func(e wsEvent) bool { return posted(e) && e.Key == own })
	watcher.none(100*time.Millisecond, "the note naming a hidden machine", func(e wsEvent) bool { return e.Key == victim })

}

// penCallbackDestinations: a plugin writer cannot point a callback, a
// redirect or a token request at the server's own loopback, at the cloud
// metadata address or at a denied range. The refusal happens when the
// connection is dialed, after name resolution and for every redirect, is
// not retried, names the address and the flag that allows it, and is
// recorded in the attempts. The allowed receiver works.
func penCallbackDestinations(t *testing.T, s *tserver) {
	loop := newReceiver(t)              // 127.0.0.1: the server's own host
	ok := newReceiverOn(t, "127.0.0.2") // allowed by --callback-allow
	_, lport, _ := net.SplitHostPort(loop.Listener.Addr().String())
	redirect := func(to string) func(w http.ResponseWriter, r *http.Request) bool {
		return func(w http.ResponseWriter, r *http.Request) bool {
			http.Redirect(w, r, to, http.StatusFound)
			return false
		}
	}
	ok.handle("/to-loop", redirect(loop.URL+"/hook"))
	ok.handle("/to-name", redirect("http://localhost:"+lport+"/hook"))
	ok.handle("/to-metadata", redirect("http://169.254.169.254/latest/meta-data/iam/security-credentials/"))
	cb := func(url string) map[string]any { return map[string]any{"Url": url, "Timeout": 5, "Retry": 2} }
	mkPlugin(t, s, "dest-cb", map[string]any{
		"loop":              cb(loop.URL + "/hook"),
		"name":              cb("http://localhost:" + lport + "/hook"),
		"mapped":            cb("http://[::ffff:127.0.0.1]:" + lport + "/hook"),
		"unspecified":       cb("http://0.0.0.0:" + lport + "/hook"),
		"metadata":          cb("http://169.254.169.254/latest/meta-data/iam/security-credentials/"),
		"denied":            cb("http://192.0.2.10/hook"),
		"redirect-loop":     cb(ok.URL + "/to-loop"),
		"redirect-name":     cb(ok.URL + "/to-name"),
		"redirect-metadata": cb(ok.URL + "/to-metadata"),
		"token":             map[string]any{"Url": ok.URL + "/hook", "Auth": "jt", "Timeout": 5},
		"allowed":           cb(ok.URL + "/hook"),
	}, map[string]any{"jt": map[string]any{"AuthType": "json-token", "Url": loop.URL + "/token", "TokenField": "access_token"}})
	m := s.AddMachine("dest-m", nil)
	for action, want := range map[string]string{
		"loop":              "destination 127.0.0.1 refused: a loopback address; allow it with --callback-allow",
		"name":              "refused: a loopback address",
		"mapped":            "destination 127.0.0.1 refused",
		"unspecified":       "destination 0.0.0.0 refused: an unspecified address",
		"metadata":          "destination 169.254.169.254 refused: a link-local address (cloud instance metadata)",
		"denied":            "destination 192.0.2.10 refused: denied by --callback-deny 192.0.2.0/24",
		"redirect-loop":     "destination 127.0.0.1 refused",
		"redirect-name":     "refused: a loopback address",
		"redirect-metadata": "destination 169.254.169.254 refused",
	} {
		r := runCallback(s, m, "dest-cb", map[string]any{"callback/action": action})
		wantDRPError(t, r, http.StatusConflict, "INVOKE", want)
	}
	r := runCallback(s, m, "dest-cb", map[string]any{"callback/action": "token"})
	wantDRPError(t, r, http.StatusServiceUnavailable, "INVOKE", "token request destination 127.0.0.1 refused")
	if hits := len(loop.on("/hook")) + len(loop.on("/token")); hits != 0 {
		t.Fatalf("the server's own loopback received %d requests", hits)
	}
	// Refused destinations are not retried: one attempt each, naming the
	// refusal.
	var at []struct{ Callback, Error string }
	s.Must(200, "GET", "/plugins/dest-cb/attempts?machine="+m, nil, admin()).JSON(t, &at)
	per := map[string]int{}
	for _, a := range at {
		per[a.Callback]++
		if a.Callback != "allowed" && a.Callback != "token" && !strings.Contains(a.Error, "refused") {
			t.Errorf("attempt of %s records %q, want the refusal", a.Callback, a.Error)
		}
	}
	for _, c := range []string{"loop", "metadata", "denied", "redirect-loop"} {
		if per[c] != 1 {
			t.Errorf("%s: %d attempts, want 1 (a refusal is not retried)", c, per[c])
		}
	}
	s.Must(200, "POST", "/machines/"+m+"/actions/callbackDo?plugin=dest-cb", map[string]any{"callback/action": "allowed"}, admin())
	if n := len(ok.on("/hook")); n != 1 {
		t.Fatalf("the allowed receiver got %d requests, want 1", n)
	}
}

// penSystemWork: with every object check refusing a context that declares
// no access, the server's own work still runs: it started (bootstrap,
// built-in content), a failed job's jobfail delivery is made by the
// background worker, and nothing logged a check without a declaration.
func penSystemWork(t *testing.T, s *tserver) {
	rc := newReceiverOn(t, "127.0.0.2")
	jobfailPlugin(t, s, rc)
	u := jobMachine(t, s, "sys-jf")
	failJob(t, s, u)
	hits := rc.waitFor(t, "/jobfail", 1, 20*time.Second)
	if !strings.Contains(string(hits[0].Body), u) {
		t.Fatalf("jobfail delivery %s does not name the machine", hits[0].Body)
	}
	if strings.Contains(s.Stderr.String(), "no access declared") {
		t.Fatalf("a check ran without a declared access:\n%s", reloadLogTail(s.Stderr.String(), 3000))
	}
}

// TestE2EPenBundles: a policy bundle read over plain http can be read and
// replaced on the way, so it is refused unless the operator opts in; and a
// signed bundle older than the one served never activates, while the
// server runs or when it restarts (the sequence is kept in the store,
// shared by replicas), so replaying an old signed bundle cannot re-open
// what a newer one closed.
func TestE2EPenBundles(t *testing.T) {
	t.Parallel()
	priv, pub := e2eSigningKey(t)
	t.Run("plain_http_needs_opt_in", func(t *testing.T) {
		t.Parallel()
		var gets atomic.Int64
		srv := &etagServer{}
		srv.set(e2eBundle(t, "protected", "h1", priv, 1, false), `"h1"`)
		hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			gets.Add(1)
			srv.ServeHTTP(w, r)
		}))
		defer hs.Close()
		err := serveErr(t, dbCase{Name: "sqlite"}, t.TempDir(), "--policy-bundle", hs.URL+"/b.tar.gz", "--policy-bundle-public-key", pub)
		if err == nil || !strings.Contains(err.Error(), "--policy-bundle-allow-http") {
			t.Fatalf("start with a plain http bundle: %v", err)
		}
		if gets.Load() != 0 {
			t.Fatalf("the plain http bundle was fetched %d times", gets.Load())
		}
	})
	for _, db := range databases(t) {
		t.Run("older_signed_bundle_never_activates/"+db.Name, func(t *testing.T) {
			t.Parallel()
			srv := &etagServer{}
			// Sequence 2 protects machines whose Meta says so; sequence 1
			// (the freeze example) did not.
			srv.set(e2eBundle(t, "protected", "release-2", priv, 2, false), `"release-2"`)
			hs := httptest.NewServer(srv)
			defer hs.Close()
			dir := t.TempDir()
			args := []string{"--policy-bundle", hs.URL + "/bundles/provgate.tar.gz", "--policy-bundle-public-key", pub,
				"--policy-watch-interval", "100ms", "--policy-bundle-allow-http"}
			s := startE2EIn(t, db, dir, args...)
			if got := policyRevision(t, s); got != "release-2" {
				t.Fatalf("revision %q, want release-2", got)
			}
			var m struct{ Uuid string }
			s.Must(201, "POST", "/machines", map[string]any{"Name": "pb-db1", "Meta": map[string]string{"protected": "true"}}, admin()).JSON(t, &m)
			refusedWith(t, s.Do("DELETE", "/machines/"+m.Uuid, nil, admin()), "machine pb-db1 is protected")

			// The attacker replays the older signed bundle.
			refused := countLines(s.Stderr.String(), "policy reload failed")
			srv.set(e2eBundle(t, "freeze", "release-1", priv, 1, false), `"release-1-replayed"`)
			waitLog(t, s, refused, reloadLimit, "policy reload failed", "bundle sequence 1 is older than sequence 2")
			if got := policyRevision(t, s); got != "release-2" {
				t.Fatalf("revision %q after the replay, want release-2", got)
			}
			refusedWith(t, s.Do("DELETE", "/machines/"+m.Uuid, nil, admin()), "machine pb-db1 is protected")

			// A restart meets the replayed bundle: the server does not
			// start on it.
			s.Stop()
			err := serveErr(t, db, dir, args...)
			if err == nil || !strings.Contains(err.Error(), "bundle sequence 1 is older than sequence 2") {
				t.Fatalf("restart on the replayed bundle: %v", err)
			}
			// A newer signed bundle is served.
			srv.set(e2eBundle(t, "freeze", "release-3", priv, 3, false), `"release-3"`)
			s = startE2EIn(t, db, dir, args...)
			if got := policyRevision(t, s); got != "release-3" {
				t.Fatalf("revision %q, want release-3", got)
			}
			s.Must(200, "DELETE", "/machines/"+m.Uuid, nil, admin())
		})
	}
}

// serveErr runs the server with args on data dir dir and returns the error
// it stops with; a server that starts is stopped and fails the test.
func serveErr(t *testing.T, db dbCase, dir string, extra ...string) error {
	t.Helper()
	args := []string{"serve", "--data-dir", dir, "--listen", "127.0.0.1:0", "--shutdown-timeout", "5s"}
	if db.DSN != "" {
		args = append(args, "--database", db.DSN, "--database-conns", testDatabaseConns)
	}
	args = append(args, extra...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ready := make(chan string, 1)
	done := make(chan error, 1)
	getenv := func(k string) string {
		if k == "PROVGATE_ADMIN_PASSWORD" {
			return e2eAdminPassword
		}
		return ""
	}
	go func() {
		done <- runWith(ctx, args, getenv, &logBuffer{}, &logBuffer{}, hooks{ready: ready, compiled: e2eCompiled, scryptN: testScryptN})
	}()
	select {
	case err := <-done:
		return err
	case addr := <-ready:
		cancel()
		<-done
		t.Fatalf("the server started on %s", addr)
	}
	return nil
}
