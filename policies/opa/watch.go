package opa

import (
	"context"
	"crypto/sha256"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// WatchDir polls the policy directory every interval and reloads it when a
// .rego file or a data file (data.json, data.yaml) is added, removed or
// changed, once the change has settled (the files are the same on two
// polls in a row). Polling needs no extra
// dependency and copes with editors that replace files. Files are compared
// by content, read through symlinks: a Kubernetes ConfigMap update swaps a
// symlink and leaves the files' own links untouched, and a copy that keeps
// size and modification time (cp -p, rsync -t) is still a change. A failed
// reload is logged and the old policy stays; the watcher retries on the
// next change. It returns at once; the watch ends with ctx. Nothing happens
// for the embedded policy.
//
// For a bundle, a file or directory is watched the same way (every file of
// it counts), and a URL is polled every interval with the served bundle's
// ETag: an unchanged bundle costs one 304.
func (e *Engine) WatchDir(ctx context.Context, interval time.Duration) {
	if (e.dir == "" && e.bundle == nil) || interval <= 0 {
		return
	}
	// Compared with what the last reload read rather than with the files
	// now, so that a change made since New is not taken as the baseline.
	e.reloadMu.Lock()
	w := settle{last: e.loaded}
	e.reloadMu.Unlock()
	go func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if e.bundle != nil && e.bundle.url {
				// reload logs the outcome; a 304 is none.
				_ = e.reload(ctx, "poll")
				continue
			}
			if !w.changed(e.snapshot()) {
				continue
			}
			// reload logs the outcome.
			_ = e.reload(ctx, "watch")
		}
	}()
}

// settle tells when a watched directory has changed and settled.
type settle struct {
	last    map[string][sha256.Size]byte // what the last reload read
	pending map[string][sha256.Size]byte // a change seen on the last poll
}

// changed takes a poll's snapshot and says whether to reload: the files
// differ from the last reload's and are the same as on the previous poll.
// Files are written one at a time, and a directory caught half-way (a new
// rule without the file it needs, a policy without its tests) must not be
// served.
func (w *settle) changed(now map[string][sha256.Size]byte) bool {
	if maps.Equal(now, w.last) {
		w.pending = nil
		return false
	}
	if w.pending == nil || !maps.Equal(now, w.pending) {
		w.pending = now
		return false
	}
	w.last, w.pending = now, nil
	return true
}

// ReloadOn reloads the policy directory each time a value arrives on c
// (SIGHUP in the server) until ctx ends, running the directory's tests
// first: a failing policy never replaces the working one. It returns at
// once. Nothing happens for the embedded policy.
func (e *Engine) ReloadOn(ctx context.Context, c <-chan os.Signal) {
	if e.dir == "" && e.bundle == nil {
		return
	}
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-c:
				// reload logs the outcome.
				_ = e.reload(ctx, "signal")
			}
		}
	}()
}

// sums maps each file path to the SHA-256 of its content.
func sums(files ...map[string]string) map[string][sha256.Size]byte {
	out := map[string][sha256.Size]byte{}
	for _, m := range files {
		for path, src := range m {
			out[path] = sha256.Sum256([]byte(src))
		}
	}
	return out
}

// snapshot hashes the .rego and data files loadDir would read. The files
// are small and few, so reading them on every tick costs little.
func (e *Engine) snapshot() map[string][sha256.Size]byte {
	if e.bundle != nil {
		return bundleSums(e.bundle.location)
	}
	return snapshotDir(e.dir)
}

func snapshotDir(dir string) map[string][sha256.Size]byte {
	out := map[string][sha256.Size]byte{}
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() {
			return enterDir(dir, path, d)
		}
		if !strings.HasSuffix(path, ".rego") && !isDataFile(d.Name()) {
			return nil
		}
		if src, err := os.ReadFile(path); err == nil {
			out[path] = sha256.Sum256(src)
		}
		return nil
	})
	return out
}

// dataSums hashes the data files of dir, as snapshot does.
func dataSums(dir string) map[string][sha256.Size]byte {
	out := map[string][sha256.Size]byte{}
	for path, sum := range snapshotDir(dir) {
		if isDataFile(filepath.Base(path)) {
			out[path] = sum
		}
	}
	return out
}
