package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/provgate/provgate/backend/license"
)

func TestLicenseCommands(t *testing.T) {
	dir := t.TempDir()
	priv, pub := filepath.Join(dir, "signing.key"), filepath.Join(dir, "signing.pub")

	out, _, err := runCLI(t, nil, "license", "keygen", "--private-key", priv, "--public-key", pub)
	if err != nil {
		t.Fatalf("keygen: %v", err)
	}
	if !strings.Contains(out, priv) || !strings.Contains(out, pub) {
		t.Errorf("keygen output %q does not name the files", out)
	}
	for path, want := range map[string]os.FileMode{priv: 0o600, pub: 0o644} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s mode %o, want %o", path, got, want)
		}
	}
	keyBefore, _ := os.ReadFile(priv)

	t.Run("keygen refuses to overwrite", func(t *testing.T) {
		_, _, err := runCLI(t, nil, "license", "keygen", "--private-key", priv, "--public-key", pub)
		if err == nil || !strings.Contains(err.Error(), "already exists (use --force to overwrite)") {
			t.Fatalf("err = %v", err)
		}
		if keyAfter, _ := os.ReadFile(priv); string(keyAfter) != string(keyBefore) {
			t.Error("private key changed")
		}
	})

	sign := func(t *testing.T, args ...string) string {
		t.Helper()
		out, _, err := runCLI(t, nil, append([]string{"license", "sign", "--private-key", priv}, args...)...)
		if err != nil {
			t.Fatalf("sign: %v", err)
		}
		if strings.Count(out, "\n") != 1 || strings.Count(out, ".") != 1 {
			t.Fatalf("sign output %q is not one document line", out)
		}
		return out
	}
	verify := func(t *testing.T, pubPath, doc string) (string, error) {
		t.Helper()
		docPath := filepath.Join(t.TempDir(), "license")
		writeTestFile(t, docPath, doc, 0o644)
		out, _, err := runCLI(t, nil, "license", "verify", "--public-key", pubPath, "--license", docPath)
		return out, err
	}

	t.Run("valid", func(t *testing.T) {
		doc := sign(t, "--features", "rbac,pools", "--expires", "2099-01-01T00:00:00Z", "--owner", "Acme Corp")
		out, err := verify(t, pub, doc)
		if err != nil {
			t.Fatalf("verify: %v", err)
		}
		for _, want := range []string{"state: valid\n", "owner: Acme Corp\n", "features: pools,rbac\n", "expires: 2099-01-01T00:00:00Z\n"} {
			if !strings.Contains(out, want) {
				t.Errorf("verify output %q lacks %q", out, want)
			}
		}
	})
	t.Run("expired", func(t *testing.T) {
		doc := sign(t, "--features", "rbac", "--issued", "2020-01-01T00:00:00Z", "--expires", "2021-01-01T00:00:00Z", "--owner", "Old")
		out, err := verify(t, pub, doc)
		if !errors.Is(err, license.ErrExpired) {
			t.Fatalf("err = %v, want expired", err)
		}
		if !strings.Contains(out, "state: expired\n") {
			t.Errorf("verify output %q", out)
		}
	})
	t.Run("not yet valid", func(t *testing.T) {
		doc := sign(t, "--issued", "2098-01-01T00:00:00Z", "--expires", "2099-01-01T00:00:00Z", "--owner", "Future")
		out, err := verify(t, pub, doc)
		if !errors.Is(err, license.ErrNotYetValid) || !strings.Contains(out, "state: not yet valid\n") {
			t.Fatalf("err = %v, out %q", err, out)
		}
	})
	t.Run("tampered", func(t *testing.T) {
		doc := sign(t, "--features", "rbac", "--expires", "2099-01-01T00:00:00Z", "--owner", "Acme")
		// Flip one character of the payload.
		b := []byte(doc)
		if b[10] == 'A' {
			b[10] = 'B'
		} else {
			b[10] = 'A'
		}
		_, err := verify(t, pub, string(b))
		if err == nil || !(errors.Is(err, license.ErrTampered) || errors.Is(err, license.ErrMalformed) || errors.Is(err, license.ErrWrongKey)) {
			t.Fatalf("err = %v, want a rejection", err)
		}
	})
	t.Run("wrong key", func(t *testing.T) {
		otherPriv, otherPub := filepath.Join(dir, "other.key"), filepath.Join(dir, "other.pub")
		if _, _, err := runCLI(t, nil, "license", "keygen", "--private-key", otherPriv, "--public-key", otherPub); err != nil {
			t.Fatal(err)
		}
		doc := sign(t, "--expires", "2099-01-01T00:00:00Z", "--owner", "Acme")
		if _, err := verify(t, otherPub, doc); !errors.Is(err, license.ErrWrongKey) {
			t.Fatalf("err = %v, want wrong key", err)
		}
	})
	t.Run("malformed", func(t *testing.T) {
		if _, err := verify(t, pub, "hello"); !errors.Is(err, license.ErrMalformed) {
			t.Fatalf("err = %v, want malformed", err)
		}
	})
	t.Run("keygen force", func(t *testing.T) {
		if _, _, err := runCLI(t, nil, "license", "keygen", "--private-key", priv, "--public-key", pub, "--force"); err != nil {
			t.Fatal(err)
		}
		if keyAfter, _ := os.ReadFile(priv); string(keyAfter) == string(keyBefore) {
			t.Error("--force did not replace the key")
		}
	})
	t.Run("sign with public key file", func(t *testing.T) {
		_, _, err := runCLI(t, nil, "license", "sign", "--private-key", pub, "--expires", "2099-01-01T00:00:00Z", "--owner", "x")
		if err == nil || !strings.Contains(err.Error(), pub) {
			t.Fatalf("err = %v, want an error naming %s", err, pub)
		}
	})
}
