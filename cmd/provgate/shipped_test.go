package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// buildMu lets one build of the program run at a time (make dist in
// TestMakeDist, shippedBinary): they compile the packages with the same
// flags, so the second finds them in the build cache instead of compiling
// them beside the first.
var buildMu sync.Mutex

var shipped struct {
	once sync.Once
	dir  string
	path string
	out  []byte
	err  error
}

// shippedBinary returns the program built as a release is (CGO_ENABLED=0,
// -trimpath, as make dist and the Dockerfile build it), once per test
// process; removeShipped deletes it when the tests are done.
func shippedBinary(t *testing.T) string {
	t.Helper()
	shipped.once.Do(func() {
		shipped.dir, shipped.err = os.MkdirTemp("", "provgate-shipped-")
		if shipped.err != nil {
			return
		}
		shipped.path = filepath.Join(shipped.dir, "provgate")
		buildMu.Lock()
		defer buildMu.Unlock()
		cmd := exec.Command("go", "build", "-trimpath", "-o", shipped.path, ".")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		shipped.out, shipped.err = cmd.CombinedOutput()
	})
	if shipped.err != nil {
		t.Fatalf("go build: %v\n%s", shipped.err, shipped.out)
	}
	return shipped.path
}

func removeShipped() {
	if shipped.dir != "" {
		_ = os.RemoveAll(shipped.dir)
	}
}
