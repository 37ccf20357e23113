package main

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestInitialAdminPassword(t *testing.T) {
	t.Parallel()
	t.Run("configured", func(t *testing.T) {
		cfg := defaultConfig()
		cfg.DataDir, cfg.AdminPassword = t.TempDir(), "given-password"
		var out bytes.Buffer
		pw, generated, err := initialAdminPassword(cfg, &out)
		if err != nil || pw != "given-password" || generated {
			t.Fatalf("got %q, %v, %v", pw, generated, err)
		}
		if out.Len() != 0 {
			t.Errorf("configured password printed: %q", out.String())
		}
		if _, err := os.Stat(filepath.Join(cfg.DataDir, "initial-admin-password")); !os.IsNotExist(err) {
			t.Errorf("password file written for a configured password (%v)", err)
		}
	})
	t.Run("generated", func(t *testing.T) {
		cfg := defaultConfig()
		cfg.DataDir = t.TempDir()
		path := filepath.Join(cfg.DataDir, "initial-admin-password")
		// A stale file from an earlier store, with a loose mode.
		writeTestFile(t, path, "stale\n", 0o644)
		var out bytes.Buffer
		pw, generated, err := initialAdminPassword(cfg, &out)
		if err != nil || !generated {
			t.Fatalf("got %v, %v", generated, err)
		}
		if len(pw) < 20 || strings.TrimSpace(pw) != pw {
			t.Errorf("password %q: want at least 20 characters", pw)
		}
		if n := strings.Count(out.String(), pw); n != 1 {
			t.Errorf("password printed %d times in %q, want once", n, out.String())
		}
		if !strings.Contains(out.String(), "rocketskates") || !strings.Contains(out.String(), path) {
			t.Errorf("output %q does not name the user and file", out.String())
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(string(data)) != pw {
			t.Errorf("file holds %q, want %q", data, pw)
		}
		fi, _ := os.Stat(path)
		if got := fi.Mode().Perm(); got != 0o600 {
			t.Errorf("file mode %o, want 600", got)
		}
		pw2, _, err := initialAdminPassword(cfg, &bytes.Buffer{})
		if err != nil || pw2 == pw {
			t.Errorf("second password %q (err %v) equals the first", pw2, err)
		}
	})
	t.Run("unwritable", func(t *testing.T) {
		cfg := defaultConfig()
		cfg.DataDir = filepath.Join(t.TempDir(), "missing")
		var out bytes.Buffer
		if _, _, err := initialAdminPassword(cfg, &out); err == nil {
			t.Fatal("want an error when the file cannot be written")
		}
		if out.Len() != 0 {
			t.Errorf("password printed although it was not saved: %q", out.String())
		}
	})
}

// TestFirstStartPassword runs the server without a configured password: the
// generated one is printed once, saved with mode 0600, works, and survives a
// restart unchanged.
func TestFirstStartPassword(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	noPW := map[string]string{"PROVGATE_ADMIN_PASSWORD": ""}
	s := startCLI(t, noPW, "--listen", "127.0.0.1:0", "--data-dir", dataDir)
	path := filepath.Join(dataDir, "initial-admin-password")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pw := strings.TrimSpace(string(data))
	if n := strings.Count(s.stdout.String(), pw); n != 1 {
		t.Errorf("password printed %d times, want once: %q", n, s.stdout.String())
	}
	if strings.Contains(s.stderr.String(), pw) {
		t.Error("password appears in the logs")
	}
	req, _ := http.NewRequest(http.MethodGet, "https://"+s.addr+"/api/v3/info", nil)
	req.SetBasicAuth("rocketskates", pw)
	resp, err := skipVerifyClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("info with the generated password: status %d", resp.StatusCode)
	}
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}

	s2 := startCLI(t, noPW, "--listen", "127.0.0.1:0", "--data-dir", dataDir)
	if err := s2.stop(); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(s2.stdout.String(), "password") {
		t.Errorf("second start printed a password: %q", s2.stdout.String())
	}
	if again, _ := os.ReadFile(path); string(again) != string(data) {
		t.Error("second start changed the password file")
	}
}
