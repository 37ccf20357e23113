package opa

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
	"sync/atomic"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/bundle"

	"github.com/provgate/provgate/policies"
)

// signingKey is an RSA key pair in PEM, as `opa sign --signing-key` and
// --policy-bundle-public-key take them.
func signingKey(t *testing.T) (priv, pub string) {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)})),
		string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}

// buildBundle writes the files of an example extension as a .tar.gz
// bundle with revision rev, as `opa build --revision rev` does, signed
// with priv when it is set (as `opa build --signing-key` does), with
// sequence 1. tamper, when set, changes a module after signing.
func buildBundle(t *testing.T, example, rev, priv string, tamper func(*bundle.Bundle)) []byte {
	t.Helper()
	return buildSequenced(t, example, rev, priv, 1, tamper)
}

// buildSequenced is buildBundle with sequence seq in the manifest of a
// signed bundle (metadata.provgate.sequence); 0 leaves it out.
func buildSequenced(t *testing.T, example, rev, priv string, seq int64, tamper func(*bundle.Bundle)) []byte {
	t.Helper()
	b := bundle.Bundle{Manifest: bundle.Manifest{Revision: rev}, Data: map[string]any{}}
	if priv != "" && seq != 0 {
		b.Manifest.Metadata = map[string]any{"provgate": map[string]any{"sequence": seq}}
	}
	dir := filepath.Join(examples, example)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
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
			var doc map[string]any
			if err := jsonUnmarshal(raw, &doc); err != nil {
				t.Fatal(err)
			}
			b.Data = doc
		}
	}
	if priv != "" {
		if err := b.GenerateSignature(bundle.NewSigningConfig(priv, "RS256", ""), "provgate", false); err != nil {
			t.Fatal(err)
		}
	}
	if tamper != nil {
		tamper(&b)
	}
	var buf bytes.Buffer
	if err := bundle.NewWriter(&buf).Write(b); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func writeBundle(t *testing.T, raw []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "bundle.tar.gz")
	if err := os.WriteFile(p, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func carolPatch() policies.Input {
	in := request(user("carol", "superuser"), claim("machines", "update:/Description", "m1"))
	in.Method = "PATCH"
	return in
}

// A signed bundle loads: its manifest revision is the policy's, its
// extensions veto, its data is under data.provgate_ext.
func TestSignedBundleLoads(t *testing.T) {
	priv, pub := signingKey(t)
	path := writeBundle(t, buildBundle(t, "freeze", "release-42", priv, nil))
	e := newTestEngine(t, Options{Bundle: BundleOptions{Location: path, PublicKey: pub}})
	if got := e.Revision(); got != "release-42" {
		t.Errorf("Revision() = %q, want the manifest's", got)
	}
	if d := decide(t, e, carolPatch()); d.Allow || !strings.Contains(d.Reasons[0], "change freeze for carol") {
		t.Errorf("bundle extension: %+v", d)
	}
}

// A tampered bundle, an unsigned one and one signed with another key are
// refused when a public key is configured, at start and on reload (the
// served bundle stays).
func TestTamperedBundleRefused(t *testing.T) {
	priv, pub := signingKey(t)
	otherPriv, _ := signingKey(t)
	tampered := buildBundle(t, "freeze", "r2", priv, func(b *bundle.Bundle) {
		for i := range b.Modules {
			if strings.HasSuffix(b.Modules[i].Path, "freeze.rego") {
				b.Modules[i].Raw = bytes.ReplaceAll(b.Modules[i].Raw, []byte(`not input.method in reads`), []byte(`false`))
			}
		}
	})
	for name, raw := range map[string][]byte{
		"tampered":    tampered,
		"unsigned":    buildBundle(t, "freeze", "r2", "", nil),
		"another key": buildBundle(t, "freeze", "r2", otherPriv, nil),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := New(context.Background(), Options{Bundle: BundleOptions{Location: writeBundle(t, raw), PublicKey: pub}})
			if err == nil {
				t.Fatal("New accepted the bundle")
			}
			t.Log(err)

			path := writeBundle(t, buildBundle(t, "freeze", "r1", priv, nil))
			e := newTestEngine(t, Options{Bundle: BundleOptions{Location: path, PublicKey: pub}})
			if err := os.WriteFile(path, raw, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := e.Reload(context.Background()); err == nil {
				t.Fatal("Reload accepted the bundle")
			}
			if e.Revision() != "r1" {
				t.Errorf("revision %q after a refused reload", e.Revision())
			}
		})
	}
}

// bundleServer serves a bundle with an ETag and counts the requests and
// the 304 answers.
type bundleServer struct {
	mu           sync.Mutex
	body         []byte
	etag         string
	gets, unmods atomic.Int64
}

func (s *bundleServer) set(body []byte, etag string) {
	s.mu.Lock()
	s.body, s.etag = body, etag
	s.mu.Unlock()
}

func (s *bundleServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	body, etag := s.body, s.etag
	s.mu.Unlock()
	s.gets.Add(1)
	if r.Header.Get("If-None-Match") == etag {
		s.unmods.Add(1)
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Header().Set("ETag", etag)
	_, _ = w.Write(body)
}

// Two engines on the same bundle URL serve the same revision; polling with
// the ETag costs a 304 while nothing changes, and a new bundle is served by
// both once its tests pass. A bundle whose tests fail is never activated.
func TestBundleURLPolling(t *testing.T) {
	srv := &bundleServer{}
	srv.set(buildBundle(t, "freeze", "v1", "", nil), `"v1"`)
	hs := httptest.NewServer(srv)
	defer hs.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var replicas []*Engine
	for range 2 {
		e := newTestEngine(t, Options{Bundle: BundleOptions{Location: hs.URL + "/bundle.tar.gz", AllowHTTP: true}})
		e.WatchDir(ctx, 20*time.Millisecond)
		replicas = append(replicas, e)
	}
	for i, e := range replicas {
		if e.Revision() != "v1" {
			t.Errorf("replica %d revision %q", i, e.Revision())
		}
	}
	waitFor(t, func() bool { return srv.unmods.Load() >= 4 }, "304 answers to unchanged polls")

	// A bundle whose own test fails (its data is mistyped): refused.
	broken := buildBundle(t, "freeze", "v2-broken", "", func(b *bundle.Bundle) {
		b.Data = map[string]any{"freeze": map[string]any{"users": "carol", "reason": "x"}}
	})
	srv.set(broken, `"v2-broken"`)
	waitFor(t, func() bool {
		_, refused := replicas[0].ReloadCounts()
		_, refused1 := replicas[1].ReloadCounts()
		return refused > 0 && refused1 > 0
	}, "the broken bundle refused by both replicas")
	for i, e := range replicas {
		if e.Revision() != "v1" {
			t.Errorf("replica %d serves %q after a refused bundle", i, e.Revision())
		}
	}
	// A refused bundle is not fetched and tested again: later polls are
	// answered 304.
	before := srv.unmods.Load()
	waitFor(t, func() bool { return srv.unmods.Load() >= before+4 }, "304 answers after the refusal")
	for i, e := range replicas {
		if _, refused := e.ReloadCounts(); refused != 1 {
			t.Errorf("replica %d refused the broken bundle %d times, want once", i, refused)
		}
	}

	srv.set(buildBundle(t, "protected", "v3", "", nil), `"v3"`)
	waitFor(t, func() bool { return replicas[0].Revision() == "v3" && replicas[1].Revision() == "v3" }, "v3 on both replicas")
	if d := decide(t, replicas[1], carolPatch()); !d.Allow {
		t.Errorf("the freeze of v1 outlived its bundle: %+v", d)
	}
}

func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func jsonUnmarshal(raw []byte, v any) error { return json.Unmarshal(raw, v) }
