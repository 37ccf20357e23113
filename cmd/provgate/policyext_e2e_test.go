package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Policy extensions end to end (docs/design.md §9.6, docs/policies.md): a
// --policy-dir holding only an extension package keeps the embedded policy
// and adds the extension's vetoes. The three stories of docs/policies.md
// run with the example files of testdata/policy/extensions.

// exampleExtension copies the example extension name into a fresh
// directory, which the test may then change under the running server.
func exampleExtension(t *testing.T, name string) string {
	t.Helper()
	src := filepath.Join("..", "..", "testdata", "policy", "extensions", name)
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		writeExtFile(t, dir, e.Name(), string(b))
	}
	return dir
}

// writeExtFile replaces one file atomically, as deployment tools do.
func writeExtFile(t *testing.T, dir, name, src string) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p+".tmp", []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(p+".tmp", p); err != nil {
		t.Fatal(err)
	}
}

// forEachDBWithExtension runs f on a fresh server for every database, each
// with its own copy of the example extension name as --policy-dir, as
// parallel subtests.
func forEachDBWithExtension(t *testing.T, name string, f func(t *testing.T, s *tserver, dir string), extraArgs ...string) {
	t.Helper()
	for _, db := range databases(t) {
		t.Run(db.Name, func(t *testing.T) {
			t.Parallel()
			dir := exampleExtension(t, name)
			s := startE2E(t, db, append([]string{"--policy-dir", dir, "--policy-watch-interval", "100ms"}, extraArgs...)...)
			f(t, s, dir)
		})
	}
}

// refusedWith fails unless r is a 403 DRP error (Type AUTH) with a message
// naming reason: an extension's veto.
func refusedWith(t *testing.T, r resp, reason string) {
	t.Helper()
	wantDRPError(t, r, http.StatusForbidden, "AUTH", reason)
}

// Story (a): nobody, not even the superuser, deletes a machine whose Meta
// has protected "true". The rule reads the machine as stored.
func TestE2EExtensionProtectedMachine(t *testing.T) {
	t.Parallel()
	forEachDBWithExtension(t, "protected", func(t *testing.T, s *tserver, _ string) {
		if !strings.Contains(s.Stderr.String(), `"mode":"extensions"`) {
			t.Fatalf("the directory was not taken as extensions:\n%s", reloadLogTail(s.Stderr.String(), 3000))
		}
		var m struct{ Uuid string }
		s.Must(201, "POST", "/machines", map[string]any{"Name": "db1", "Meta": map[string]string{"protected": "true"}}, admin()).JSON(t, &m)
		var other struct{ Uuid string }
		s.Must(201, "POST", "/machines", map[string]any{"Name": "scratch"}, admin()).JSON(t, &other)

		refusedWith(t, s.Do("DELETE", "/machines/"+m.Uuid, nil, admin()), "machine db1 is protected")
		refusedWith(t, s.Do("DELETE", "/machines/Name:db1", nil, admin()), "machine db1 is protected")
		// Reads and other writes of the machine are not the rule's business.
		s.Must(200, "GET", "/machines/"+m.Uuid, nil, admin())
		s.Must(200, "PATCH", "/machines/"+m.Uuid, []map[string]any{{"op": "replace", "path": "/Description", "value": "primary"}}, admin())
		// The embedded policy still decides the rest.
		s.Must(200, "DELETE", "/machines/"+other.Uuid, nil, admin())
		s.AddUser("nobody", "nobody-Pa55word")
		r := s.Do("DELETE", "/machines/"+m.Uuid, nil, basic("nobody", "nobody-Pa55word"))
		if r.Status != http.StatusForbidden || !strings.Contains(string(r.Body), "Requires: machines delete") {
			t.Fatalf("base refusal: %s", r)
		}
		// Unprotecting it is a change like any other; then it may go.
		s.Must(200, "PATCH", "/meta/machines/"+m.Uuid, []map[string]any{{"op": "replace", "path": "/protected", "value": "false"}}, admin())
		s.Must(200, "DELETE", "/machines/"+m.Uuid, nil, admin())
	})
}

// Story (b): a change freeze for one user, in data.json, without touching
// the core rules; lifting it is an edit of data.json that reloads.
func TestE2EExtensionChangeFreeze(t *testing.T) {
	t.Parallel()
	forEachDBWithExtension(t, "freeze", func(t *testing.T, s *tserver, dir string) {
		s.AddUser("carol", "carol-Pa55word", "superuser")
		s.AddUser("dave", "dave-Pa55word", "superuser")
		carol, dave := basic("carol", "carol-Pa55word"), basic("dave", "dave-Pa55word")
		var m struct{ Uuid string }
		s.Must(201, "POST", "/machines", map[string]any{"Name": "frozen-m1"}, admin()).JSON(t, &m)
		patch := []map[string]any{{"op": "replace", "path": "/Description", "value": "x"}}

		refusedWith(t, s.Do("PATCH", "/machines/"+m.Uuid, patch, carol), "change freeze for carol: release weekend, ask the on-call lead")
		refusedWith(t, s.Do("POST", "/machines", map[string]any{"Name": "carols"}, carol), "change freeze for carol")
		s.Must(200, "GET", "/machines/"+m.Uuid, nil, carol)
		s.Must(200, "PATCH", "/machines/"+m.Uuid, patch, dave)

		loaded := countLines(s.Stderr.String(), "policy loaded")
		writeExtFile(t, dir, "data.json", `{"freeze": {"users": ["dave"], "reason": "dave's turn"}}`)
		waitLog(t, s, loaded, reloadLimit, "policy loaded")
		s.Must(200, "PATCH", "/machines/"+m.Uuid, patch, carol)
		refusedWith(t, s.Do("PATCH", "/machines/"+m.Uuid, patch, dave), "change freeze for dave: dave's turn")
	})
}

// Story (c): users-scope changes need a token issued less than
// max_age_seconds ago (600 as shipped). The rule reads the token's iat and
// the clock, so its decisions are never cached.
func TestE2EExtensionFreshToken(t *testing.T) {
	t.Parallel()
	forEachDBWithExtension(t, "fresh_token", func(t *testing.T, s *tserver, dir string) {
		s.AddUser("alice", "alice-Pa55word", "superuser")
		s.AddUser("bob", "bob-Pa55word")
		minted := time.Now()
		tok := bearer(s.Token("alice", basic("alice", "alice-Pa55word"), ""))
		roles := []map[string]any{{"op": "replace", "path": "/Description", "value": "changed"}}
		// Freshly issued: allowed, reads too.
		s.Must(200, "PATCH", "/users/bob", roles, tok)
		s.Must(200, "GET", "/users/bob", nil, tok)

		// The window shrinks to one second; the same token, now older,
		// may still read but no longer change users. Other scopes are not
		// the rule's business, and Basic is always fresh.
		loaded := countLines(s.Stderr.String(), "policy loaded")
		writeExtFile(t, dir, "data.json", `{"fresh_token": {"max_age_seconds": 1}}`)
		waitLog(t, s, loaded, reloadLimit, "policy loaded")
		// Two seconds later on the server's clock, which the policy reads.
		if d := time.Until(minted.Add(2 * time.Second)); d > 0 {
			s.Clock.Advance(d)
		}
		refusedWith(t, s.Do("PATCH", "/users/bob", roles, tok), "users changes need a token issued less than 1 seconds ago")
		refusedWith(t, s.Do("POST", "/users", map[string]any{"Name": "eve", "Password": "eve-Pa55word"}, tok), "users changes need a token")
		s.Must(200, "GET", "/users/bob", nil, tok)
		s.Must(201, "POST", "/machines", map[string]any{"Name": "fresh-m1"}, tok)
		s.Must(200, "PATCH", "/users/bob", roles, basic("alice", "alice-Pa55word"))
	})
}

// A failing extension test keeps the running policy: the broken version
// would also refuse every read, and its test says so; the server logs the
// refusal, keeps the protected rule and serves reads.
func TestE2EExtensionFailingTestKeepsPolicy(t *testing.T) {
	t.Parallel()
	forEachDBWithExtension(t, "protected", func(t *testing.T, s *tserver, dir string) {
		var m struct{ Uuid string }
		s.Must(201, "POST", "/machines", map[string]any{"Name": "db2", "Meta": map[string]string{"protected": "true"}}, admin()).JSON(t, &m)
		refusedWith(t, s.Do("DELETE", "/machines/"+m.Uuid, nil, admin()), "machine db2 is protected")

		refused := countLines(s.Stderr.String(), "policy reload failed")
		writeExtFile(t, dir, "lockdown.rego", "package provgate.ext.lockdown\n\ndeny contains \"lockdown\" if input.method == \"GET\"\n")
		writeExtFile(t, dir, "lockdown_test.rego", "package provgate.ext.lockdown_test\n\nimport data.provgate.ext.lockdown\n\n"+
			"test_reads_allowed if count(lockdown.deny) == 0 with input as {\"method\": \"GET\"}\n")
		// Both files are in place before the reload: SIGHUP (the watcher's
		// interval is longer than the test) reloads once. It reaches this
		// server alone, through its own reload channel.
		s.Reload <- syscall.SIGHUP
		waitLog(t, s, refused, reloadLimit, "policy reload failed", "test_reads_allowed", `"trigger":"signal"`)
		s.Must(200, "GET", "/machines/"+m.Uuid, nil, admin())
		refusedWith(t, s.Do("DELETE", "/machines/"+m.Uuid, nil, admin()), "machine db2 is protected")
		if n := countLines(s.Stderr.String(), "policy reload failed"); n != 1 {
			t.Errorf("%d refused reloads logged, want 1", n)
		}
		if n := countLines(s.Stderr.String(), "policy loaded"); n != 1 {
			t.Errorf("%d policy loads logged, want the one at start", n)
		}
		// One refusal, one load (at start): the metric agrees with the log.
		metrics := string(s.DoURL(t, "GET", strings.TrimSuffix(s.Base, "/api/v3")+"/metrics", nil, "").Body)
		for _, want := range []string{`provgate_policy_reloads_total{result="loaded"} 1`, `provgate_policy_reloads_total{result="refused"} 1`} {
			if !strings.Contains(metrics, want) {
				t.Errorf("/metrics lacks %s", want)
			}
		}
	}, "--policy-watch-interval", "1h")
}

// A deadline rule is never served stale: the same request, allowed before
// the deadline, is refused from the deadline on, though policy, data and
// input are unchanged (docs/design.md §9.4). The assertions depend on the
// order of events only: an answer received before the deadline must be an
// allow, one requested after it a refusal.
func TestE2EExtensionDeadlineNeverStale(t *testing.T) {
	t.Parallel()
	for _, db := range databases(t) {
		t.Run(db.Name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			writeExtFile(t, dir, "deadline.rego", "package provgate.ext.deadline\n\n"+
				"deny contains \"writes closed at the deadline\" if time.now_ns() >= data.provgate_ext.deadline_ns\n")
			logFile := filepath.Join(t.TempDir(), "decisions.jsonl")
			s := startE2E(t, db, "--policy-dir", dir, "--policy-watch-interval", "100ms", "--decision-log", logFile)
			var m struct{ Uuid string }
			s.Must(201, "POST", "/machines", map[string]any{"Name": "deadline-m1"}, admin()).JSON(t, &m)
			tok := bearer(s.Token("rocketskates", admin(), ""))

			// The deadline is set once the server runs, far enough ahead for
			// several answers before it. Should the reload that brings it in
			// take most of that time (a loaded machine), a later deadline is
			// set instead; so too when the deadline passed while the reload
			// ran the policy's tests, which then fail (the rule refuses
			// everything) and keep the reload out.
			var deadline time.Time
			for _, ahead := range []time.Duration{8 * time.Second, 30 * time.Second, 90 * time.Second, 180 * time.Second} {
				deadline = time.Now().Add(ahead)
				loaded := countLines(s.Stderr.String(), "policy loaded")
				refused := countLines(s.Stderr.String(), "policy reload failed")
				writeExtFile(t, dir, "data.json", `{"deadline_ns": `+strconv.FormatInt(deadline.UnixNano(), 10)+`}`)
				if !waitLoadedOrRefused(t, s, loaded, refused, reloadLimit+ahead) {
					continue
				}
				if time.Until(deadline) > ahead/2 {
					break
				}
			}

			var before, after int
			for time.Now().Before(deadline.Add(2 * time.Second)) {
				sent := time.Now()
				st, b, err := s.rawDo("GET", "/machines/"+m.Uuid, tok)
				got := time.Now()
				if err != nil {
					t.Fatal(err)
				}
				switch {
				case got.Before(deadline):
					if st != http.StatusOK {
						t.Fatalf("answer before the deadline: %d %s", st, b)
					}
					before++
				case !sent.Before(deadline):
					if st != http.StatusForbidden || !strings.Contains(string(b), "writes closed at the deadline") {
						t.Fatalf("stale answer %s after the deadline: %d %s", sent.Sub(deadline), st, b)
					}
					after++
				}
				time.Sleep(50 * time.Millisecond)
			}
			t.Logf("%d identical requests answered before the deadline, %d after", before, after)
			if before < 2 || after == 0 {
				t.Fatalf("%d answers before the deadline and %d after: the test saw too little", before, after)
			}

			// The decision log agrees: none of these decisions came from the
			// cache, and each records the time the rule read.
			s.Stop()
			raw, err := os.ReadFile(logFile)
			if err != nil {
				t.Fatal(err)
			}
			var seen int
			for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
				var l struct {
					Cached bool
					Input  struct{ Path string }
					ND     map[string]any `json:"nd_builtin_cache"`
				}
				if err := json.Unmarshal([]byte(line), &l); err != nil {
					t.Fatal(err)
				}
				if l.Input.Path != "/api/v3/machines/"+m.Uuid {
					continue
				}
				seen++
				if l.Cached || l.ND["time.now_ns"] == nil {
					t.Errorf("a deadline decision was cached or did not record the time: %.300s", line)
				}
			}
			if seen < before+after {
				t.Errorf("%d decisions of the deadline request logged, want at least %d", seen, before+after)
			}
		})
	}
}

// The proposed object is the object as the write would leave it (a
// create's or PUT's body, a PATCH applied, a param set), and secure param
// values reach neither the policy nor the decision log: they are masked
// in the stored and in the proposed object alike.
func TestE2EExtensionProposedObjectMasked(t *testing.T) {
	t.Parallel()
	for _, db := range databases(t) {
		t.Run(db.Name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			writeExtFile(t, dir, "names.rego", `package provgate.ext.names

deny contains "machine descriptions may not say forbidden" if input.proposed.Description == "forbidden"

deny contains "passwords are masked" if is_string(input.proposed.Password)

deny contains "secure values are masked" if {
	some _, v in input.proposed.Params
	v != {"masked": true}
	v == "hunter2-secret-value"
}
`)
			logFile := filepath.Join(t.TempDir(), "decisions.jsonl")
			s := startE2E(t, db, "--policy-dir", dir, "--decision-log", logFile)
			s.Must(201, "POST", "/params", map[string]any{"Name": "vault-pw", "Secure": true}, admin())
			// A user's password in a create body is masked like a secure value.
			s.Must(201, "POST", "/users", map[string]any{"Name": "masked-u", "Password": "hunter2-user-password"}, admin())
			refusedWith(t, s.Do("POST", "/machines", map[string]any{"Name": "p1", "Description": "forbidden"}, admin()),
				"machine descriptions may not say forbidden")
			var m map[string]any
			s.Must(201, "POST", "/machines", map[string]any{"Name": "p1", "Description": "fine"}, admin()).JSON(t, &m)
			uuid, _ := m["Uuid"].(string)
			refusedWith(t, s.Do("PATCH", "/machines/"+uuid, []map[string]any{{"op": "replace", "path": "/Description", "value": "forbidden"}}, admin()),
				"machine descriptions may not say forbidden")
			m["Description"] = "forbidden"
			refusedWith(t, s.Do("PUT", "/machines/"+uuid, m, admin()), "machine descriptions may not say forbidden")
			m["Description"] = "still fine"
			s.Must(200, "PUT", "/machines/"+uuid, m, admin())

			// A secure param, set new and then replaced: its value is
			// masked in the proposed object, then in the stored one.
			s.Must(200, "POST", "/machines/"+uuid+"/params/vault-pw", `"hunter2-secret-value"`, admin())
			s.Must(200, "PUT", "/machines/"+uuid+"/params/vault-pw", `"hunter2-secret-value"`, admin())
			s.Must(200, "PATCH", "/machines/"+uuid, []map[string]any{{"op": "replace", "path": "/Description", "value": "after"}}, admin())
			s.Stop()

			b, err := os.ReadFile(logFile)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(b), "hunter2") {
				t.Fatalf("a secure value reached the decision log")
			}
			var masked int
			for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
				if strings.Contains(line, `"vault-pw":{"masked":true}`) {
					masked++
				}
			}
			// The two param writes (proposed) and the last patch (stored and
			// proposed).
			if masked < 3 {
				t.Fatalf("%d decision log lines show vault-pw masked, want at least 3:\n%s", masked, b)
			}
		})
	}
}

// waitLoadedOrRefused waits for a new "policy loaded" line (true) or a new
// "policy reload failed" line (false) after loaded and refused such lines.
func waitLoadedOrRefused(t *testing.T, s *tserver, loaded, refused int, limit time.Duration) bool {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		log := s.Stderr.String()
		if countLines(log, "policy loaded") > loaded {
			return true
		}
		if countLines(log, "policy reload failed") > refused {
			return false
		}
		if time.Now().After(deadline) {
			t.Fatalf("no new policy load or refusal within %s\nstderr:\n%s", limit, reloadLogTail(log, 4000))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
