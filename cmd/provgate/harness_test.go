package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/provgate/provgate/backend/store/storetest"
)

// The end-to-end harness: each test server runs the real command (runWith)
// on 127.0.0.1:0 over TLS, on SQLite or on a fresh PostgreSQL schema.

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
	client  *http.Client
	cancel  context.CancelFunc
	done    chan error
}

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

// forEachDB runs f as a subtest on a fresh server for every database.
func forEachDB(t *testing.T, f func(t *testing.T, s *tserver), extraArgs ...string) {
	t.Helper()
	for _, db := range databases(t) {
		t.Run(db.Name, func(t *testing.T) {
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
func startE2EIn(t testing.TB, db dbCase, dir string, extraArgs ...string) *tserver {
	t.Helper()
	args := []string{"serve", "--data-dir", dir, "--listen", "127.0.0.1:0", "--shutdown-timeout", "5s"}
	if db.DSN != "" {
		args = append(args, "--database", db.DSN)
	}
	args = append(args, extraArgs...)
	env := map[string]string{"PROVGATE_ADMIN_PASSWORD": e2eAdminPassword}
	getenv := func(k string) string { return env[k] }
	ctx, cancel := context.WithCancel(context.Background())
	s := &tserver{t: t, Name: db.Name, DSN: db.DSN, DataDir: dir, Stdout: &logBuffer{}, Stderr: &logBuffer{},
		cancel: cancel, done: make(chan error, 1)}
	ready := make(chan string, 1)
	go func() { s.done <- runWith(ctx, args, getenv, s.Stdout, s.Stderr, ready) }()
	select {
	case addr := <-ready:
		s.Base = "https://" + addr + "/api/v3"
	case err := <-s.done:
		cancel()
		t.Fatalf("server did not start: %v\nstderr:\n%s", err, s.Stderr.String())
	case <-time.After(60 * time.Second):
		cancel()
		t.Fatalf("server did not start within 60s\nstderr:\n%s", s.Stderr.String())
	}
	s.client = &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // self-signed test server
	}}
	t.Cleanup(s.Stop)
	return s
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
			s.t.Errorf("server exited with error: %v", err)
		}
	case <-time.After(30 * time.Second):
		s.t.Errorf("server did not stop within 30s")
	}
}

// Auth values for requests.
func basic(user, pw string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pw))
}
func bearer(tok string) string { return "Bearer " + tok }

// admin is the Authorization of the bootstrap superuser.
func admin() string { return basic("rocketskates", e2eAdminPassword) }

type resp struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body into v, failing the test on error.
func (r resp) JSON(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("decode %q: %v", r.Body, err)
	}
}

// Map decodes a JSON object body.
func (r resp) Map(t testing.TB) map[string]any {
	t.Helper()
	m := map[string]any{}
	r.JSON(t, &m)
	return m
}

func (r resp) String() string { return fmt.Sprintf("%d %s", r.Status, r.Body) }

// Do sends one request. body may be nil, a string or []byte (sent as is),
// or any other value (sent as JSON). path is relative to /api/v3.
func (s *tserver) Do(method, path string, body any, authz string, hdrs ...string) resp {
	s.t.Helper()
	return s.DoURL(s.t, method, s.Base+path, body, authz, hdrs...)
}

// DoURL is Do for a full URL, failing t (which may be a subtest) on
// transport errors.
func (s *tserver) DoURL(t testing.TB, method, u string, body any, authz string, hdrs ...string) resp {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, u, rd)
	if err != nil {
		t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	for i := 0; i+1 < len(hdrs); i += 2 {
		req.Header.Set(hdrs[i], hdrs[i+1])
	}
	res, err := s.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp{Status: res.StatusCode, Header: res.Header, Body: b}
}

// Must sends a request and fails the test unless the status is want.
func (s *tserver) Must(want int, method, path string, body any, authz string, hdrs ...string) resp {
	s.t.Helper()
	r := s.Do(method, path, body, authz, hdrs...)
	if r.Status != want {
		s.t.Fatalf("%s %s: got %d %s, want %d", method, path, r.Status, r.Body, want)
	}
	return r
}

// Token gets a token for user with the given credentials and query.
func (s *tserver) Token(user, authz, query string) string {
	s.t.Helper()
	r := s.Must(200, "GET", "/users/"+user+"/token"+query, nil, authz)
	var out struct{ Token string }
	r.JSON(s.t, &out)
	if out.Token == "" {
		s.t.Fatalf("empty token in %s", r.Body)
	}
	return out.Token
}

// AddUser creates a user with a password and roles (as the admin).
func (s *tserver) AddUser(name, pw string, roles ...string) {
	s.t.Helper()
	if roles == nil {
		roles = []string{}
	}
	s.Must(201, "POST", "/users", map[string]any{"Name": name, "Password": pw, "Roles": roles}, admin())
}

// AddRole creates a role (as the admin; needs the rbac license).
func (s *tserver) AddRole(name string, claims ...[3]string) {
	s.t.Helper()
	cs := []map[string]string{}
	for _, c := range claims {
		cs = append(cs, map[string]string{"scope": c[0], "action": c[1], "specific": c[2]})
	}
	s.Must(201, "POST", "/roles", map[string]any{"Name": name, "Claims": cs}, admin())
}

// licenseArgs makes a key pair and an rbac license and returns the flags
// that start a server with them.
func licenseArgs(t testing.TB, features ...string) []string {
	t.Helper()
	dir := t.TempDir()
	priv, pub := filepath.Join(dir, "lic.key"), filepath.Join(dir, "lic.pub")
	var out, errb bytes.Buffer
	if err := run(context.Background(), []string{"license", "keygen", "--private-key", priv, "--public-key", pub},
		func(string) string { return "" }, &out, &errb); err != nil {
		t.Fatalf("keygen: %v %s", err, errb.String())
	}
	if len(features) == 0 {
		features = []string{"rbac"}
	}
	out.Reset()
	if err := run(context.Background(), []string{"license", "sign", "--private-key", priv, "--features",
		strings.Join(features, ","), "--expires", time.Now().Add(24 * time.Hour).UTC().Format(time.RFC3339), "--owner", "tests"},
		func(string) string { return "" }, &out, &errb); err != nil {
		t.Fatalf("sign: %v %s", err, errb.String())
	}
	lic := filepath.Join(dir, "license.txt")
	if err := os.WriteFile(lic, out.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return []string{"--license-public-key", pub, "--license", lic}
}
