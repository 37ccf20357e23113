package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	// Test fixtures only: bundles are built and signed as `opa build
	// --signing-key` does, with OPA's own bundle package.
	"github.com/open-policy-agent/opa/v1/bundle"
)

// OPA bundles end to end (docs/design.md §9.7): replicas given the same
// bundle URL serve, and report, the same revision; a signed bundle loads
// and a tampered one is refused.

// e2eSigningKey is an RSA key pair in PEM; the public key is written to a
// file for --policy-bundle-public-key.
func e2eSigningKey(t *testing.T) (priv, pubFile string) {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	pubFile = filepath.Join(t.TempDir(), "bundle.pub")
	if err := os.WriteFile(pubFile, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)})), pubFile
}

// e2eBundle builds a signed .tar.gz bundle of the example extension with
// revision rev and sequence seq (metadata.provgate.sequence, none when 0);
// tamper changes a module after signing.
func e2eBundle(t *testing.T, example, rev, priv string, seq int64, tamper bool) []byte {
	t.Helper()
	dir := filepath.Join("..", "..", "testdata", "policy", "extensions", example)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	b := bundle.Bundle{Manifest: bundle.Manifest{Revision: rev}, Data: map[string]any{}}
	if seq != 0 {
		b.Manifest.Metadata = map[string]any{"provgate": map[string]any{"sequence": seq}}
	}
	for _, e := range entries {
		raw, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case strings.HasSuffix(e.Name(), ".rego"):
			b.Modules = append(b.Modules, bundle.ModuleFile{Path: "/" + e.Name(), URL: "/" + e.Name(), Raw: raw})
		case e.Name() == "data.json":
			if err := json.Unmarshal(raw, &b.Data); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := b.GenerateSignature(bundle.NewSigningConfig(priv, "RS256", ""), "provgate", false); err != nil {
		t.Fatal(err)
	}
	if tamper {
		for i := range b.Modules {
			b.Modules[i].Raw = bytes.ReplaceAll(b.Modules[i].Raw, []byte(`input.operation == "delete"`), []byte(`input.operation == "never"`))
		}
	}
	var buf bytes.Buffer
	if err := bundle.NewWriter(&buf).Write(b); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// etagServer serves one bundle at a time with its revision as ETag.
type etagServer struct {
	mu         sync.Mutex
	body       []byte
	etag       string
	notChanged int
}

func (s *etagServer) set(body []byte, etag string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.body, s.etag = body, etag
}

func (s *etagServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.Header.Get("If-None-Match") == s.etag {
		s.notChanged++
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Header().Set("ETag", s.etag)
	_, _ = w.Write(s.body)
}

func policyRevision(t *testing.T, s *tserver) string {
	t.Helper()
	var info struct {
		Policy struct{ Revision string } `json:"provgate_policy"`
	}
	s.Must(200, "GET", "/info", nil, admin()).JSON(t, &info)
	return info.Policy.Revision
}

// Two replicas (sharing the PostgreSQL database when there is one) poll
// the same bundle URL: both report its manifest revision, both enforce its
// extension, and a new signed bundle reaches both; a tampered one reaches
// neither.
func TestE2EPolicyBundleReplicas(t *testing.T) {
	t.Parallel()
	priv, pub := e2eSigningKey(t)
	for _, db := range databases(t) {
		t.Run(db.Name, func(t *testing.T) {
			t.Parallel()
			srv := &etagServer{}
			srv.set(e2eBundle(t, "protected", "release-1", priv, 1, false), `"release-1"`)
			hs := httptest.NewServer(srv)
			defer hs.Close()
			args := []string{"--policy-bundle", hs.URL + "/bundles/provgate.tar.gz", "--policy-bundle-public-key", pub,
				"--policy-watch-interval", "100ms", "--policy-bundle-allow-http"}
			a := startE2E(t, db, args...)
			b := startE2E(t, db, args...)
			for i, s := range []*tserver{a, b} {
				if got := policyRevision(t, s); got != "release-1" {
					t.Fatalf("replica %d reports revision %q, want release-1", i, got)
				}
			}
			// The protected machine of each replica: one shared machine on
			// PostgreSQL, one per replica on SQLite (each has its own file).
			uuid := map[*tserver]string{}
			for _, s := range []*tserver{a, b} {
				if db.DSN != "" && s == b {
					uuid[b] = uuid[a]
					continue
				}
				var m struct{ Uuid string }
				s.Must(201, "POST", "/machines", map[string]any{"Name": "bundle-db1", "Meta": map[string]string{"protected": "true"}}, admin()).JSON(t, &m)
				uuid[s] = m.Uuid
			}
			for _, s := range []*tserver{a, b} {
				refusedWith(t, s.Do("DELETE", "/machines/"+uuid[s], nil, admin()), "machine bundle-db1 is protected")
			}

			// A tampered bundle (the rule defused after signing): refused by
			// both, which keep release-1 and its rule.
			refused := []int{countLines(a.Stderr.String(), "policy reload failed"), countLines(b.Stderr.String(), "policy reload failed")}
			srv.set(e2eBundle(t, "protected", "release-2-tampered", priv, 2, true), `"release-2-tampered"`)
			for i, s := range []*tserver{a, b} {
				waitLog(t, s, refused[i], reloadLimit, "policy reload failed", "digest mismatch")
				if got := policyRevision(t, s); got != "release-1" {
					t.Fatalf("replica %d serves %q after a tampered bundle", i, got)
				}
				refusedWith(t, s.Do("DELETE", "/machines/"+uuid[s], nil, admin()), "machine bundle-db1 is protected")
			}

			// A new signed bundle (the freeze example): both switch to it.
			srv.set(e2eBundle(t, "freeze", "release-3", priv, 3, false), `"release-3"`)
			deadline := time.Now().Add(reloadLimit)
			for _, s := range []*tserver{a, b} {
				for policyRevision(t, s) != "release-3" {
					if time.Now().After(deadline) {
						t.Fatalf("release-3 not served\n%s", reloadLogTail(s.Stderr.String(), 3000))
					}
					time.Sleep(50 * time.Millisecond)
				}
			}
			a.Must(200, "DELETE", "/machines/"+uuid[a], nil, admin())
		})
	}
}

// A server given a tampered bundle, or an unsigned one while a key is
// configured, does not start, and says why.
func TestE2EPolicyBundleTamperedRefusedAtStart(t *testing.T) {
	t.Parallel()
	priv, pub := e2eSigningKey(t)
	for name, raw := range map[string][]byte{
		"tampered": e2eBundle(t, "protected", "r1", priv, 1, true),
		"signed":   e2eBundle(t, "protected", "r1", priv, 1, false),
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "bundle.tar.gz")
			if err := os.WriteFile(path, raw, 0o600); err != nil {
				t.Fatal(err)
			}
			args := []string{"serve", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--policy-bundle", path,
				"--policy-bundle-public-key", pub}
			if name == "signed" {
				// Loads: checked through a running server.
				s := startE2E(t, dbCase{Name: "sqlite"}, args[5:]...)
				if got := policyRevision(t, s); got != "r1" {
					t.Fatalf("revision %q", got)
				}
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var stderr logBuffer
			err := runWith(ctx, args, func(k string) string {
				if k == "PROVGATE_ADMIN_PASSWORD" {
					return e2eAdminPassword
				}
				return ""
			}, &logBuffer{}, &stderr, hooks{compiled: e2eCompiled, scryptN: testScryptN})
			if err == nil || !strings.Contains(err.Error(), "digest mismatch") {
				t.Fatalf("server start with a tampered bundle: %v", err)
			}
		})
	}
}
