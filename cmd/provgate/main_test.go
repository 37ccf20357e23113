package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// cliOutput is written by the server's goroutines and read by the test.
type cliOutput struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *cliOutput) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *cliOutput) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

const cliAdminPassword = "test-admin-password-1"

func envMap(kv map[string]string) func(string) string {
	return func(k string) string { return kv[k] }
}

// runCLI runs one short-lived command line.
func runCLI(t *testing.T, env map[string]string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	// Passwords it hashes (admin reset-password) take the test servers'
	// scrypt cost, which those servers then check.
	return runCLIWith(t, env, hooks{scryptN: testScryptN}, args...)
}

// runCLIWith is runCLI with the given hooks; hooks{} is the program as
// shipped (the default scrypt cost).
func runCLIWith(t *testing.T, env map[string]string, h hooks, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut cliOutput
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = runWith(ctx, args, envMap(env), &out, &errOut, h)
	return out.String(), errOut.String(), err
}

type cliServer struct {
	addr   string
	stdout *cliOutput
	stderr *cliOutput
	stop   func() error // cancels the context and returns run's result
}

// startCLI runs the serve command until the test stops it. It fails the
// test when run returns before the listener is up.
func startCLI(t *testing.T, env map[string]string, args ...string) *cliServer {
	t.Helper()
	s, err := tryStartCLI(t, env, args...)
	if err != nil {
		t.Fatalf("serve: %v", err)
	}
	return s
}

func tryStartCLI(t *testing.T, env map[string]string, args ...string) (*cliServer, error) {
	t.Helper()
	// The first start creates rocketskates with this password, so that the
	// tests can authenticate without reading the generated one.
	withPW := map[string]string{"PROVGATE_ADMIN_PASSWORD": cliAdminPassword}
	for k, v := range env {
		withPW[k] = v
	}
	env = withPW
	ctx, cancel := context.WithCancel(context.Background())
	s := &cliServer{stdout: &cliOutput{}, stderr: &cliOutput{}}
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- runWith(ctx, args, envMap(env), s.stdout, s.stderr, hooks{ready: ready, compiled: e2eCompiled, scryptN: testScryptN})
	}()
	var once sync.Once
	var result error
	s.stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case result = <-done:
			case <-time.After(20 * time.Second):
				result = errors.New("server did not stop within 20s")
			}
		})
		return result
	}
	t.Cleanup(func() { s.stop() })
	select {
	case s.addr = <-ready:
		return s, nil
	case err := <-done:
		cancel()
		once.Do(func() { result = err }) // run has returned: nothing left to stop
		if err == nil {
			err = errors.New("run returned nil before listening")
		}
		return nil, err
	case <-time.After(startLimit):
		return nil, fmt.Errorf("server not ready after %s; stderr:\n%s", startLimit, s.stderr.String())
	}
}

func skipVerifyClient() *http.Client {
	return &http.Client{
		Timeout:   10 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}},
	}
}

func getInfoOK(t *testing.T, client *http.Client, url string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth("rocketskates", cliAdminPassword)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: status %d, body %s", url, resp.StatusCode, body)
	}
	var info map[string]any
	if err := json.Unmarshal(body, &info); err != nil {
		t.Fatalf("GET %s: body %q is not JSON: %v", url, body, err)
	}
	if _, ok := info["version"]; !ok {
		t.Errorf("info %s has no version", body)
	}
	return resp
}

func TestVersion(t *testing.T) {
	out, _, err := runCLI(t, nil, "version")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^provgate \S+ \(go[0-9][^)]*\)\n$`).MatchString(out) {
		t.Errorf("version output %q", out)
	}
	if !strings.HasPrefix(out, "provgate dev ") {
		t.Errorf("version output %q, want the default version dev", out)
	}
}

func TestUsageErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"unknown command", nil, []string{"frobnicate"}, `unknown command "frobnicate"`},
		{"unknown serve flag", nil, []string{"--frob"}, "flag provided but not defined: -frob"},
		{"unknown serve flag after command", nil, []string{"serve", "--frob=1"}, "flag provided but not defined: -frob"},
		{"stray argument", nil, []string{"serve", "extra"}, `unexpected argument "extra"`},
		{"version with argument", nil, []string{"version", "x"}, "version takes no arguments"},
		{"license without subcommand", nil, []string{"license"}, "want a subcommand"},
		{"license unknown subcommand", nil, []string{"license", "burn"}, `unknown subcommand "burn"`},
		{"license keygen missing flag", nil, []string{"license", "keygen", "--private-key", filepath.Join(dir, "k")}, "--public-key is required"},
		{"license sign bad expiry", nil, []string{"license", "sign", "--private-key", "k", "--owner", "o", "--expires", "tomorrow"}, "--expires \"tomorrow\""},
		{"license verify unknown flag", nil, []string{"license", "verify", "--nope"}, "flag provided but not defined: -nope"},
		{"tls cert without key", nil, []string{"--tls-cert", "x.crt"}, "--tls-cert and --tls-key must be given together"},
		{"tls key without cert from env", map[string]string{"PROVGATE_TLS_KEY": "x.key"}, nil, "--tls-cert and --tls-key must be given together"},
		{"no-tls with cert", nil, []string{"--no-tls", "--tls-cert", "a", "--tls-key", "b"}, "--no-tls cannot be combined"},
		{"bad log level", nil, []string{"--log-level", "loud"}, `--log-level "loud"`},
		{"bad listen", nil, []string{"--listen", "8092"}, `--listen "8092"`},
		{"bad body limit", nil, []string{"--body-limit", "lots"}, "invalid value \"lots\" for flag -body-limit"},
		{"bad env duration", map[string]string{"PROVGATE_MAX_TOKEN_TTL": "forever"}, nil, "environment PROVGATE_MAX_TOKEN_TTL"},
		{"bad env bool", map[string]string{"PROVGATE_NO_TLS": "maybe"}, nil, "environment PROVGATE_NO_TLS"},
		{"license without key", nil, []string{"--license", "lic"}, "--license needs --license-public-key"},
		{"missing policy dir", nil, []string{"--policy-dir", filepath.Join(dir, "nope")}, "no such file or directory"},
		{"bundle and dir", nil, []string{"--policy-dir", dir, "--policy-bundle", "https://example.com/b.tar.gz"}, "--policy-bundle and --policy-dir exclude each other"},
		{"bundle key without bundle", nil, []string{"--policy-bundle-public-key", "k.pem"}, "--policy-bundle-public-key needs --policy-bundle"},
		{"missing bundle file", nil, []string{"--policy-bundle", filepath.Join(dir, "nope.tar.gz")}, "no such file or directory"},
		{"plain http bundle", nil, []string{"--policy-bundle", "http://bundles.example.com/b.tar.gz"}, "--policy-bundle-allow-http"},
		{"plain http bundle from env", map[string]string{"PROVGATE_POLICY_BUNDLE": "http://u:hunter2@bundles.example.com/b.tar.gz"}, nil, "use https"},
		{"bad callback allow", nil, []string{"--callback-allow", "127.0.0.1/33"}, `--callback-allow: "127.0.0.1/33" is not a CIDR prefix`},
		{"bad callback deny from env", map[string]string{"PROVGATE_CALLBACK_DENY": "10.0.0.0/8,metadata"}, nil, `--callback-deny: "metadata" is not a CIDR prefix`},
		{"policy without subcommand", nil, []string{"policy"}, "want a subcommand"},
		{"policy eval without input", nil, []string{"policy", "eval"}, "--input is required"},
		{"unsupported dsn", nil, []string{"--database", "mysql://u:hunter2@h/db"}, `unsupported scheme "mysql"`},
		{"file path as dsn", nil, []string{"--database", "./provgate.db"}, "--database: not a database DSN"},
		{"zero shutdown timeout", nil, []string{"--shutdown-timeout", "0s"}, "--shutdown-timeout 0s"},
		{"negative object cache", map[string]string{"PROVGATE_OBJECT_CACHE_SIZE": "-1"}, nil, "--object-cache-size -1"},
		{"one database connection", map[string]string{"PROVGATE_DATABASE_CONNS": "1"}, nil, "--database-conns 1: must be between 2 and 1000"},
		{"no scrypt slot", nil, []string{"--scrypt-concurrency", "0"}, "--scrypt-concurrency 0: must be between 1 and 64"},
		{"tiny memory limit", map[string]string{"PROVGATE_MEMORY_LIMIT": "1MiB"}, nil, "--memory-limit 1048576: must be 0"},
		{"bad memory limit", nil, []string{"--memory-limit", "lots"}, "invalid value \"lots\" for flag -memory-limit"},
		{"event flush too long", map[string]string{"PROVGATE_EVENT_FLUSH": "2s"}, nil, "--event-flush 2s: must be between 0 and 1s"},
		{"negative event flush", nil, []string{"--event-flush", "-1ms"}, "--event-flush -1ms"},
		{"import without credentials", nil, []string{"import", "users.json"}, "no credentials"},
		{"import without a file", map[string]string{"RS_KEY": "a:b"}, []string{"import"}, "want one FILE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := runCLI(t, tt.env, tt.args...)
			if err == nil {
				t.Fatal("run succeeded, want an error")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not contain %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("error %q leaks a password", err)
			}
			var stderr bytes.Buffer
			if code := report(err, &stderr); code != 2 {
				t.Errorf("exit code %d, want 2", code)
			}
			if n := strings.Count(stderr.String(), "\n"); n != 1 {
				t.Errorf("stderr has %d lines, want 1: %q", n, stderr.String())
			}
		})
	}
}

func TestReport(t *testing.T) {
	tests := []struct {
		name     string
		err      error
		wantCode int
		wantOut  string
	}{
		{"nil", nil, 0, ""},
		{"help", errHelp, 0, ""},
		{"runtime", errors.New("listen :8092: address already in use"), 1, "provgate: listen :8092: address already in use\n"},
		{"multi-line joined", errors.Join(errors.New("a"), errors.New("b")), 1, "provgate: a b\n"},
		{"usage", usagef("unknown command %q", "x"), 2, "provgate: unknown command \"x\"\n"},
		{"wrapped usage", fmt.Errorf("ctx: %w", usagef("bad")), 2, "provgate: ctx: bad\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			if got := report(tt.err, &buf); got != tt.wantCode {
				t.Errorf("code = %d, want %d", got, tt.wantCode)
			}
			if got := buf.String(); got != tt.wantOut {
				t.Errorf("stderr = %q, want %q", got, tt.wantOut)
			}
		})
	}
}

func TestHelp(t *testing.T) {
	_, stderr, err := runCLI(t, nil, "serve", "-h")
	if !errors.Is(err, errHelp) {
		t.Fatalf("err = %v, want errHelp", err)
	}
	for _, want := range []string{"-data-dir", "PROVGATE_DATA_DIR", "-admin-password", "PROVGATE_ADMIN_PASSWORD"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("help does not mention %s:\n%s", want, stderr)
		}
	}
}

func TestServeTLS(t *testing.T) {
	t.Parallel()
	dataDir := filepath.Join(t.TempDir(), "nested", "data")
	s := startCLI(t, nil, "serve", "--listen", "127.0.0.1:0", "--data-dir", dataDir)

	fi, err := os.Stat(dataDir)
	if err != nil {
		t.Fatalf("data dir not created: %v", err)
	}
	if got := fi.Mode().Perm(); got != 0o700 {
		t.Errorf("data dir mode %o, want 700", got)
	}
	keyInfo, err := os.Stat(filepath.Join(dataDir, "tls.key"))
	if err != nil {
		t.Fatal(err)
	}
	if got := keyInfo.Mode().Perm(); got != 0o600 {
		t.Errorf("tls.key mode %o, want 600", got)
	}

	resp := getInfoOK(t, skipVerifyClient(), "https://"+s.addr+"/api/v3/info")
	if resp.TLS == nil || resp.TLS.Version < tls.VersionTLS12 {
		t.Fatalf("connection state %+v: want TLS 1.2 or later", resp.TLS)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("Content-Type %q", ct)
	}
	leaf := resp.TLS.PeerCertificates[0]
	if err := leaf.VerifyHostname("localhost"); err != nil {
		t.Error(err)
	}
	for _, ip := range []string{"127.0.0.1", "::1"} {
		if err := leaf.VerifyHostname(ip); err != nil {
			t.Error(err)
		}
	}
	if host, err := os.Hostname(); err == nil {
		if err := leaf.VerifyHostname(host); err != nil {
			t.Error(err)
		}
	}
	if leaf.PublicKeyAlgorithm != x509.ECDSA {
		t.Errorf("key algorithm %v, want ECDSA", leaf.PublicKeyAlgorithm)
	}

	// TLS 1.1 must be refused.
	old := &tls.Config{InsecureSkipVerify: true, MaxVersion: tls.VersionTLS11}
	if conn, err := tls.Dial("tcp", s.addr, old); err == nil {
		conn.Close()
		t.Error("TLS 1.1 handshake succeeded")
	}

	if err := s.stop(); err != nil {
		t.Fatalf("run after cancel = %v, want nil", err)
	}
	if _, err := net.DialTimeout("tcp", s.addr, time.Second); err == nil {
		t.Error("listener still accepting after shutdown")
	}
	if !strings.Contains(s.stderr.String(), `"msg":"stopped"`) {
		t.Errorf("no stop log line:\n%s", s.stderr.String())
	}

	// A second start reuses the generated certificate.
	certBefore, _ := os.ReadFile(filepath.Join(dataDir, "tls.crt"))
	s2 := startCLI(t, nil, "--listen", "127.0.0.1:0", "--data-dir", dataDir)
	resp = getInfoOK(t, skipVerifyClient(), "https://"+s2.addr+"/api/v3/info")
	certAfter, _ := os.ReadFile(filepath.Join(dataDir, "tls.crt"))
	if !bytes.Equal(certBefore, certAfter) {
		t.Error("tls.crt was rewritten on the second start")
	}
	block, _ := pem.Decode(certBefore)
	if block == nil || !bytes.Equal(block.Bytes, resp.TLS.PeerCertificates[0].Raw) {
		t.Error("second start serves a different certificate")
	}
	if strings.Contains(s2.stderr.String(), "generated self-signed") {
		t.Error("second start logged a new certificate")
	}
	if err := s2.stop(); err != nil {
		t.Fatal(err)
	}
}

func TestEnvAndFlagPrecedence(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	env := map[string]string{
		"PROVGATE_NO_TLS":    "true",
		"PROVGATE_LISTEN":    "127.0.0.1:1", // overridden by the flag below
		"PROVGATE_DATA_DIR":  dataDir,
		"PROVGATE_LOG_LEVEL": "debug",
	}
	s := startCLI(t, env, "--listen", "127.0.0.1:0")
	getInfoOK(t, &http.Client{Timeout: 10 * time.Second}, "http://"+s.addr+"/api/v3/info")
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "tls.crt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("--no-tls from the environment still generated a certificate (%v)", err)
	}
	logs := s.stderr.String()
	if !strings.Contains(logs, `"log_level":"debug"`) {
		t.Errorf("log level from the environment not applied:\n%s", logs)
	}
}

func TestLoadConfig(t *testing.T) {
	tests := []struct {
		name  string
		env   map[string]string
		args  []string
		check func(t *testing.T, c Config)
	}{
		{"defaults", nil, nil, func(t *testing.T, c Config) {
			want := defaultConfig()
			if c != want {
				t.Errorf("got %v, want %v", c, want)
			}
			if c.Listen != ":8092" || c.DataDir != "./provgate-data" || c.BodyLimit != 4<<20 ||
				c.MaxTokenTTL != 720*time.Hour || c.ShutdownTimeout != 30*time.Second || c.LogLevel != "info" || c.BenchRoutes {
				t.Errorf("unexpected defaults %v", c)
			}
			if got, want := c.DatabaseDSN(), filepath.Join("provgate-data", "provgate.db"); got != want {
				t.Errorf("DSN %q, want %q", got, want)
			}
		}},
		{"env overrides defaults", map[string]string{
			"PROVGATE_LISTEN": "127.0.0.1:9000", "PROVGATE_BODY_LIMIT": "1MiB", "PROVGATE_MAX_TOKEN_TTL": "1h",
			"PROVGATE_ADMIN_PASSWORD": "from-env", "PROVGATE_BENCH_ROUTES": "true",
			"PROVGATE_DATABASE": "postgres://u:p@127.0.0.1/db",
		}, nil, func(t *testing.T, c Config) {
			if c.Listen != "127.0.0.1:9000" || c.BodyLimit != 1<<20 || c.MaxTokenTTL != time.Hour ||
				c.AdminPassword != "from-env" || !c.BenchRoutes || !c.IsPostgres() {
				t.Errorf("got %#v", c)
			}
		}},
		{"flags override env", map[string]string{"PROVGATE_LISTEN": "127.0.0.1:9000", "PROVGATE_ADMIN_PASSWORD": "from-env"},
			[]string{"--listen", "127.0.0.1:9001", "--admin-password", "from-flag", "--body-limit", "512"},
			func(t *testing.T, c Config) {
				if c.Listen != "127.0.0.1:9001" || c.AdminPassword != "from-flag" || c.BodyLimit != 512 {
					t.Errorf("got %#v", c)
				}
			}},
		{"empty env is unset", map[string]string{"PROVGATE_LISTEN": ""}, nil, func(t *testing.T, c Config) {
			if c.Listen != ":8092" {
				t.Errorf("Listen %q", c.Listen)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := loadConfig(tt.args, envMap(tt.env), io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, c)
		})
	}
}

func TestConfigNeverShowsSecrets(t *testing.T) {
	c := defaultConfig()
	c.AdminPassword = "s3cret-admin-pw"
	for _, dsn := range []string{"postgres://app:s3cret-db-pw@127.0.0.1:5432/db", "postgres://app@127.0.0.1/db?password=s3cret-db-pw",
		"host=db user=app password=s3cret-db-pw dbname=x", "host=db password='s3cret db pw' dbname=x"} {
		c.Database = dsn
		var logs bytes.Buffer
		logger := slog.New(slog.NewJSONHandler(&logs, nil))
		logger.Info("config", "config", c)
		for _, out := range []string{c.String(), fmt.Sprint(c), fmt.Sprintf("%v %+v %#v %s", c, c, c, c), logs.String()} {
			if strings.Contains(out, "s3cret") {
				t.Errorf("secret shown in %q", out)
			}
		}
	}
	var logs bytes.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("config", "config", c)
	if !strings.Contains(logs.String(), `"admin_password":"********"`) {
		t.Errorf("masked password missing from %s", logs.String())
	}
}
