package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/provgate/provgate/backend/store/storetest"
	"github.com/provgate/provgate/policies/opa"
)

// The end-to-end harness: each test server runs the real command (runWith)
// on 127.0.0.1:0 over TLS, on SQLite or on a fresh PostgreSQL schema.
//
// The servers run inside the test process, so under -race (make test) every
// one of them is race-built: the race detector sees the server's own
// goroutines (handlers, event streams, the jobfail worker, policy reloads)
// and the tests' concurrent clients together. The replica processes of
// TestE2EReplicas are this test binary too (TestMain), so the multi-process
// paths are race-built as well; only the README walkthrough and the
// read-only filesystem test run the release build (shippedBinary), as a
// user would.

const e2eAdminPassword = "admin-Pa55word-for-tests"

// logBuffer collects a server's log output safely across goroutines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

type tserver struct {
	t       testing.TB
	Name    string // "sqlite" or "postgres"
	Base    string // https://127.0.0.1:port/api/v3
	DSN     string // "" for SQLite
	DataDir string
	Stdout  *logBuffer
	Stderr  *logBuffer
	// Clock is the server's clock for tokens and policies: real time
	// moved on by Advance, so that expiry is tested without waiting for it.
	Clock *testClock
	// Reload asks the server to reload its policy, as SIGHUP does to the
	// process (startBackground).
	Reload chan os.Signal
	client *http.Client
	cancel context.CancelFunc
	done   chan error
}

// testClock is the real clock plus an offset that tests move forward.
type testClock struct{ offset atomic.Int64 }

func (c *testClock) Now() time.Time { return time.Now().Add(time.Duration(c.offset.Load())) }

// Advance moves the clock forward by d.
func (c *testClock) Advance(d time.Duration) { c.offset.Add(int64(d)) }

// dbCase names one database the e2e tests run on.
type dbCase struct {
	Name string
	DSN  string // "" = SQLite in the data dir
}

// databases returns SQLite always and PostgreSQL when PROVGATE_TEST_DATABASE
// is set (in CI it must be: storetest fails the test otherwise). Each call
// makes a fresh PostgreSQL schema.
func databases(t testing.TB) []dbCase {
	t.Helper()
	out := []dbCase{{Name: "sqlite"}}
	if dsn := storetest.PostgresDSN(t); dsn != "" {
		out = append(out, dbCase{Name: "postgres", DSN: dsn})
	}
	return out
}

// forEachDB runs f as a parallel subtest on a fresh server for every
// database: f must not depend on anything another test does, and the
// caller's own code after forEachDB runs before f does.
func forEachDB(t *testing.T, f func(t *testing.T, s *tserver), extraArgs ...string) {
	t.Helper()
	for _, db := range databases(t) {
		t.Run(db.Name, func(t *testing.T) {
			t.Parallel()
			f(t, startE2E(t, db, extraArgs...))
		})
	}
}

// startE2E runs a server until the test ends. extraArgs are added flags.
func startE2E(t testing.TB, db dbCase, extraArgs ...string) *tserver {
	t.Helper()
	dir := t.TempDir()
	return startE2EIn(t, db, dir, extraArgs...)
}

// startE2EIn starts a server with a given data dir (restarts reuse it).
// testDatabaseConns is the PostgreSQL pool of each test server: tests run
// side by side (and two test runs may share one database server), each
// with several servers, and together they stay well under PostgreSQL's
// max_connections (100 by default). Tests waiting for their turn hold no
// connection (storetest makes and drops schemas on short-lived ones), and
// a server waits for a connection refused at the limit (store).
const testDatabaseConns = "6"

func startE2EIn(t testing.TB, db dbCase, dir string, extraArgs ...string) *tserver {
	t.Helper()
	// The jobfail worker polls often, so that waiting for its rounds
	// (WorkerRounds) is quick.
	args := []string{"serve", "--data-dir", dir, "--listen", "127.0.0.1:0", "--shutdown-timeout", "5s",
		"--callback-poll-interval", "100ms"}
	if db.DSN != "" {
		args = append(args, "--database", db.DSN, "--database-conns", testDatabaseConns)
	}
	args = append(args, extraArgs...)
	env := map[string]string{"PROVGATE_ADMIN_PASSWORD": e2eAdminPassword}
	getenv := func(k string) string { return env[k] }
	ctx, cancel := context.WithCancel(context.Background())
	s := &tserver{t: t, Name: db.Name, DSN: db.DSN, DataDir: dir, Stdout: &logBuffer{}, Stderr: &logBuffer{},
		Clock: &testClock{}, Reload: make(chan os.Signal, 1), cancel: cancel, done: make(chan error, 1)}
	ready := make(chan string, 1)
	h := hooks{ready: ready, reload: s.Reload, now: s.Clock.Now, verified: e2eVerified, compiled: e2eCompiled, scryptN: testScryptN,
		streamWriteTimeout: testStreamWriteTimeout}
	go func() { s.done <- runWith(ctx, args, getenv, s.Stdout, s.Stderr, h) }()
	select {
	case addr := <-ready:
		s.Base = "https://" + addr + "/api/v3"
	case err := <-s.done:
		cancel()
		t.Fatalf("server did not start: %v\nstderr:\n%s", err, s.Stderr.String())
	case <-time.After(startLimit):
		cancel()
		t.Fatalf("server did not start within %s\nstderr:\n%s", startLimit, s.Stderr.String())
	}
	s.client = &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // self-signed test server
	}}
	t.Cleanup(s.Stop)
	return s
}

// WorkerRounds waits until the jobfail worker has run a whole round that
// began after the call: whatever was queued before, that round has sent.
// "Nothing was delivered" is asserted after it, not after a pause.
func (s *tserver) WorkerRounds(t testing.TB) {
	t.Helper()
	// The round running now may have claimed before the caller's change;
	// the one after it has not.
	want := s.workerRounds(t) + 2
	deadline := time.Now().Add(time.Minute)
	for s.workerRounds(t) < want {
		if time.Now().After(deadline) {
			t.Fatalf("the jobfail worker finished no round within a minute")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// workerRounds reads provgate_jobfail_worker_rounds_total from /metrics.
func (s *tserver) workerRounds(t testing.TB) int64 {
	t.Helper()
	const name = "provgate_jobfail_worker_rounds_total "
	r := s.DoURL(t, "GET", strings.TrimSuffix(s.Base, "/api/v3")+"/metrics", nil, "")
	for _, line := range strings.Split(string(r.Body), "\n") {
		if v, ok := strings.CutPrefix(line, name); ok {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s%s: %v", name, v, err)
			}
			return int64(n)
		}
	}
	t.Fatalf("/metrics has no %s: %d %.300s", name, r.Status, r.Body)
	return 0
}

// Stop shuts the server down and waits for it (idempotent).
func (s *tserver) Stop() {
	if s.cancel == nil {
		return
	}
	// Connections the client dialed but never used are not idle on the
	// server side; graceful shutdown would wait for them until the read
	// timeout. A real client goes away; this one closes them first.
	if t, ok := s.client.Transport.(*http.Transport); ok {
		t.CloseIdleConnections()
	}
	s.cancel()
	s.cancel = nil
	select {
	case err := <-s.done:
		if err != nil {
			s.t.Errorf("server exited with error: %v\n%s", err, s.Stderr.String())
		}
	case <-time.After(30 * time.Second):
		s.t.Errorf("server did not stop within 30s")
	}
}

// e2eVerified is shared by the test servers, as by the engines of one
// process: a policy content whose Rego suites passed for one server (the
// same extension on SQLite and PostgreSQL, a restart) is not tested again.
var e2eVerified = opa.NewVerified()

// e2eCompiled is shared by the test servers too: most of them serve the
// embedded policy, compiled once for the process instead of at every
// start.
var e2eCompiled = opa.NewCompiled()

// startLimit bounds a test server's start. It only tells a hung start from
// a slow one: a start returns as soon as the server listens, and on a
// machine running two test suites at once a start that compiles and tests
// a policy directory took close to a minute.
const startLimit = 3 * time.Minute

// testStreamWriteTimeout bounds a test server's write to an event stream.
// TestE2EEventsSlowConsumer blocks a stream's write until 16 large events
// are posted and seen by another stream: the default 10 s was missed with
// two test runs on one machine, and the write failed before the overflow
// could close the stream with its reason.
const testStreamWriteTimeout = 2 * time.Minute

// testScryptN is the scrypt cost of the passwords test servers hash
// (hooks.scryptN): the lowest the server accepts, as fixtureHash. At the
// default cost the admin password's hash and first check took about two
// seconds of each server's start under the race detector, and logins
// waiting for the one scrypt slot were refused on a busy machine. The
// default cost is covered by gateway/auth's tests and, end to end, by
// TestE2EAdminResetPassword (the admin command hashes as the server does
// by default; the server checks those logins).
const testScryptN = 1 << 10

// receiverArgs let a server's callbacks reach receivers on this host
// (httptest servers listen on 127.0.0.1), which it refuses by default.
var receiverArgs = []string{"--callback-allow", "127.0.0.1/32"}

// licenseArgs makes a key pair and a license (rbac unless features are
// given) valid for a day, and returns the flags that start a server with
// them.
func licenseArgs(t testing.TB, features ...string) []string {
	t.Helper()
	if len(features) == 0 {
		features = []string{"rbac"}
	}
	k := newLicenseKit(t)
	now := time.Now()
	lic := filepath.Join(k.dir, "license.txt")
	if err := os.WriteFile(lic, []byte(k.sign(strings.Join(features, ","), now, now.Add(24*time.Hour))+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return []string{"--license-public-key", k.pub, "--license", lic}
}

// licenseKit holds a key pair and signs license documents with it, through
// the license command.
type licenseKit struct {
	t         testing.TB
	dir       string
	priv, pub string
}

// newLicenseKit makes a key pair in a temporary directory.
func newLicenseKit(t testing.TB) *licenseKit {
	t.Helper()
	dir := t.TempDir()
	k := &licenseKit{t: t, dir: dir, priv: dir + "/lic.key", pub: dir + "/lic.pub"}
	var out, errb bytes.Buffer
	if err := run(t.Context(), []string{"license", "keygen", "--private-key", k.priv, "--public-key", k.pub},
		func(string) string { return "" }, &out, &errb); err != nil {
		t.Fatalf("keygen: %v %s", err, errb.String())
	}
	return k
}

// sign returns a license document for features, valid from issued to
// expires.
func (k *licenseKit) sign(features string, issued, expires time.Time) string {
	k.t.Helper()
	var out, errb bytes.Buffer
	args := []string{"license", "sign", "--private-key", k.priv, "--features", features, "--owner", "tests",
		"--issued", issued.UTC().Format(time.RFC3339), "--expires", expires.UTC().Format(time.RFC3339)}
	if err := run(k.t.Context(), args, func(string) string { return "" }, &out, &errb); err != nil {
		k.t.Fatalf("sign: %v %s", err, errb.String())
	}
	return strings.TrimSpace(out.String())
}
