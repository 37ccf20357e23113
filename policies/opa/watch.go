package opa

import (
	"context"
	"io/fs"
	"maps"
	"path/filepath"
	"strings"
	"time"
)

// WatchDir polls the policy directory every interval and reloads it when a
// .rego file is added, removed or changed. Polling needs no extra
// dependency and copes with editors that replace files. A failed reload is
// logged and the old policy stays; the watcher retries on the next change.
// It returns at once; the watch ends with ctx. Nothing happens for the
// embedded policy.
func (e *Engine) WatchDir(ctx context.Context, interval time.Duration) {
	if e.dir == "" || interval <= 0 {
		return
	}
	last := e.snapshot()
	go func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			now := e.snapshot()
			if maps.Equal(now, last) {
				continue
			}
			last = now
			if err := e.Reload(ctx); err != nil {
				e.logger.ErrorContext(ctx, "policy reload failed; keeping the current policy", "dir", e.dir, "err", err)
			}
		}
	}()
}

type stamp struct {
	mod  time.Time
	size int64
}

func (e *Engine) snapshot() map[string]stamp {
	out := map[string]stamp{}
	_ = filepath.WalkDir(e.dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() {
			if path != e.dir && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".rego") {
			return nil
		}
		if info, err := d.Info(); err == nil {
			out[path] = stamp{mod: info.ModTime(), size: info.Size()}
		}
		return nil
	})
	return out
}
