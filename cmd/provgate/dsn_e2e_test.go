package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/provgate/provgate/backend/store/storetest"
)

const kvPassword = "S3cret-kv-Pw"

// keywordValueDSN spells the postgres:// test DSN as libpq keyword/value
// pairs, with a password the server (trust authentication) never asks for.
func keywordValueDSN(t *testing.T, dsn string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	port := u.Port()
	if port == "" {
		port = "5432"
	}
	kv := fmt.Sprintf("host=%s port=%s user=%s dbname=%s password=%s", u.Hostname(), port, u.User.Username(),
		strings.TrimPrefix(u.Path, "/"), kvPassword)
	for k, vs := range u.Query() {
		kv += " " + k + "=" + vs[0]
	}
	return kv
}

// TestE2EDatabaseDSN: libpq keyword/value DSNs select PostgreSQL (never a
// SQLite file named after them), anything but a DSN or sqlite:PATH is
// refused in one line, and no log line, error or /api/v3/info shows the
// password.
func TestE2EDatabaseDSN(t *testing.T) {
	t.Run("unreachable keyword/value", func(t *testing.T) {
		dir := t.TempDir()
		cwd := t.TempDir()
		t.Chdir(cwd)
		dsn := "host=127.0.0.1 port=1 user=nobody password=" + kvPassword + " dbname=x connect_timeout=2"
		var out, errb logBuffer
		err := run(context.Background(), []string{"serve", "--data-dir", dir, "--listen", "127.0.0.1:0", "--database", dsn},
			envMap(nil), &out, &errb)
		if err == nil {
			t.Fatal("serve with an unreachable database succeeded")
		}
		if !strings.Contains(err.Error(), "cannot connect to PostgreSQL 127.0.0.1:1/x") {
			t.Errorf("error does not name the PostgreSQL server: %v", err)
		}
		var status logBuffer
		report(err, &status)
		for what, text := range map[string]string{"error": err.Error(), "reported": status.String(), "stderr": errb.String(), "stdout": out.String()} {
			if strings.Contains(text, kvPassword) {
				t.Errorf("%s shows the DSN password: %s", what, text)
			}
		}
		if !strings.Contains(errb.String(), `"database":"host=127.0.0.1 port=1 user=nobody password=xxxxx dbname=x connect_timeout=2"`) {
			t.Errorf("start log does not show the redacted DSN:\n%s", errb.String())
		}
		for _, d := range []string{dir, cwd} {
			ents, _ := os.ReadDir(d)
			for _, e := range ents {
				if strings.Contains(e.Name(), ".db") || strings.Contains(e.Name(), "host=") {
					t.Errorf("a SQLite file was created in %s: %s", d, e.Name())
				}
			}
		}
	})
	t.Run("refused", func(t *testing.T) {
		for _, dsn := range []string{"./provgate.db", "/var/lib/provgate.db", "mysql://u:" + kvPassword + "@h/db", "sqlite:", "user=x password='" + kvPassword} {
			_, stderr, err := runCLI(t, nil, "serve", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--database", dsn)
			var ue usageError
			if err == nil || !errors.As(err, &ue) {
				t.Fatalf("--database %q: %v, want a usage error", dsn, err)
			}
			var line logBuffer
			report(err, &line)
			if strings.Count(line.String(), "\n") != 1 || !strings.HasPrefix(line.String(), "provgate: --database: ") {
				t.Errorf("--database %q: reported %q, want one line naming --database", dsn, line.String())
			}
			if strings.Contains(line.String(), kvPassword) || strings.Contains(stderr, kvPassword) {
				t.Errorf("--database %q: password shown: %s %s", dsn, line.String(), stderr)
			}
		}
	})
	t.Run("explicit sqlite path", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "explicit.db")
		s := startE2E(t, dbCase{Name: "sqlite"}, "--database", "sqlite:"+path)
		s.Must(200, "GET", "/info", nil, admin())
		if _, err := os.Stat(path); err != nil {
			t.Fatalf("sqlite:%s: %v", path, err)
		}
		if _, err := os.Stat(filepath.Join(s.DataDir, "provgate.db")); err == nil {
			t.Fatal("the default SQLite file was created although --database named another")
		}
	})
	t.Run("keyword/value on postgres", func(t *testing.T) {
		pg := storetest.PostgresDSN(t)
		if pg == "" {
			return
		}
		s := startE2E(t, dbCase{Name: "postgres", DSN: keywordValueDSN(t, pg)})
		s.Must(201, "POST", "/machines", map[string]any{"Name": "kv-m1"}, admin())
		info := s.Must(200, "GET", "/info", nil, admin())
		if _, err := os.Stat(filepath.Join(s.DataDir, "provgate.db")); err == nil {
			t.Fatal("a keyword/value DSN started the server on SQLite")
		}
		// The machine is in the PostgreSQL schema the DSN names.
		if r := s.Must(200, "GET", "/machines/Name:kv-m1", nil, admin()); !strings.Contains(string(r.Body), "kv-m1") {
			t.Fatalf("machine: %s", r)
		}
		s.Stop()
		for what, text := range map[string]string{"info": string(info.Body), "stderr": s.Stderr.String(), "stdout": s.Stdout.String()} {
			if strings.Contains(text, kvPassword) {
				t.Errorf("%s shows the DSN password", what)
			}
		}
		if !strings.Contains(s.Stderr.String(), "password=xxxxx") {
			t.Errorf("start log does not show the redacted DSN:\n%s", s.Stderr.String())
		}
	})
}
