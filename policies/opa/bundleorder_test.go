package opa

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
)

// memSequences is a SequenceStore in memory, shared by the engines of a
// test as a store is by replicas.
type memSequences struct {
	mu  sync.Mutex
	seq BundleSequence
}

func (m *memSequences) LoadBundleSequence(context.Context) (BundleSequence, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.seq, nil
}

func (m *memSequences) SaveBundleSequence(_ context.Context, s BundleSequence) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s.Sequence > m.seq.Sequence {
		m.seq = s
	}
	return nil
}

func reloadWith(t *testing.T, e *Engine, path string, raw []byte) error {
	t.Helper()
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	return e.Reload(context.Background())
}

// TestSignedBundleOrder: a signed bundle carries a sequence in its signed
// manifest; one older than the bundle served, or another bundle with the
// same sequence, is refused and the served one stays; a newer one is
// served. Replaying the older signed bundle (which allowed what the newer
// one closed) changes nothing.
func TestSignedBundleOrder(t *testing.T) {
	priv, pub := signingKey(t)
	ctx := context.Background()
	seqs := &memSequences{}
	v5 := buildSequenced(t, "freeze", "v5", priv, 5, nil)
	path := writeBundle(t, v5)
	e := newTestEngine(t, Options{Bundle: BundleOptions{Location: path, PublicKey: pub, Sequences: seqs}})
	if e.Revision() != "v5" || seqs.seq.Sequence != 5 {
		t.Fatalf("revision %q, saved sequence %d", e.Revision(), seqs.seq.Sequence)
	}
	if d := decide(t, e, carolPatch()); d.Allow {
		t.Fatal("the freeze of v5 does not hold")
	}
	for name, tc := range map[string]struct {
		raw  []byte
		want string
	}{
		"older":           {buildSequenced(t, "protected", "v3", priv, 3, nil), "bundle sequence 3 is older than sequence 5"},
		"same, other":     {buildSequenced(t, "protected", "v5b", priv, 5, nil), "bundle sequence 5 was already activated with other content"},
		"no sequence":     {buildSequenced(t, "protected", "v9", priv, 0, nil), "metadata.provgate.sequence"},
		"zero or less":    {buildSequenced(t, "protected", "v9", priv, -2, nil), "metadata.provgate.sequence"},
		"unsigned, newer": {buildSequenced(t, "protected", "v9", "", 9, nil), "signature"},
	} {
		t.Run(name, func(t *testing.T) {
			err := reloadWith(t, e, path, tc.raw)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("reload: %v, want a refusal naming %q", err, tc.want)
			}
			if e.Revision() != "v5" {
				t.Fatalf("revision %q after a refused bundle", e.Revision())
			}
			if d := decide(t, e, carolPatch()); d.Allow {
				t.Fatal("a refused bundle lifted the freeze")
			}
		})
	}
	// The same bundle again is no change of order.
	if err := reloadWith(t, e, path, v5); err != nil {
		t.Fatalf("the served bundle again: %v", err)
	}
	v6 := buildSequenced(t, "protected", "v6", priv, 6, nil)
	if err := reloadWith(t, e, path, v6); err != nil || e.Revision() != "v6" {
		t.Fatalf("newer bundle: %v, revision %q", err, e.Revision())
	}
	if seqs.seq.Sequence != 6 {
		t.Fatalf("saved sequence %d, want 6", seqs.seq.Sequence)
	}
	if err := reloadWith(t, e, path, v5); err == nil || e.Revision() != "v6" {
		t.Fatalf("replayed v5 after v6: %v, revision %q", err, e.Revision())
	}

	// Another engine sharing the saved sequence (a replica, or this one
	// restarted) refuses to start on an older bundle, and starts on the
	// newest one.
	_, err := New(ctx, Options{Bundle: BundleOptions{Location: writeBundle(t, v5), PublicKey: pub, Sequences: seqs}})
	if err == nil || !strings.Contains(err.Error(), "older than sequence 6") {
		t.Fatalf("start on an older bundle: %v", err)
	}
	if e2 := newTestEngine(t, Options{Bundle: BundleOptions{Location: writeBundle(t, v6), PublicKey: pub, Sequences: seqs}}); e2.Revision() != "v6" {
		t.Fatalf("restart on the newest bundle: revision %q", e2.Revision())
	}

	// Unsigned bundles (no key) are not ordered.
	plain := writeBundle(t, buildSequenced(t, "freeze", "u2", "", 0, nil))
	u := newTestEngine(t, Options{Bundle: BundleOptions{Location: plain}})
	if err := reloadWith(t, u, plain, buildSequenced(t, "protected", "u1", "", 0, nil)); err != nil || u.Revision() != "u1" {
		t.Fatalf("unsigned bundle: %v, revision %q", err, u.Revision())
	}
}

// TestPlainHTTPBundleRefused: a bundle URL in plain http is refused, at
// start and without a request, unless AllowHTTP opts in; an https URL
// redirecting to plain http is refused the same way.
func TestPlainHTTPBundleRefused(t *testing.T) {
	srv := &bundleServer{}
	srv.set(buildBundle(t, "freeze", "h1", "", nil), `"h1"`)
	hs := httptest.NewServer(srv)
	defer hs.Close()
	_, err := New(context.Background(), Options{Bundle: BundleOptions{Location: hs.URL + "/b.tar.gz"}})
	if err == nil || !strings.Contains(err.Error(), "--policy-bundle-allow-http") {
		t.Fatalf("plain http bundle: %v", err)
	}
	if n := srv.gets.Load(); n != 0 {
		t.Fatalf("the plain http URL was fetched %d times", n)
	}
	if e := newTestEngine(t, Options{Bundle: BundleOptions{Location: hs.URL + "/b.tar.gz", AllowHTTP: true}}); e.Revision() != "h1" {
		t.Fatalf("allowed plain http bundle: revision %q", e.Revision())
	}

	tls := httptest.NewTLSServer(http.RedirectHandler(hs.URL+"/b.tar.gz", http.StatusFound))
	defer tls.Close()
	before := srv.gets.Load()
	_, err = New(context.Background(), Options{Bundle: BundleOptions{Location: tls.URL + "/b.tar.gz", Client: tls.Client()}})
	if err == nil || !strings.Contains(err.Error(), "redirected to a plain http URL") {
		t.Fatalf("https redirecting to http: %v", err)
	}
	if srv.gets.Load() != before {
		t.Fatal("the redirect to plain http was followed")
	}
}

// mapSettings holds settings in memory.
type mapSettings struct {
	mu sync.Mutex
	m  map[string]string
}

func (s *mapSettings) GetSetting(_ context.Context, name string) (string, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[name]
	return v, ok, nil
}

func (s *mapSettings) UpdateSetting(_ context.Context, name string, next func(string) (string, bool)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := next(s.m[name]); ok {
		s.m[name] = v
	}
	return nil
}

// TestSettingsSequences: the saved sequence only rises.
func TestSettingsSequences(t *testing.T) {
	ctx := context.Background()
	seqs := SettingsSequences(&mapSettings{m: map[string]string{}})
	if got, err := seqs.LoadBundleSequence(ctx); err != nil || got != (BundleSequence{}) {
		t.Fatalf("nothing saved: %+v, %v", got, err)
	}
	for _, s := range []BundleSequence{{5, "d5"}, {3, "d3"}, {5, "other"}, {7, "d7"}, {6, "d6"}} {
		if err := seqs.SaveBundleSequence(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	if got, _ := seqs.LoadBundleSequence(ctx); got != (BundleSequence{7, "d7"}) {
		t.Fatalf("saved %+v, want sequence 7", got)
	}
}
