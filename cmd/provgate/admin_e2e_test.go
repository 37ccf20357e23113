package main

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const ignoredAdminPassword = "--admin-password ignored"

// TestE2EAdminResetPassword: a restart with another --admin-password warns
// that it changed nothing; provgate admin reset-password sets a new password
// in the stopped server's store and kills the user's tokens.
func TestE2EAdminResetPassword(t *testing.T) {
	for _, db := range databases(t) {
		t.Run(db.Name, func(t *testing.T) {
			dir := t.TempDir()
			storeArgs := []string{"--data-dir", dir}
			if db.DSN != "" {
				storeArgs = append(storeArgs, "--database", db.DSN)
			}
			s := startE2EIn(t, db, dir)
			oldToken := s.Token("rocketskates", admin(), "?ttl=1h")
			s.AddUser("rp-alice", "alice-Pw-1")
			aliceToken := s.Token("rp-alice", basic("rp-alice", "alice-Pw-1"), "?ttl=1h")
			s.Stop()

			// The same password on a restart is no mistake: no warning.
			s = startE2EIn(t, db, dir)
			s.Must(200, "GET", "/info", nil, admin())
			s.Stop()
			if strings.Contains(s.Stderr.String(), ignoredAdminPassword) {
				t.Fatalf("warning on a restart with the admin's own password:\n%s", s.Stderr.String())
			}

			pwFile := filepath.Join(t.TempDir(), "pw")
			if err := os.WriteFile(pwFile, []byte("Reset-Pa55word\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			// On SQLite the admin's new password is hashed at the default
			// scrypt cost, as the shipped command does, and the server
			// checks that hash; the other resets hash at the test cost.
			cost := hooks{scryptN: testScryptN}
			if db.DSN == "" {
				cost = hooks{}
			}
			out, _, err := runCLIWith(t, nil, cost, append([]string{"admin", "reset-password", "rocketskates", "--password-file", pwFile}, storeArgs...)...)
			if err != nil || !strings.Contains(out, "Password of user rocketskates changed") {
				t.Fatalf("reset-password: %v %s", err, out)
			}
			// Without --password-file a random one is printed once.
			out, _, err = runCLI(t, nil, append([]string{"admin", "reset-password", "rp-alice"}, storeArgs...)...)
			m := regexp.MustCompile(`New password for user rp-alice: (\S+)\n`).FindStringSubmatch(out)
			if err != nil || m == nil {
				t.Fatalf("reset-password without a file: %v %q", err, out)
			}
			alicePW := m[1]
			_, _, err = runCLI(t, nil, append([]string{"admin", "reset-password", "rp-nobody", "--password-file", pwFile}, storeArgs...)...)
			if err == nil || !strings.Contains(err.Error(), "user rp-nobody does not exist") {
				t.Fatalf("reset of a missing user: %v", err)
			}

			// The restart still passes the first password: it is ignored, and
			// the log says so.
			s = startE2EIn(t, db, dir)
			if !strings.Contains(s.Stderr.String(), ignoredAdminPassword) || !strings.Contains(s.Stderr.String(), "provgate admin reset-password") {
				t.Fatalf("no warning that --admin-password was ignored:\n%s", s.Stderr.String())
			}
			s.Must(200, "GET", "/info", nil, basic("rocketskates", "Reset-Pa55word"))
			s.Must(200, "GET", "/info", nil, basic("rp-alice", alicePW))
			wantDRPError(t, s.Do("GET", "/info", nil, admin()), 403, "", "")
			wantDRPError(t, s.Do("GET", "/info", nil, basic("rp-alice", "alice-Pw-1")), 403, "", "")
			wantDRPError(t, s.Do("GET", "/info", nil, bearer(oldToken)), 403, "", "")
			wantDRPError(t, s.Do("GET", "/info", nil, bearer(aliceToken)), 403, "", "")
			if strings.Contains(s.Stderr.String(), "Reset-Pa55word") || strings.Contains(s.Stderr.String(), alicePW) {
				t.Fatal("a password was logged")
			}
		})
	}
	t.Run("no store", func(t *testing.T) {
		empty := t.TempDir()
		_, _, err := runCLI(t, nil, "admin", "reset-password", "rocketskates", "--data-dir", empty)
		if err == nil || !strings.Contains(err.Error(), "no store at "+filepath.Join(empty, "provgate.db")) {
			t.Fatalf("reset without a store: %v", err)
		}
		if ents, _ := os.ReadDir(empty); len(ents) != 0 {
			t.Fatalf("reset created %v in an empty data dir", ents)
		}
	})
	t.Run("usage", func(t *testing.T) {
		for _, args := range [][]string{{"admin"}, {"admin", "reset"}, {"admin", "reset-password"}, {"admin", "reset-password", "a", "b"}} {
			_, _, err := runCLI(t, nil, args...)
			var ue usageError
			if err == nil || !errors.As(err, &ue) {
				t.Errorf("%v: %v, want a usage error", args, err)
			}
		}
	})
}
