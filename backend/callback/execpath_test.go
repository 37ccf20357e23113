package callback

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestExecPathOneMessage: every exec Path that cannot be used gets the same
// message, at validation and at call time, so that plugin Errors are no
// oracle on which files exist on the server.
func TestExecPathOneMessage(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "tok.sh")
	if err := os.WriteFile(good, []byte("#!/bin/sh\necho tok\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(dir, "plain.txt")
	if err := os.WriteFile(plain, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	outsideDir := t.TempDir()
	outside := filepath.Join(outsideDir, "evil.sh")
	if err := os.WriteFile(outside, []byte("#!/bin/sh\necho evil\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.sh")
	if err := os.Symlink(outside, link); err != nil {
		t.Fatal(err)
	}
	dangling := filepath.Join(dir, "dangling.sh")
	if err := os.Symlink(filepath.Join(outsideDir, "nope.sh"), dangling); err != nil {
		t.Fatal(err)
	}
	// The configured directory may itself be reached through a link; both
	// spellings of a program inside it are accepted.
	dirLink := filepath.Join(t.TempDir(), "execdir")
	if err := os.Symlink(dir, dirLink); err != nil {
		t.Fatal(err)
	}

	bad := []struct{ name, dir, path string }{
		{"relative", dir, "tok.sh"},
		{"missing inside", dir, filepath.Join(dir, "nope.sh")},
		{"missing outside", dir, "/nonexistent-provgate-dir/x.sh"},
		{"existing outside", dir, outside},
		{"system file", dir, "/etc/passwd"},
		{"dotdot", dir, dir + "/../" + filepath.Base(outsideDir) + "/evil.sh"},
		{"symlink out", dir, link},
		{"dangling symlink", dir, dangling},
		{"directory", dir, sub},
		{"the directory itself", dir, dir},
		{"not executable", dir, plain},
		{"directory missing", filepath.Join(dir, "gone"), filepath.Join(dir, "gone", "tok.sh")},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := execPath(tt.dir, tt.path); err != errExecPath {
				t.Errorf("execPath(%q) = %v, want %v", tt.path, err, errExecPath)
			}
			errs := Validate(map[string]any{ParamCallbacks: map[string]any{},
				ParamAuths: map[string]any{"e": map[string]any{"AuthType": "exec", "Path": tt.path}}}, ValidateOptions{ExecDir: tt.dir})
			if want := []string{`auth "e": ` + errExecPath.Error()}; strings.Join(errs, "\n") != want[0] {
				t.Errorf("Validate = %q, want %q", errs, want)
			}
			// GetAuthString checks the path again when it runs.
			e := newEnv(t, func(o *Options) { o.ExecDir = tt.dir })
			st := e.svc.state(plugin(map[string]any{}, map[string]any{"e": map[string]any{"AuthType": "exec", "Path": tt.path}}))
			if _, err := e.svc.authString(st)(context.Background(), "e"); err != errExecPath {
				t.Errorf("GetAuthString = %v, want %v", err, errExecPath)
			}
		})
	}
	for _, p := range []struct{ dir, path string }{{dir, good}, {dirLink, filepath.Join(dirLink, "tok.sh")}, {dirLink, good}} {
		if _, err := execPath(p.dir, p.path); err != nil {
			t.Errorf("execPath(%q, %q) = %v, want it accepted", p.dir, p.path, err)
		}
	}
	if _, err := execPath("", good); err == nil || err == errExecPath {
		t.Errorf("exec auths disabled: %v", err)
	}
}
