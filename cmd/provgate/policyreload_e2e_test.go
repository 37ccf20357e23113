package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/provgate/provgate/policies"
)

// Policy reload end to end (docs/design.md §9): a --policy-dir policy is swapped
// under load without failing a request, a policy that does not compile or
// whose own tests fail never replaces the running one nor lets the server
// start, and decisions are logged in OPA's shape without credentials.

// blockedReason is the refusal reason of the test's "block" policy: a 403
// carrying it can only come from that policy.
const blockedReason = "blocked by the reload test policy"

// policyVariant describes one version of the test policy dir: the embedded
// policy with a suite of its own (reloadSuite), optionally changed so that
// user "flip" is refused (a real semantic change), plus a comment that makes
// otherwise identical versions different files.
type policyVariant struct {
	block   bool
	comment string
	// extra files (name → source) added to the dir, e.g. a broken module.
	extra map[string]string
}

// reloadSuite is the own suite of the test policy dirs: a directory that
// replaces the embedded policy runs only its own tests before it is served
// (docs/design.md §9.3). It holds in every variant (the block policy only
// refuses flip), so each reload runs a suite that passes; the embedded
// suites themselves are the policies package's tests and, with extensions,
// TestE2EExtension*'s. Run at each of these tests' reloads they would be
// most of this package's CPU time under the race detector, and prove
// nothing about reloading.
const reloadSuite = `package provgate.authz_reload_test

import data.provgate.fixtures

decide(principal, required) := fixtures.decide(fixtures.data_licensed, fixtures.request(principal, required))

test_superuser_allowed if decide(fixtures.user("root", ["superuser"]), [fixtures.claim("machines", "get", "m1")]).allow

test_no_roles_denied if not decide(fixtures.user("nobody", []), [fixtures.claim("machines", "list", "")]).allow

test_alice_never_blocked if {
	not data.provgate.authz.blocked with input as {"principal": {"name": "alice"}}
}
`

// policyFiles returns the files of variant v. The block policy renames the
// entry point of the embedded authz.rego and wraps it, so it depends only
// on the entry point's name (docs/design.md §9), not on how the policy decides.
func policyFiles(t testing.TB, v policyVariant) map[string]string {
	t.Helper()
	files := map[string]string{}
	for name, src := range policies.Policies() {
		files[name] = src
	}
	// The fixtures the suite decides with (test data, no tests).
	fixtures, ok := policies.Tests()["fixtures_test.rego"]
	if !ok {
		t.Fatal("the embedded policy has no fixtures_test.rego")
	}
	files["fixtures_test.rego"] = fixtures
	files["reload_test.rego"] = reloadSuite
	authz := files["authz.rego"]
	if v.block {
		entry := regexp.MustCompile(`(?m)^decision :=`)
		if n := len(entry.FindAllStringIndex(authz, -1)); n != 1 {
			t.Fatalf("embedded authz.rego defines decision %d times, want once", n)
		}
		authz = entry.ReplaceAllLiteralString(authz, "base_decision :=") + `
decision := object.union(base_decision, {"allow": false, "reasons": array.concat(base_decision.reasons, ["` + blockedReason + `"])}) if {
	blocked
} else := base_decision

blocked if input.principal.name == "flip"
`
	}
	files["authz.rego"] = authz + "\n# " + v.comment + "\n"
	for name, src := range v.extra {
		files[name] = src
	}
	return files
}

// writePolicyDir makes dir hold exactly files. Each file is written to a
// temporary name outside the .rego pattern and renamed, as deployment tools
// do, so that the watcher never sees a half-written module.
func writePolicyDir(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	old, err := filepath.Glob(filepath.Join(dir, "*.rego"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range old {
		if _, ok := files[filepath.Base(p)]; !ok {
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
		}
	}
	for name, src := range files {
		p := filepath.Join(dir, name)
		if cur, err := os.ReadFile(p); err == nil && string(cur) == src {
			continue
		}
		tmp := p + ".tmp"
		if err := os.WriteFile(tmp, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, p); err != nil {
			t.Fatal(err)
		}
	}
}

// reloadUsers are the principals of the reload tests: alice (superuser)
// is always allowed, nobody (no role) always refused, and flip (superuser)
// is allowed by the embedded policy and refused by the "block" one.
type reloadUsers struct {
	alice, flip, nobody string // Authorization header values
}

func setupReloadUsers(t *testing.T, s *tserver) reloadUsers {
	t.Helper()
	s.AddUser("alice", "alice-Pa55word", "superuser")
	s.AddUser("flip", "flip-Pa55word", "superuser")
	s.AddUser("nobody", "nobody-Pa55word")
	s.Must(201, "POST", "/machines", map[string]any{"Name": "reload-m1"}, admin())
	// Bearer tokens keep password hashing out of the measured load.
	return reloadUsers{
		alice:  bearer(s.Token("alice", basic("alice", "alice-Pa55word"), "")),
		flip:   bearer(s.Token("flip", basic("flip", "flip-Pa55word"), "")),
		nobody: bearer(s.Token("nobody", basic("nobody", "nobody-Pa55word"), "")),
	}
}

// answer classifies a response to GET /machines: "allow" (200 with the one
// machine), "deny" (403 for missing claims), "blocked" (403 of the block
// policy), or a description of anything else.
func answer(status int, body []byte) string {
	switch status {
	case http.StatusOK:
		var list []map[string]any
		if err := json.Unmarshal(body, &list); err != nil || len(list) != 1 || list[0]["Name"] != "reload-m1" {
			return fmt.Sprintf("malformed 200: %.200s", body)
		}
		return "allow"
	case http.StatusForbidden:
		var e struct {
			Code     int
			Messages []string
		}
		if err := json.Unmarshal(body, &e); err != nil || e.Code != 403 {
			return fmt.Sprintf("malformed 403: %.200s", body)
		}
		msgs := strings.Join(e.Messages, "|")
		blocked := strings.Contains(msgs, blockedReason)
		requires := strings.Contains(msgs, "Requires: machines list")
		switch {
		case blocked && !requires:
			return "blocked"
		case requires && !blocked:
			return "deny"
		}
		return fmt.Sprintf("mixed 403: %.200s", body)
	}
	return fmt.Sprintf("%d %.200s", status, body)
}

// flipAnswer is what flip gets under the policy with or without the block.
func flipAnswer(block bool) string {
	if block {
		return "blocked"
	}
	return "allow"
}

// waitFlip polls flip's answer until it is want, failing after limit.
func waitFlip(t *testing.T, s *tserver, u reloadUsers, want string, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for time.Since(start) < limit {
		st, b, err := s.rawDo("GET", "/machines", u.flip)
		if err != nil {
			t.Fatalf("GET /machines as flip: %v", err)
		}
		got := answer(st, b)
		if got == want {
			return time.Since(start)
		}
		if got != flipAnswer(want != "blocked") {
			t.Fatalf("flip got %q while waiting for %q", got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("flip still not %q after %s\nstderr:\n%s", want, limit, reloadLogTail(s.Stderr.String(), 4000))
	return 0
}

// waitLog waits until the server log has more than n lines containing
// every one of subs, and returns the new count.
func waitLog(t *testing.T, s *tserver, n int, limit time.Duration, subs ...string) int {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		c := countLines(s.Stderr.String(), subs...)
		if c > n {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("no new log line with %q within %s\nstderr:\n%s", subs, limit, reloadLogTail(s.Stderr.String(), 4000))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func countLines(log string, subs ...string) int {
	n := 0
	for _, line := range strings.Split(log, "\n") {
		ok := true
		for _, sub := range subs {
			ok = ok && strings.Contains(line, sub)
		}
		if ok && line != "" {
			n++
		}
	}
	return n
}

func reloadLogTail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// reloadLimit bounds how long a written policy may take to be served: one
// watch interval plus compiling and running the suites on a loaded host.
// Only a failure waits that long; a minute was missed with two test suites
// running at once.
const reloadLimit = 3 * time.Minute

// TestE2EPolicyReloadUnderLoad rewrites the policy dir several times while
// eight clients send allowed and refused requests: no request fails, every
// answer is the old policy's or the new one's, and once the new answer has
// been seen the old one never comes back.
func TestE2EPolicyReloadUnderLoad(t *testing.T) {
	t.Parallel()
	for _, db := range databases(t) {
		t.Run(db.Name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			writePolicyDir(t, dir, policyFiles(t, policyVariant{comment: "v0"}))
			s := startE2E(t, db, "--policy-dir", dir, "--policy-watch-interval", "100ms")
			u := setupReloadUsers(t, s)
			waitFlip(t, s, u, "allow", time.Second)

			// expect is flip's settled answer, or "" while a rewrite is in
			// flight and either answer is right. Workers hold expectMu
			// (read) from reading expect to receiving the answer, so a
			// change of expect waits for the requests sent under the old
			// one.
			var (
				expectMu sync.RWMutex
				expect   = "allow"
			)
			setExpect := func(v string) {
				expectMu.Lock()
				expect = v
				expectMu.Unlock()
			}
			var (
				sent, transport, fivexx, wrong atomic.Int64
				mu                             sync.Mutex
				problems                       []string
			)
			report := func(format string, a ...any) {
				mu.Lock()
				defer mu.Unlock()
				if len(problems) < 20 {
					problems = append(problems, fmt.Sprintf(format, a...))
				}
			}
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for w := 0; w < 8; w++ {
				wg.Add(1)
				go func(w int) {
					defer wg.Done()
					// Bounded by the stop channel and, should the test
					// misbehave, by a request count.
					for i := 0; i < 1_000_000; i++ {
						select {
						case <-stop:
							return
						default:
						}
						who, authz := []string{"alice", "flip", "nobody"}[(w+i)%3], ""
						switch who {
						case "alice":
							authz = u.alice
						case "flip":
							authz = u.flip
						default:
							authz = u.nobody
						}
						expectMu.RLock()
						settled := expect
						st, b, err := s.rawDo("GET", "/machines", authz)
						expectMu.RUnlock()
						sent.Add(1)
						if err != nil {
							transport.Add(1)
							report("%s: transport: %v", who, err)
							continue
						}
						if st >= 500 {
							fivexx.Add(1)
							report("%s: %d %.200s", who, st, b)
							continue
						}
						got := answer(st, b)
						ok := false
						switch who {
						case "alice":
							ok = got == "allow"
						case "nobody":
							ok = got == "deny"
						case "flip":
							if settled != "" {
								ok = got == settled
							} else {
								ok = got == "allow" || got == "blocked"
							}
						}
						if !ok {
							wrong.Add(1)
							report("%s (settled %q): got %s", who, settled, got)
						}
					}
				}(w)
			}

			start := time.Now()
			loaded := countLines(s.Stderr.String(), "policy loaded")
			steps := []policyVariant{
				{comment: "v1"},              // a change of the file only
				{block: true, comment: "v2"}, // flip is refused
				{block: true, comment: "v3"}, // same semantics, new file
				{comment: "v4"},              // reverted
				{block: true, comment: "v5"},
				{comment: "v6"},
			}
			var served []time.Duration
			for _, v := range steps {
				setExpect("")
				written := time.Now()
				writePolicyDir(t, dir, policyFiles(t, v))
				loaded = waitLog(t, s, loaded, reloadLimit, "policy loaded")
				// The log line follows the swap: from here every decision
				// uses the new policy, the very next one included.
				st, b, err := s.rawDo("GET", "/machines", u.flip)
				if err != nil {
					t.Fatal(err)
				}
				if got := answer(st, b); got != flipAnswer(v.block) {
					t.Fatalf("after the reload of %+v was logged, flip got %s", v, got)
				}
				served = append(served, time.Since(written).Round(time.Millisecond))
				setExpect(flipAnswer(v.block))
				// Some load under the settled policy before the next change.
				time.Sleep(300 * time.Millisecond)
			}
			// At least 3 s of load in all, whatever the reload speed.
			if d := 3*time.Second - time.Since(start); d > 0 {
				time.Sleep(d)
			}
			close(stop)
			wg.Wait()
			elapsed := time.Since(start)

			t.Logf("%s: %d requests by 8 clients in %s across %d reloads; transport errors %d, 5xx %d, wrong answers %d; each new policy served %v after its files were written",
				db.Name, sent.Load(), elapsed.Round(time.Millisecond), len(steps), transport.Load(), fivexx.Load(), wrong.Load(), served)
			if transport.Load() != 0 || fivexx.Load() != 0 || wrong.Load() != 0 {
				t.Errorf("failed requests during reloads:\n%s", strings.Join(problems, "\n"))
			}
			if sent.Load() < 100 {
				t.Errorf("only %d requests sent: the load did not overlap the reloads", sent.Load())
			}
			if n := countLines(s.Stderr.String(), "keeping the"); n != 0 {
				t.Errorf("%d reloads refused, want 0:\n%s", n, reloadLogTail(s.Stderr.String(), 4000))
			}
		})
	}
}

// TestE2EPolicyReloadSignal reloads on SIGHUP alone: the watcher's
// interval is far longer than the test.
func TestE2EPolicyReloadSignal(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writePolicyDir(t, dir, policyFiles(t, policyVariant{comment: "v0"}))
	s := startE2E(t, dbCase{Name: "sqlite"}, "--policy-dir", dir, "--policy-watch-interval", "1h")
	u := setupReloadUsers(t, s)
	writePolicyDir(t, dir, policyFiles(t, policyVariant{block: true, comment: "v1"}))
	// Without a signal nothing changes.
	time.Sleep(300 * time.Millisecond)
	waitFlip(t, s, u, "allow", time.Second)
	// The server's own reload channel: what SIGHUP delivers in the
	// process (main), so no other server of this test process sees it.
	s.Reload <- syscall.SIGHUP
	waitLog(t, s, 0, reloadLimit, "policy loaded", `"trigger":"signal"`)
	waitFlip(t, s, u, "blocked", time.Second)
}

// TestE2EPolicyReloadRefused writes a policy that does not parse, then a
// semantic change whose own test fails: each time the log says why, and
// the running policy keeps answering as before. A valid change afterwards
// is still picked up.
func TestE2EPolicyReloadRefused(t *testing.T) {
	t.Parallel()
	for _, db := range databases(t) {
		t.Run(db.Name, func(t *testing.T) {
			t.Parallel()
			testPolicyReloadRefused(t, db)
		})
	}
}

func testPolicyReloadRefused(t *testing.T, db dbCase) {
	dir := t.TempDir()
	writePolicyDir(t, dir, policyFiles(t, policyVariant{comment: "v0"}))
	s := startE2E(t, db, "--policy-dir", dir, "--policy-watch-interval", "100ms")
	u := setupReloadUsers(t, s)

	check := func(phase string) {
		t.Helper()
		for _, c := range []struct{ who, authz, want string }{
			{"alice", u.alice, "allow"}, {"flip", u.flip, "allow"}, {"nobody", u.nobody, "deny"},
		} {
			st, b, err := s.rawDo("GET", "/machines", c.authz)
			if err != nil {
				t.Fatalf("%s: %s: %v", phase, c.who, err)
			}
			if got := answer(st, b); got != c.want {
				t.Fatalf("%s: %s got %s, want %s (the old policy)", phase, c.who, got, c.want)
			}
		}
	}

	// 1. A syntax error in a policy module.
	broken := policyFiles(t, policyVariant{block: true, comment: "syntax"})
	broken["authz.rego"] = strings.Replace(broken["authz.rego"], "allow if {", "allow if {{ (", 1)
	writePolicyDir(t, dir, broken)
	waitLog(t, s, 0, reloadLimit, "policy reload failed", "parse policy")
	check("after a syntax error")

	// 2. The block policy, valid Rego, with a test that still expects
	// flip to be allowed: the suite fails, so the change must not apply.
	failing := policyFiles(t, policyVariant{block: true, comment: "failing test", extra: map[string]string{
		"flip_test.rego": "package provgate.authz_flip_test\n\n" +
			"test_flip_is_not_blocked if {\n\tnot data.provgate.authz.blocked with input as {\"principal\": {\"name\": \"flip\"}}\n}\n",
	}})
	writePolicyDir(t, dir, failing)
	waitLog(t, s, 0, reloadLimit, "policy reload failed", "policy tests: 1 failed", "test_flip_is_not_blocked")
	check("after a failing policy test")
	if refused := countLines(s.Stderr.String(), "keeping the"); refused != 2 {
		t.Errorf("%d refused reloads logged, want 2", refused)
	}
	// Still refused a moment later: nothing retries the failed policy
	// into service.
	time.Sleep(300 * time.Millisecond)
	check("a moment later")

	// 3. A valid change after the refusals is served.
	loaded := countLines(s.Stderr.String(), "policy loaded")
	writePolicyDir(t, dir, policyFiles(t, policyVariant{block: true, comment: "fixed"}))
	waitLog(t, s, loaded, reloadLimit, "policy loaded")
	waitFlip(t, s, u, "blocked", time.Second)
}

// TestE2EPolicyDirStartRefused: a policy dir that does not compile, or
// whose tests fail, stops the server before it listens, with one line that
// says why and a non-zero exit status.
func TestE2EPolicyDirStartRefused(t *testing.T) {
	t.Parallel()
	syntax := policyFiles(t, policyVariant{comment: "syntax"})
	syntax["authz.rego"] = strings.Replace(syntax["authz.rego"], "allow if {", "allow if {{ (", 1)
	failing := policyFiles(t, policyVariant{block: true, comment: "failing", extra: map[string]string{
		"flip_test.rego": "package provgate.authz_flip_test\n\n" +
			"test_flip_is_not_blocked if {\n\tnot data.provgate.authz.blocked with input as {\"principal\": {\"name\": \"flip\"}}\n}\n",
	}})
	noDecision := map[string]string{"other.rego": "package provgate.other\n\nx := 1\n"}
	for _, c := range []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"syntax error", syntax, "parse policy"},
		{"failing test", failing, "policy tests: 1 failed: data.provgate.authz_flip_test.test_flip_is_not_blocked"},
		{"no decision rule", noDecision, "no rule defines data.provgate.authz.decision"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			writePolicyDir(t, dir, c.files)
			args := []string{"serve", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--policy-dir", dir}
			env := map[string]string{"PROVGATE_ADMIN_PASSWORD": e2eAdminPassword}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			ready := make(chan string, 1)
			var stdout, stderr logBuffer
			err := runWith(ctx, args, func(k string) string { return env[k] }, &stdout, &stderr, hooks{ready: ready, compiled: e2eCompiled, scryptN: testScryptN})
			select {
			case addr := <-ready:
				t.Fatalf("server listened on %s with a bad policy dir", addr)
			default:
			}
			if err == nil || errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("serve returned %v, want a policy error", err)
			}
			var out bytes.Buffer
			code := report(err, &out)
			line := out.String()
			t.Logf("exit %d: %s", code, strings.TrimSpace(line))
			if code == 0 {
				t.Errorf("exit status 0")
			}
			if strings.Count(line, "\n") != 1 || !strings.HasPrefix(line, "provgate: policies: ") {
				t.Errorf("want one line starting with %q, got %q", "provgate: policies: ", line)
			}
			if !strings.Contains(line, c.want) {
				t.Errorf("line does not say %q: %q", c.want, line)
			}
			if strings.Contains(stderr.String(), `"listening"`) {
				t.Errorf("server logged listening:\n%s", stderr.String())
			}
		})
	}
}

var uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// TestE2EPolicyDecisionLog checks --decision-log: one JSON line per
// decision in OPA's decision-log shape, and no credential anywhere in the
// file, whether requests authenticate with a password or a token.
func TestE2EPolicyDecisionLog(t *testing.T) {
	t.Parallel()
	for _, db := range databases(t) {
		t.Run(db.Name, func(t *testing.T) {
			t.Parallel()
			testDecisionLog(t, db)
		})
	}
}

func testDecisionLog(t *testing.T, db dbCase) {
	logFile := filepath.Join(t.TempDir(), "decisions.jsonl")
	s := startE2E(t, db, "--decision-log", logFile)
	u := setupReloadUsers(t, s)
	secrets := []string{e2eAdminPassword, "alice-Pa55word", "flip-Pa55word", "nobody-Pa55word",
		strings.TrimPrefix(u.alice, "Bearer "), strings.TrimPrefix(u.flip, "Bearer "), strings.TrimPrefix(u.nobody, "Bearer "),
		strings.TrimPrefix(admin(), "Basic "), strings.TrimPrefix(basic("alice", "alice-Pa55word"), "Basic ")}

	lines := func() []map[string]any {
		t.Helper()
		b, err := os.ReadFile(logFile)
		if err != nil {
			t.Fatal(err)
		}
		var out []map[string]any
		for i, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
			if l == "" {
				continue
			}
			m := map[string]any{}
			if err := json.Unmarshal([]byte(l), &m); err != nil {
				t.Fatalf("line %d is not JSON: %v: %.300s", i+1, err, l)
			}
			out = append(out, m)
		}
		return out
	}
	// settle waits until the asynchronous writer has written at least n
	// lines and then no more arrive for a while.
	settle := func(n int) []map[string]any {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			ls := lines()
			if len(ls) >= n {
				time.Sleep(300 * time.Millisecond)
				if again := lines(); len(again) == len(ls) {
					return ls
				}
				continue
			}
			if time.Now().After(deadline) {
				t.Fatalf("decision log has %d lines, want %d", len(ls), n)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	before := len(settle(0))
	// Each of these requests is decided once; the password requests are
	// also authenticated by the policy-free password check.
	reqs := []struct {
		authz  string
		want   int
		method string
		path   string
	}{
		{u.alice, 200, "GET", "/machines"},
		{u.nobody, 403, "GET", "/machines"},
		{u.flip, 200, "GET", "/users/flip"},
		{basic("alice", "alice-Pa55word"), 200, "GET", "/machines"},
		{admin(), 200, "GET", "/users"},
		{basic("nobody", "nobody-Pa55word"), 403, "GET", "/users/alice"},
		// A token request: the token issued must not reach the log.
		{basic("alice", "alice-Pa55word"), 200, "GET", "/users/alice/token"},
	}
	const rounds = 5
	for i := 0; i < rounds; i++ {
		for j, r := range reqs {
			res := s.Must(r.want, r.method, r.path, nil, r.authz, "X-Request-Id", fmt.Sprintf("dl-%d-%d", i, j))
			if strings.HasSuffix(r.path, "/token") {
				var tok struct{ Token string }
				res.JSON(t, &tok)
				secrets = append(secrets, tok.Token)
			}
		}
	}
	all := settle(before + rounds*len(reqs))
	got := all[before:]
	if len(got) != rounds*len(reqs) {
		t.Fatalf("%d decisions logged for %d decided requests", len(got), rounds*len(reqs))
	}
	var info struct {
		Policy struct{ Revision string } `json:"provgate_policy"`
	}
	s.Must(200, "GET", "/info", nil, admin()).JSON(t, &info)
	if !strings.HasPrefix(info.Policy.Revision, "sha256:") {
		t.Fatalf("/info names the policy revision %q", info.Policy.Revision)
	}
	ids := map[string]bool{}
	for i, l := range got {
		r := reqs[i%len(reqs)]
		// docs/design.md §9.5: each line names its request, the policy
		// revision (also as OPA's bundles entry) and whether the cache
		// answered; the same requests again are answered from the cache.
		if want := fmt.Sprintf("dl-%d-%d", i/len(reqs), i%len(reqs)); l["request_id"] != want {
			t.Errorf("line %d: request_id %v, want %s", i, l["request_id"], want)
		}
		bundles, _ := l["bundles"].(map[string]any)
		pb, _ := bundles["provgate"].(map[string]any)
		if l["revision"] != info.Policy.Revision || pb["revision"] != info.Policy.Revision {
			t.Errorf("line %d: revision %v, bundles %v; /info says %s", i, l["revision"], l["bundles"], info.Policy.Revision)
		}
		if cached, ok := l["cached"].(bool); !ok || (i >= len(reqs) && !cached) {
			t.Errorf("line %d: cached %v for a request decided before", i, l["cached"])
		}
		id, _ := l["decision_id"].(string)
		if !uuidRE.MatchString(id) || ids[id] {
			t.Errorf("line %d: decision_id %q is not a new UUID", i, id)
		}
		ids[id] = true
		if l["path"] != "provgate/authz/decision" {
			t.Errorf("line %d: path %v", i, l["path"])
		}
		ts, _ := l["timestamp"].(string)
		if at, err := time.Parse(time.RFC3339Nano, ts); err != nil || time.Since(at) > time.Minute || time.Until(at) > time.Second {
			t.Errorf("line %d: timestamp %q", i, ts)
		}
		in, _ := l["input"].(map[string]any)
		res, _ := l["result"].(map[string]any)
		if in == nil || res == nil {
			t.Fatalf("line %d: input or result missing: %v", i, l)
		}
		// Lines follow the requests in order: they were sent one by one.
		if in["method"] != r.method || in["path"] != "/api/v3"+r.path {
			t.Errorf("line %d: input %v %v, want %s /api/v3%s", i, in["method"], in["path"], r.method, r.path)
		}
		if allow, ok := res["allow"].(bool); !ok || allow != (r.want == 200) {
			t.Errorf("line %d: result %v for a %d answer", i, res, r.want)
		}
		if p, _ := in["principal"].(map[string]any); p == nil || p["name"] == "" {
			t.Errorf("line %d: no principal in input %v", i, in)
		}
	}

	raw, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	low := strings.ToLower(string(raw))
	for _, bad := range []string{"authorization", "bearer ", "basic ", "password"} {
		if strings.Contains(low, bad) {
			t.Errorf("decision log contains %q", bad)
		}
	}
	for _, sec := range secrets {
		if sec != "" && strings.Contains(string(raw), sec) {
			t.Errorf("decision log contains a credential (%.6s...)", sec)
		}
	}
	t.Logf("%s: %d decision lines for %d requests, %d bytes, no credential", s.Name, len(got), rounds*len(reqs), len(raw))
}
