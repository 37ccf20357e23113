package opa

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/provgate/provgate/policies"
)

// TestCompiledShared: engines given one Compiled compile the embedded
// policy once, and each still decides on its own data.
func TestCompiledShared(t *testing.T) {
	c := NewCompiled()
	var wg sync.WaitGroup
	engines := make([]*Engine, 3)
	for i := range engines {
		wg.Go(func() { engines[i] = newTestEngine(t, Options{Compiled: c}) })
	}
	wg.Wait()
	if len(c.entries) != 1 || len(c.order) != 1 {
		t.Fatalf("%d compiled policies kept, want 1", len(c.entries))
	}
	// The last engine's data has no roles: the shared compilation holds
	// no data of another engine.
	if err := engines[2].SetData(context.Background(), policies.Data{}); err != nil {
		t.Fatal(err)
	}
	in := request(user("rita", "reader"), claim("machines", "get", "m1"))
	for i, e := range engines {
		wg.Go(func() {
			got, err := e.Decide(context.Background(), in)
			if err != nil {
				t.Error(err)
				return
			}
			if want := i < 2; got.Allow != want {
				t.Errorf("engine %d: allow %v, want %v", i, got.Allow, want)
			}
		})
	}
	wg.Wait()
}

// TestCompiledKeepsNoFailure: a policy that does not compile is refused
// each time and not kept; the bound drops the oldest.
func TestCompiledKeepsNoFailure(t *testing.T) {
	c := NewCompiled()
	bad := map[string]string{"a.rego": "package a\n\nx := y\n"}
	for range 2 {
		compileMu.Lock()
		_, err := c.compile(bad)
		compileMu.Unlock()
		if err == nil || !strings.Contains(err.Error(), "compile policy") {
			t.Fatalf("got %v, want a compile error", err)
		}
	}
	if len(c.entries) != 0 {
		t.Fatalf("%d kept after failures, want 0", len(c.entries))
	}
	for i := range compiledMax + 2 {
		compileMu.Lock()
		_, err := c.compile(map[string]string{"a.rego": "package a\n\nx := " + strings.Repeat("1", i+1) + "\n"})
		compileMu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(c.entries) != compiledMax || len(c.order) != compiledMax {
		t.Fatalf("%d kept, want the bound %d", len(c.entries), compiledMax)
	}
}
