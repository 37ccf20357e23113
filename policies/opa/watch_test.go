package opa

import (
	"context"
	"crypto/sha256"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// yesOrAlso has exactly the length of minimalPolicy and allows "also" as
// well as "yes": a rewrite that keeps a file's size.
var yesOrAlso = strings.Replace(minimalPolicy, `input.principal.name == "yes"`, `input.principal.name != "no!"`, 1)

// waitRevision waits for the policy revision to pass before.
func waitRevision(t *testing.T, e *Engine, before uint64, why string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if now, _ := e.Revisions(); now > before {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no reload after %s", why)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func watchedEngine(t *testing.T, dir string) *Engine {
	t.Helper()
	e, err := New(context.Background(), Options{PolicyDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e
}

// A rewrite that keeps the size and the modification time (cp -p, rsync
// -t, tar, or two writes within the file system's timestamp granularity)
// is still a change.
func TestWatchDirSameSizeAndTime(t *testing.T) {
	if len(yesOrAlso) != len(minimalPolicy) {
		t.Fatalf("test policies differ in size: %d, %d", len(yesOrAlso), len(minimalPolicy))
	}
	dir := t.TempDir()
	writeFile(t, dir, "authz.rego", minimalPolicy)
	writeFile(t, dir, "authz_test.rego", minimalTest)
	e := watchedEngine(t, dir)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e.WatchDir(ctx, 10*time.Millisecond)
	before, _ := e.Revisions()

	p := filepath.Join(dir, "authz.rego")
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // the watcher has seen the first version
	writeFile(t, dir, "authz.rego", yesOrAlso)
	if err := os.Chtimes(p, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	waitRevision(t, e, before, "a same-size rewrite with the old mtime")
	if !allowed(t, e, "also") {
		t.Error("new policy not in force")
	}
}

// Kubernetes mounts a ConfigMap as symlinks (authz.rego → ..data/authz.rego)
// and updates it by swapping the ..data symlink: the links themselves never
// change, only what they point to.
func TestWatchDirSymlinkSwap(t *testing.T) {
	dir := t.TempDir()
	for v, src := range map[string]string{"..v1": minimalPolicy, "..v2": yesOrAlso} {
		if err := os.Mkdir(filepath.Join(dir, v), 0o700); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, v), "authz.rego", src)
		writeFile(t, filepath.Join(dir, v), "authz_test.rego", minimalTest)
	}
	if err := os.Symlink("..v1", filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"authz.rego", "authz_test.rego"} {
		if err := os.Symlink(filepath.Join("..data", name), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	e := watchedEngine(t, dir)
	if allowed(t, e, "also") {
		t.Fatal("first version not in force")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e.WatchDir(ctx, 10*time.Millisecond)
	before, _ := e.Revisions()
	time.Sleep(50 * time.Millisecond)

	// The atomic swap the kubelet does: a new link renamed over ..data.
	if err := os.Symlink("..v2", filepath.Join(dir, "..data_tmp")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	waitRevision(t, e, before, "the ..data symlink swap")
	if !allowed(t, e, "also") {
		t.Error("new policy not in force")
	}
}

// A change made after New loaded the directory but before WatchDir started
// (the server does its start-up work in between) is not lost.
func TestWatchDirChangeBeforeWatch(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "authz.rego", minimalPolicy)
	writeFile(t, dir, "authz_test.rego", minimalTest)
	e := watchedEngine(t, dir)
	before, _ := e.Revisions()
	writeFile(t, dir, "authz.rego", strings.Replace(minimalPolicy, `== "yes"`, `in {"yes", "also"}`, 1))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e.WatchDir(ctx, 10*time.Millisecond)
	waitRevision(t, e, before, "a change between New and WatchDir")
	if !allowed(t, e, "also") {
		t.Error("new policy not in force")
	}
}

// TestSettle: a change is reloaded only once two polls in a row see the same
// files, so a directory caught half-written is never loaded.
func TestSettle(t *testing.T) {
	v0 := sums(map[string]string{"a.rego": "a0", "b.rego": "b0"})
	half := sums(map[string]string{"a.rego": "a1", "b.rego": "b0"})
	v1 := sums(map[string]string{"a.rego": "a1", "b.rego": "b1"})
	w := settle{last: v0}
	for i, c := range []struct {
		now  map[string][sha256.Size]byte
		want bool
	}{
		{v0, false},   // unchanged
		{half, false}, // a change, not yet settled
		{v1, false},   // still moving: the half-written state is never loaded
		{v1, true},    // the same twice: reload
		{v1, false},   // loaded already
		{half, false}, // moving again
		{v1, false},   // back to what is loaded before settling: nothing to do
		{v1, false},
	} {
		if got := w.changed(c.now); got != c.want {
			t.Fatalf("poll %d: changed = %v, want %v", i, got, c.want)
		}
	}
}
