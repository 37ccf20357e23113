package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/provgate/provgate/backend/store"
)

// TestE2EPenPlugins replays the penetration-test findings against the
// callback plugin and the event bus through the real server: each subtest
// sends the attacker's requests and checks that the server refuses them or
// that they have no effect.
func TestE2EPenPlugins(t *testing.T) {
	t.Parallel()
	execDir := t.TempDir()
	ran := filepath.Join(t.TempDir(), "exec-auth-ran")
	// The exec auth leaves a trace each time it runs, so that a test can
	// tell that it did not run at all.
	script := filepath.Join(execDir, "auth.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho ran >> '"+ran+"'\necho '"+penExecOutput+"'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(t.TempDir(), "outside.sh")
	if err := os.WriteFile(outside, []byte("#!/bin/sh\necho outside\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	forEachDB(t, func(t *testing.T, s *tserver) {
		t.Run("finding_6_posted_events_drive_nothing", func(t *testing.T) { penPostedEvents(t, s.On(t)) })
		t.Run("finding_10_param_expand_is_restricted", func(t *testing.T) { penParamExpand(t, s.On(t), script, ran) })
		t.Run("finding_12_attempts_follow_machine_visibility", func(t *testing.T) { penAttempts(t, s.On(t)) })
		t.Run("finding_18_callback_secrets_need_getSecure", func(t *testing.T) { penCallbackSecrets(t, s.On(t)) })
		t.Run("finding_20_exec_path_errors_are_one_message", func(t *testing.T) { penExecPaths(t, s.On(t), execDir, outside) })
	}, append(append(licenseArgs(t), "--callback-exec-dir", execDir), receiverArgs...)...)
	t.Run("finding_18_older_data_dirs_are_sealed_on_start", penSealOnUpgrade)
}

const penExecOutput = "pen-exec-auth-output-5e2b"

// penAttemptsOf lists a plugin's attempts as authz sees them.
func penAttemptsOf(t *testing.T, s *tserver, plugin, query, authz string) []map[string]any {
	t.Helper()
	var at []map[string]any
	s.Must(200, "GET", "/plugins/"+plugin+"/attempts"+query, nil, authz).JSON(t, &at)
	return at
}

// penPostedEvents: an event posted by a client is a notification only. A
// made-up failed job naming another user's machine must not queue a
// jobfail delivery, and a made-up change of a machine must not end a long
// poll on it.
func penPostedEvents(t *testing.T, s *tserver) {
	rc := newReceiver(t)
	mkPlugin(t, s, "pen6-cb", map[string]any{"jobfail": map[string]any{"Url": rc.URL + "/jobfail"}}, nil)
	victim := s.On(t).AddMachine("pen6-victim", nil)
	own := s.On(t).AddMachine("pen6-own", nil)
	s.AddRole("pen6-role", [3]string{"events", "post", "*"}, [3]string{"machines", "get,list", "*"})
	s.AddUser("pen6-att", "pen6-att-pw", "pen6-role")
	s.Must(201, "POST", "/tenants", map[string]any{"Name": "pen6-t", "Users": []string{"pen6-att"},
		"Members": map[string][]string{"machines": {own}}}, admin())
	att := basic("pen6-att", "pen6-att-pw")
	// The attacker cannot even see the machine it names.
	s.Must(404, "GET", "/machines/"+victim, nil, att)

	const fakeJob = "6f1e2d3c-aaaa-4bbb-8ccc-000000000006"
	job := func(state string) map[string]any {
		return map[string]any{"Uuid": fakeJob, "Machine": victim, "Task": "pen6-task", "Stage": "pen6-stage",
			"State": state, "ExitState": state, "Current": true}
	}
	for _, ev := range []map[string]any{
		{"Type": "jobs", "Action": "create", "Key": fakeJob, "Object": job("failed")},
		{"Type": "jobs", "Action": "update", "Key": fakeJob, "Object": job("failed"), "Original": job("running")},
		{"Type": "jobs", "Action": "save", "Key": fakeJob, "Object": job("failed")},
	} {
		// A made-up change of a stored object is refused outright
		// (TestE2EPenGuards/posted_events_never_pass_for_store_changes) ...
		s.Must(422, "POST", "/events", ev, att)
	}
	// ... and a notification naming the job queues nothing either.
	s.Must(200, "POST", "/events", map[string]any{"Type": "jobs", "Action": "failed", "Key": fakeJob, "Object": job("failed")}, att)
	// A whole worker round after the post has queued nothing to send.
	s.WorkerRounds(t)
	if hits := rc.on("/jobfail"); len(hits) != 0 {
		t.Fatalf("a posted event sent %d jobfail requests, the first with body %s", len(hits), hits[0].Body)
	}
	if at := penAttemptsOf(t, s, "pen6-cb", "", admin()); len(at) != 0 {
		t.Fatalf("a posted event caused jobfail attempts: %v", at)
	}

	// A real failure still sends exactly one delivery, for its own machine:
	// the plugin and the worker do work.
	failing := jobMachine(t, s, "pen6-real")
	failJob(t, s, failing)
	rc.waitFor(t, "/jobfail", 1, 10*time.Second)
	s.WorkerRounds(t)
	hits := rc.on("/jobfail")
	if len(hits) != 1 || !strings.Contains(string(hits[0].Body), failing) {
		t.Fatalf("after one real failure: %d jobfail requests", len(hits))
	}
	for _, h := range hits {
		if strings.Contains(string(h.Body), victim) || h.Header.Get("X-Provgate-Job") == fakeJob {
			t.Fatalf("a jobfail delivery carries the attacker's made-up job: %s", h.Body)
		}
	}
	if at := penAttemptsOf(t, s, "pen6-cb", "?machine="+victim, admin()); len(at) != 0 {
		t.Fatalf("attempts for the victim machine: %v", at)
	}

	// A long poll on the victim machine is not ended by posted events that
	// name it: it answers 304 when its wait is over.
	r := s.Must(200, "GET", "/machines/"+victim, nil, admin())
	etag := r.Header.Get("ETag")
	if etag == "" {
		t.Fatal("no ETag")
	}
	done := s.Go("GET", "/machines/"+victim, nil, admin(), "If-None-Match", etag, "Prefer", "wait=3s")
	time.Sleep(300 * time.Millisecond)
	for _, action := range []string{"update", "save", "delete"} {
		s.Must(422, "POST", "/events", map[string]any{"Type": "machines", "Action": action, "Key": victim,
			"Object": map[string]any{"Uuid": victim, "Name": "pen6-victim", "Description": "changed"}}, att)
	}
	s.Must(200, "POST", "/events", map[string]any{"Type": "machines", "Action": "changed", "Key": victim,
		"Object": map[string]any{"Uuid": victim, "Name": "pen6-victim", "Description": "changed"}}, att)
	p := await(t, done, 30*time.Second, "the long poll")
	if p.Status != http.StatusNotModified || p.Took < 2800*time.Millisecond {
		t.Fatalf("long poll answered %d after %s; want 304 after its 3s wait", p.Status, p.Took)
	}
}

// penParamExpand: a machine param is written by whoever may update the
// machine, so .ParamExpand renders it with the caller's restricted
// functions even inside a configuration template: it cannot run an exec
// auth through GetAuthString.
func penParamExpand(t *testing.T, s *tserver, script, ran string) {
	rc := newReceiver(t)
	p := mkPlugin(t, s, "pen10-cb", map[string]any{"pe": map[string]any{"Url": rc.URL + `/pe/{{.ParamExpand "x"}}`}},
		map[string]any{"a": map[string]any{"AuthType": "exec", "Path": script}})
	if p["Available"] != true {
		t.Fatalf("plugin not available: %v", p["Errors"])
	}
	// Control: ParamExpand still renders a param that uses ordinary
	// functions.
	ok := s.On(t).AddMachine("pen10-ok", map[string]any{"Params": map[string]any{"x": "{{.Machine.Name}}"}})
	s.Must(200, "POST", "/machines/"+ok+"/actions/callbackDo?plugin=pen10-cb", map[string]any{"callback/action": "pe"}, admin())
	if hits := rc.on("/pe/pen10-ok"); len(hits) != 1 {
		t.Fatalf("ParamExpand control: %d requests to /pe/pen10-ok", len(hits))
	}

	for i, tmpl := range []string{`{{.GetAuthString "a"}}`, `{{GetAuthString "a"}}`, `{{with .}}{{.GetAuthString "a"}}{{end}}`} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			_ = os.Remove(ran)
			m := s.On(t).AddMachine(fmt.Sprintf("pen10-m%d", i), map[string]any{"Params": map[string]any{"x": tmpl}})
			before := rc.count()
			r := runCallback(s, m, "pen10-cb", map[string]any{"callback/action": "pe"})
			e := wantDRPError(t, r, 409, "", "")
			if _, err := os.Stat(ran); err == nil {
				t.Fatalf("the exec auth ran for a param template %s", tmpl)
			}
			if strings.Contains(string(r.Body), penExecOutput) || strings.Contains(e.messages(), penExecOutput) {
				t.Fatalf("the reply carries the exec auth's output: %s", r.Body)
			}
			if n := rc.count() - before; n != 0 {
				t.Fatalf("the callback was sent %d times", n)
			}
			for _, a := range penAttemptsOf(t, s, "pen10-cb", "", admin()) {
				if strings.Contains(fmt.Sprint(a), penExecOutput) {
					t.Fatalf("an attempt carries the exec auth's output: %v", a)
				}
			}
		})
	}
}

// penAttempts: a plugin's attempts name machines; a caller sees only the
// attempts of machines it may see, and a hidden machine looks like one with
// no attempts.
func penAttempts(t *testing.T, s *tserver) {
	rc := newReceiver(t)
	mkPlugin(t, s, "pen12-cb", map[string]any{"hook": map[string]any{"Url": rc.URL + "/hook12"}}, nil)
	seen := s.On(t).AddMachine("pen12-seen", nil)
	hidden := s.On(t).AddMachine("pen12-hidden", nil)
	s.AddRole("pen12-role", [3]string{"plugins", "get,list", "*"}, [3]string{"machines", "get,list", "*"})
	s.AddUser("pen12-u", "pen12-u-pw", "pen12-role")
	s.Must(201, "POST", "/tenants", map[string]any{"Name": "pen12-t", "Users": []string{"pen12-u"},
		"Members": map[string][]string{"machines": {seen}}}, admin())
	u := basic("pen12-u", "pen12-u-pw")
	s.Must(404, "GET", "/machines/"+hidden, nil, u)

	// The hidden machine's attempts are the newest.
	for _, m := range []string{seen, hidden, hidden} {
		s.Must(200, "POST", "/machines/"+m+"/actions/callbackDo?plugin=pen12-cb", map[string]any{"callback/action": "hook"}, admin())
	}
	machinesOf := func(at []map[string]any) map[string]int {
		out := map[string]int{}
		for _, a := range at {
			out[fmt.Sprint(a["Machine"])]++
		}
		return out
	}
	if got := machinesOf(penAttemptsOf(t, s, "pen12-cb", "", admin())); got[seen] != 1 || got[hidden] != 2 {
		t.Fatalf("admin sees attempts %v; want 1 for %s and 2 for %s", got, seen, hidden)
	}
	cases := []struct {
		name, query string
		want        int // attempts, all of the visible machine
	}{
		{"all", "", 1},
		{"limit_1", "?limit=1", 1},
		{"visible_machine", "?machine=" + seen, 1},
		{"hidden_machine", "?machine=" + hidden, 0},
		{"hidden_machine_limit", "?machine=" + hidden + "&limit=5", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			at := penAttemptsOf(t, s, "pen12-cb", c.query, u)
			got := machinesOf(at)
			if len(at) != c.want || got[hidden] != 0 || (c.want > 0 && got[seen] != c.want) {
				t.Fatalf("tenant user sees attempts %v; want %d, all for %s", got, c.want, seen)
			}
		})
	}
}

// penCallbackSecrets: configured header values are secrets like auth
// passwords, and what callbackDo returns never carries a secure value the
// caller could not read itself.
func penCallbackSecrets(t *testing.T, s *tserver) {
	const (
		apiKey  = "pen18-api-key-9c41"
		basicPW = "pen18-basic-pw-77d0"
		secret  = "pen18-machine-secret-3a5f"
	)
	rc := newReceiver(t)
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		switch r.URL.Path {
		case "/body":
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(b)
		case "/body500":
			w.WriteHeader(500)
			_, _ = w.Write(b)
		case "/headers":
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(r.Header)
		}
	}))
	t.Cleanup(echo.Close)

	s.Must(201, "POST", "/params", map[string]any{"Name": "pen18/sec", "Secure": true, "Schema": map[string]any{"type": "string"}}, admin())
	m := s.On(t).AddMachine("pen18-m", nil)
	s.Must(200, "PUT", "/machines/"+m+"/params/pen18/sec", `"`+secret+`"`, admin())
	mkPlugin(t, s, "pen18-cb", map[string]any{
		"keyed":        map[string]any{"Url": rc.URL + "/keyed", "Headers": map[string]any{"X-Api-Key": apiKey}},
		"echo-json":    map[string]any{"Url": echo.URL + "/body", "Decode": true, "JsonResponse": true},
		"echo-string":  map[string]any{"Url": echo.URL + "/body", "Decode": true, "StringResponse": true},
		"echo-base64":  map[string]any{"Url": echo.URL + "/body", "Decode": true},
		"echo-500":     map[string]any{"Url": echo.URL + "/body500", "Decode": true},
		"echo-headers": map[string]any{"Url": echo.URL + "/headers", "Auth": "b", "Headers": map[string]any{"X-Api-Key": apiKey}, "JsonResponse": true},
	}, map[string]any{"b": map[string]any{"AuthType": "basic", "Username": "pen18-user", "Password": basicPW}})
	basicTok := base64.StdEncoding.EncodeToString([]byte("pen18-user:" + basicPW))

	s.AddRole("pen18-reader", [3]string{"plugins", "get,list", "*"})
	s.AddRole("pen18-writer", [3]string{"plugins", "get,update:/Description", "*"})
	s.AddRole("pen18-op", [3]string{"machines", "get,action:callbackDo", "*"}, [3]string{"plugins", "get,list", "*"})
	s.AddRole("pen18-msec", [3]string{"machines", "get,getSecure,action:callbackDo", "*"}, [3]string{"plugins", "get,list", "*"})
	s.AddUser("pen18-r", "pen18-r-pw", "pen18-reader")
	s.AddUser("pen18-w", "pen18-w-pw", "pen18-writer")
	s.AddUser("pen18-o", "pen18-o-pw", "pen18-op")
	s.AddUser("pen18-ms", "pen18-ms-pw", "pen18-msec")
	reader, writer := basic("pen18-r", "pen18-r-pw"), basic("pen18-w", "pen18-w-pw")
	op, msec := basic("pen18-o", "pen18-o-pw"), basic("pen18-ms", "pen18-ms-pw")

	noSecret := func(t *testing.T, what string, body []byte, secrets ...string) {
		t.Helper()
		for _, sec := range secrets {
			if strings.Contains(string(body), sec) {
				t.Fatalf("%s reveals %q: %s", what, sec, body)
			}
		}
	}

	t.Run("plugin_reads_mask_headers", func(t *testing.T) {
		s := s.On(t)
		reads := []string{"/plugins/pen18-cb", "/plugins", "/plugins?Name=pen18-cb", "/plugins/pen18-cb/params",
			"/plugins/pen18-cb/params/callback/callbacks"}
		for _, path := range reads {
			for who, authz := range map[string]string{"reader": reader, "admin": admin()} {
				r := s.Must(200, "GET", path, nil, authz)
				noSecret(t, who+" GET "+path, r.Body, apiKey, basicPW)
			}
			// Decoding needs getSecure ...
			sep := "?"
			if strings.Contains(path, "?") {
				sep = "&"
			}
			s.Must(403, "GET", path+sep+"decode=true", nil, reader)
			// ... which shows the value to those who hold it.
			if r := s.Must(200, "GET", path+sep+"decode=true", nil, admin()); !strings.Contains(string(r.Body), apiKey) {
				t.Fatalf("admin GET %s?decode=true lacks the header value: %s", path, r.Body)
			}
		}
		r := s.Must(200, "PATCH", "/plugins/pen18-cb", jsonPatch("replace", "/Description", "patched"), writer)
		noSecret(t, "PATCH reply", r.Body, apiKey, basicPW)
		// The header is still sent as configured.
		s.Must(200, "POST", "/machines/"+m+"/actions/callbackDo?plugin=pen18-cb", map[string]any{"callback/action": "keyed"}, admin())
		if hits := rc.on("/keyed"); len(hits) != 1 || hits[0].Header.Get("X-Api-Key") != apiKey {
			t.Fatalf("the configured header was not sent: %v", hits)
		}
	})

	run := func(t *testing.T, authz, action string, extra map[string]any) resp {
		t.Helper()
		body := map[string]any{"callback/action": action}
		for k, v := range extra {
			body[k] = v
		}
		return s.Do("POST", "/machines/"+m+"/actions/callbackDo?plugin=pen18-cb", body, authz)
	}
	// reply returns everything a caller reads from a reply, base64 decoded.
	reply := func(t *testing.T, r resp) []byte {
		t.Helper()
		var str string
		if json.Unmarshal(r.Body, &str) == nil {
			if b, err := base64.StdEncoding.DecodeString(str); err == nil {
				return append(append([]byte{}, r.Body...), b...)
			}
		}
		return r.Body
	}

	t.Run("replies_without_getSecure_are_redacted", func(t *testing.T) {
		override := map[string]any{"callback/data-override": `{"echoed":"{{.Param "pen18/sec"}}"}`}
		for _, c := range []struct {
			name, action string
			extra        map[string]any
			status       int
		}{
			{"json", "echo-json", nil, 200},
			{"string", "echo-string", nil, 200},
			{"base64", "echo-base64", nil, 200},
			{"decoded_param_in_override", "echo-string", override, 200},
			// Error excerpts never carry secure values, whoever asks.
			{"error_excerpt", "echo-500", nil, 503},
		} {
			t.Run(c.name, func(t *testing.T) {
				r := run(t, op, c.action, c.extra)
				if r.Status != c.status {
					t.Fatalf("callbackDo: %s, want %d", r, c.status)
				}
				noSecret(t, "callbackDo "+c.action, reply(t, r), secret)
				if c.status >= 400 {
					if r := run(t, admin(), c.action, c.extra); r.Status != c.status || strings.Contains(string(r.Body), secret) {
						t.Fatalf("admin error reply of %s: %s", c.action, r)
					}
					return
				}
				// The value did travel (the callback decodes): a caller
				// holding getSecure reads it.
				if r := run(t, admin(), c.action, c.extra); !strings.Contains(string(reply(t, r)), secret) {
					t.Fatalf("admin reply of %s lacks the decoded value: %s", c.action, r)
				}
			})
		}
		t.Run("plugin_secrets", func(t *testing.T) {
			for who, authz := range map[string]string{"operator": op, "machine getSecure only": msec} {
				r := run(t, authz, "echo-headers", nil)
				if r.Status != 200 {
					t.Fatalf("%s: %s", who, r)
				}
				noSecret(t, who+" echo of the request headers", r.Body, apiKey, basicTok, basicPW)
			}
			if r := run(t, admin(), "echo-headers", nil); !strings.Contains(string(r.Body), apiKey) {
				t.Fatalf("admin echo lacks the header value: %s", r)
			}
		})
		t.Run("machine_getSecure_reads_its_values", func(t *testing.T) {
			if r := run(t, msec, "echo-json", nil); r.Status != 200 || !strings.Contains(string(r.Body), secret) {
				t.Fatalf("a caller with machines getSecure: %s", r)
			}
		})
	})
}

// penExecPaths: whatever is wrong with an exec auth's Path, the message is
// the same, so plugin Errors and action errors are no oracle on the
// server's file system.
func penExecPaths(t *testing.T, s *tserver, execDir, outside string) {
	sub := filepath.Join(execDir, "pen20-dir")
	plain := filepath.Join(execDir, "pen20-plain.txt")
	escape := filepath.Join(execDir, "pen20-escape.sh")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(plain, []byte("not a program\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, escape); err != nil && !os.IsExist(err) {
		t.Fatal(err)
	}
	paths := []struct{ name, path string }{
		{"missing_inside", filepath.Join(execDir, "pen20-missing.sh")},
		{"missing_outside", "/nonexistent-pen20/x.sh"},
		{"existing_outside", outside},
		{"system_file", "/etc/passwd"},
		{"directory_inside", sub},
		{"not_executable_inside", plain},
		{"relative", "auth.sh"},
		{"dotdot", execDir + "/../" + filepath.Base(filepath.Dir(outside)) + "/" + filepath.Base(outside)},
		{"symlink_escape", escape},
	}
	m := s.On(t).AddMachine("pen20-m", nil)
	var wantErr, wantAction string
	for i, c := range paths {
		t.Run(c.name, func(t *testing.T) {
			name := fmt.Sprintf("pen20-%d", i)
			p := mkPlugin(t, s, name, map[string]any{"x": map[string]any{"Url": "http://127.0.0.1:1/x", "Auth": "ex"}},
				map[string]any{"ex": map[string]any{"AuthType": "exec", "Path": c.path}})
			if p["Available"] != false {
				t.Fatalf("Path %s accepted", c.path)
			}
			var mine []string
			for _, e := range p["Errors"].([]any) {
				if msg := fmt.Sprint(e); strings.HasPrefix(msg, `auth "ex"`) {
					mine = append(mine, msg)
				}
			}
			if len(mine) != 1 {
				t.Fatalf("Errors about the auth: %q", mine)
			}
			if strings.Contains(mine[0], c.path) {
				t.Fatalf("the message quotes the path: %s", mine[0])
			}
			if wantErr == "" {
				wantErr = mine[0]
			} else if mine[0] != wantErr {
				t.Fatalf("Path %s: %q; another bad path gave %q", c.path, mine[0], wantErr)
			}
			e := wantDRPError(t, runCallback(s, m, name, map[string]any{"callback/action": "x"}), 409, "", "")
			msgs := strings.ReplaceAll(e.messages(), name, "<plugin>")
			if wantAction == "" {
				wantAction = msgs
			} else if msgs != wantAction {
				t.Fatalf("Path %s: action error %q; another bad path gave %q", c.path, msgs, wantAction)
			}
		})
	}

	// At call time too: a program removed, or replaced by a link out of the
	// directory, after the plugin was saved.
	t.Run("at_call_time", func(t *testing.T) {
		var got []string
		for i, breakIt := range []func(path string) error{
			os.Remove,
			func(path string) error {
				if err := os.Remove(path); err != nil {
					return err
				}
				return os.Symlink(outside, path)
			},
		} {
			// One file per server: the directory is shared by the databases.
			path := filepath.Join(execDir, fmt.Sprintf("pen20-late-%s-%d.sh", s.Name, i))
			if err := os.WriteFile(path, []byte("#!/bin/sh\necho late\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			name := fmt.Sprintf("pen20-late-%d", i)
			p := mkPlugin(t, s, name, map[string]any{"x": map[string]any{"Url": "http://127.0.0.1:1/x", "Auth": "ex"}},
				map[string]any{"ex": map[string]any{"AuthType": "exec", "Path": path}})
			if p["Available"] != true {
				t.Fatalf("valid exec auth refused: %v", p["Errors"])
			}
			if err := breakIt(path); err != nil {
				t.Fatal(err)
			}
			r := runCallback(s, m, name, map[string]any{"callback/action": "x"})
			if r.Status < 400 {
				t.Fatalf("broken exec auth answered %s", r)
			}
			msgs := strings.ReplaceAll(wantDRPError(t, r, r.Status, "", "").messages(), name, "<plugin>")
			if strings.Contains(msgs, path) {
				t.Fatalf("the message quotes the path: %s", msgs)
			}
			got = append(got, msgs)
		}
		if got[0] != got[1] {
			t.Fatalf("a removed program gives %q, a link out of the directory %q", got[0], got[1])
		}
		if sentence := strings.TrimPrefix(wantErr, `auth "ex": `); !strings.Contains(got[0], sentence) {
			t.Fatalf("call-time message %q lacks the validation message %q", got[0], sentence)
		}
	})
}

// count is how many requests the receiver got, on any path.
func (rc *receiver) count() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.hits)
}

// penSealOnUpgrade: a data dir written before callback/callbacks was Secure
// holds the definition and the plugins' callbacks in the clear; the next
// start makes the definition Secure and seals the stored values, so header
// values stop being readable without getSecure.
func penSealOnUpgrade(t *testing.T) {
	const apiKey = "pen18-upgrade-key-2d9e"
	for _, db := range databases(t) {
		t.Run(db.Name, func(t *testing.T) {
			t.Parallel()
			rc := newReceiver(t)
			dir := t.TempDir()
			s := startE2EIn(t, db, dir, receiverArgs...)
			callbacks := map[string]any{"keyed": map[string]any{"Url": rc.URL + "/keyed", "Headers": map[string]any{"X-Api-Key": apiKey}}}
			mkPlugin(t, s, "pen18-old", callbacks, nil)
			m := s.On(t).AddMachine("pen18-old-m", nil)
			s.Stop()

			// Write what an older server stored: the definition not Secure,
			// the callbacks in the clear.
			dsn := db.DSN
			if dsn == "" {
				dsn = filepath.Join(dir, "provgate.db")
			}
			ctx := context.Background()
			st, err := store.Open(ctx, dsn, store.Options{})
			if err != nil {
				t.Fatal(err)
			}
			rewrite := func(prefix, key string, change func(map[string]any)) {
				rec, err := st.Get(ctx, prefix, key)
				if err != nil {
					t.Fatal(err)
				}
				var v map[string]any
				if err := json.Unmarshal(rec.Data, &v); err != nil {
					t.Fatal(err)
				}
				change(v)
				b, _ := json.Marshal(v)
				if _, err := st.Update(ctx, prefix, key, rec.Rev, b); err != nil {
					t.Fatal(err)
				}
			}
			rewrite("params", "callback/callbacks", func(v map[string]any) { v["Secure"] = false })
			rewrite("plugins", "pen18-old", func(v map[string]any) { v["Params"].(map[string]any)["callback/callbacks"] = callbacks })
			rec, _ := st.Get(ctx, "plugins", "pen18-old")
			if !strings.Contains(string(rec.Data), apiKey) {
				t.Fatalf("setup: the stored plugin is not in the clear: %s", rec.Data)
			}
			_ = st.Close()

			s = startE2EIn(t, db, dir, receiverArgs...)
			if r := s.Must(200, "GET", "/params/callback/callbacks", nil, admin()).Map(t); r["Secure"] != true {
				t.Fatalf("definition after the start: %v", r)
			}
			for _, path := range []string{"/plugins/pen18-old", "/plugins", "/plugins/pen18-old/params"} {
				if r := s.Must(200, "GET", path, nil, admin()); strings.Contains(string(r.Body), apiKey) {
					t.Fatalf("GET %s still shows the header value: %s", path, r.Body)
				}
			}
			if r := s.Must(200, "GET", "/plugins/pen18-old?decode=true", nil, admin()); !strings.Contains(string(r.Body), apiKey) {
				t.Fatalf("decoded plugin lacks the header value: %s", r.Body)
			}
			p := s.Must(200, "GET", "/plugins/pen18-old", nil, admin()).Map(t)
			if p["Available"] != true {
				t.Fatalf("plugin after sealing: %v", p["Errors"])
			}
			s.Must(200, "POST", "/machines/"+m+"/actions/callbackDo?plugin=pen18-old", map[string]any{"callback/action": "keyed"}, admin())
			if hits := rc.on("/keyed"); len(hits) != 1 || hits[0].Header.Get("X-Api-Key") != apiKey {
				t.Fatalf("the sealed callback did not send its header: %v", hits)
			}
		})
	}
}
