package opa

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

func TestVerifiedRunsEachContentOnce(t *testing.T) {
	v := NewVerified()
	key := func(s string) [32]byte {
		mods, err := parse(map[string]string{"a.rego": "package a\n\nx := " + strconv.Quote(s) + "\n"})
		if err != nil {
			t.Fatal(err)
		}
		k, err := suiteKey(mods, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	var runs atomic.Int32
	pass := func() error { runs.Add(1); return nil }
	fail := func() error { runs.Add(1); return errors.New("test_x: FAIL") }

	if err := v.run(key("p1"), pass); err != nil {
		t.Fatal(err)
	}
	if err := v.run(key("p1"), pass); err != nil || runs.Load() != 1 {
		t.Fatalf("the same content again: %v, %d runs, want 1", err, runs.Load())
	}
	if err := v.run(key("p2"), pass); err != nil || runs.Load() != 2 {
		t.Fatalf("other content: %v, %d runs, want 2", err, runs.Load())
	}
	// A failure is reported every time and never remembered.
	for i := 0; i < 2; i++ {
		if err := v.run(key("f1"), fail); err == nil {
			t.Fatal("a failing run passed")
		}
	}
	if runs.Load() != 4 {
		t.Fatalf("%d runs, want 4: failures run again", runs.Load())
	}

	// Loads of one content at once share one run.
	runs.Store(0)
	release := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Go(func() {
			if err := v.run(key("c1"), func() error { runs.Add(1); <-release; return nil }); err != nil {
				t.Error(err)
			}
		})
	}
	for v.waiting(key("c1")) == 0 {
		runtime.Gosched() // until the first run has started
	}
	close(release)
	wg.Wait()
	if runs.Load() != 1 {
		t.Fatalf("%d runs for 8 loads at once, want 1", runs.Load())
	}

	// The oldest passes are forgotten beyond verifiedMax.
	for i := 0; i < verifiedMax; i++ {
		if err := v.run(key(fmt.Sprint("fill", i)), pass); err != nil {
			t.Fatal(err)
		}
	}
	runs.Store(0)
	_ = v.run(key("p1"), pass)
	if runs.Load() != 1 {
		t.Fatal("a forgotten content was not run again")
	}
}

func TestSuiteKeyNamesThePolicy(t *testing.T) {
	const mod = "# METADATA\n# title: a\npackage a\n\nx := 1\n"
	base := func() (map[string]string, map[string]string, map[string]any) {
		return map[string]string{"a.rego": mod}, map[string]string{"a_test.rego": "package a_test\n\ntest_x if data.a.x == 1\n"}, map[string]any{"x": 1}
	}
	key := func(m, tt map[string]string, d map[string]any) [32]byte {
		t.Helper()
		all := map[string]string{}
		for k, v := range m {
			all[k] = v
		}
		for k, v := range tt {
			all[k] = v
		}
		mods, err := parse(all)
		if err != nil {
			t.Fatal(err)
		}
		k, err := suiteKey(mods, tt, d)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	k0 := key(base())
	changes := map[string]func(m, tt map[string]string, d map[string]any){
		"a rule":             func(m, _ map[string]string, _ map[string]any) { m["a.rego"] += "y := 2\n" },
		"a value":            func(m, _ map[string]string, _ map[string]any) { m["a.rego"] = strings.Replace(mod, "1", "2", 1) },
		"a module name":      func(m, _ map[string]string, _ map[string]any) { m["b.rego"] = m["a.rego"]; delete(m, "a.rego") },
		"a test":             func(_, tt map[string]string, _ map[string]any) { tt["a_test.rego"] += "test_y if true\n" },
		"a module as test":   func(m, tt map[string]string, _ map[string]any) { tt["a.rego"] = m["a.rego"]; delete(m, "a.rego") },
		"the extension data": func(_, _ map[string]string, d map[string]any) { d["x"] = 2 },
	}
	for name, change := range changes {
		m, tt, d := base()
		change(m, tt, d)
		if key(m, tt, d) == k0 {
			t.Errorf("%s changed: the key did not", name)
		}
	}
	// Comments and layout are not the policy; nor are METADATA blocks,
	// which provgate parses as comments (parse), for the suites as for
	// the served policy.
	m, tt, d := base()
	m["a.rego"] = "# METADATA\n# title: b\npackage a\n\n# a comment\n\n\nx := 1 # another\n"
	if key(m, tt, d) != k0 {
		t.Error("a comment changed the key")
	}
}

// Two engines sharing a Verified load one extension directory: the second
// does not run its suites again, yet a changed test that fails is refused.
func TestVerifiedSharedByEngines(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	write := func(name, src string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("x.rego", "package provgate.ext.x\n\ndeny contains \"no\" if input.method == \"DELETE\"\n")
	write("x_test.rego", "package provgate.ext.x_test\n\nimport data.provgate.ext.x\n\ntest_get if count(x.deny) == 0 with input as {\"method\": \"GET\"}\n")
	v := NewVerified()
	for i := 0; i < 2; i++ {
		e, err := New(ctx, Options{PolicyDir: dir, Verified: v})
		if err != nil {
			t.Fatal(err)
		}
		_ = e.Close()
	}
	if n := len(v.order); n != 1 {
		t.Fatalf("%d contents verified, want 1", n)
	}
	write("x_test.rego", "package provgate.ext.x_test\n\nimport data.provgate.ext.x\n\ntest_get if count(x.deny) == 0 with input as {\"method\": \"DELETE\"}\n")
	for i := 0; i < 2; i++ {
		if _, err := New(ctx, Options{PolicyDir: dir, Verified: v}); err == nil || !strings.Contains(err.Error(), "test_get: FAIL") {
			t.Fatalf("load %d of a failing test: %v", i, err)
		}
	}
}

// waiting reports whether a run of key is in progress (1) or not (0).
func (v *Verified) waiting(key [32]byte) int {
	v.mu.Lock()
	defer v.mu.Unlock()
	if e, ok := v.entries[key]; ok {
		select {
		case <-e.done:
		default:
			return 1
		}
	}
	return 0
}
