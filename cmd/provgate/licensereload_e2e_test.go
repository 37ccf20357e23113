package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestE2ELicenseReloadSignal: a write refused for want of the rbac license
// says how to get one; SIGHUP reads --license and --license-public-key
// again, as a start does, and a broken file never takes the working license
// away. SIGHUP reaches each server through its own reload channel.
func TestE2ELicenseReloadSignal(t *testing.T) {
	t.Parallel()
	for _, db := range databases(t) {
		t.Run(db.Name, func(t *testing.T) {
			t.Parallel()
			k := newLicenseKit(t)
			now := time.Now()
			file := filepath.Join(t.TempDir(), "license.txt")
			write := func(doc string) {
				t.Helper()
				if err := os.WriteFile(file, []byte(doc+"\n"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			write(k.sign("other", now.Add(-time.Hour), now.Add(24*time.Hour)))
			s := startE2E(t, db, "--license-public-key", k.pub, "--license", file)
			hup := func() { s.Reload <- syscall.SIGHUP }

			e := wantDRPError(t, s.Do("POST", "/roles", map[string]any{"Name": "hup-r1", "Claims": []any{}}, admin()),
				403, "AUTH", "roles create is a licensed enterprise feature")
			for _, want := range []string{"provgate license keygen --private-key", "provgate license sign --private-key",
				"--features rbac", "--license-public-key PUB --license LICENSE", "SIGHUP"} {
				if !strings.Contains(e.messages(), want) {
					t.Errorf("refusal does not say how to get a license (%q): %s", want, e.messages())
				}
			}

			write(k.sign("rbac", now.Add(-time.Hour), now.Add(24*time.Hour)))
			hup()
			// The reload is logged once the policy sees the new license
			// (reloadLicense); the license view may show it a moment before.
			waitFor(t, 20*time.Second, "the reload's log line after SIGHUP", func() bool {
				return strings.Contains(s.Stderr.String(), `"msg":"license reloaded","valid":true`)
			})
			if !accLicenseView(t, s).rbac() {
				t.Fatal("the license view does not show the reloaded rbac license")
			}
			s.Must(201, "POST", "/roles", map[string]any{"Name": "hup-r1", "Claims": []any{}}, admin())

			// A broken file: the reload fails, says so, and the license stays.
			write("not a license")
			hup()
			waitFor(t, 20*time.Second, "the failed reload's log line", func() bool {
				return strings.Contains(s.Stderr.String(), "license reload failed; the previous license stays")
			})
			if !accLicenseView(t, s).rbac() {
				t.Fatal("a broken license file took the license away")
			}
			s.Must(201, "POST", "/roles", map[string]any{"Name": "hup-r2", "Claims": []any{}}, admin())
		})
	}
}

// waitFor polls cond until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %s", what, d)
		}
	}
}
