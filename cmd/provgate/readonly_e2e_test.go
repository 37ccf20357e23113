package main

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestReadOnlyRoot runs the server as the Dockerfile's image does with
// `docker run --read-only`: the whole file system read-only but for the
// data dir (here a tmpfs in a mount namespace of its own, as a volume
// would be). It starts, answers /readyz, stores an object and stops
// cleanly, so it writes nothing outside its data dir. It needs root and
// unshare(1), as CI has; elsewhere it is skipped with the reason, except
// in CI (CI=true), where their absence fails it.
func TestReadOnlyRoot(t *testing.T) {
	t.Parallel()
	unavailable := func(why string) {
		t.Helper()
		if os.Getenv("CI") == "true" {
			t.Fatalf("the read-only root check needs %s", why)
		}
		t.Skipf("the read-only root check needs %s", why)
	}
	if os.Geteuid() != 0 {
		unavailable("root (mount namespaces)")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		unavailable("unshare(1)")
	}
	bin := shippedBinary(t)
	data := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	const pw = "Read-only-root-pw1"
	// In its own mount namespace: a tmpfs for the data, then / read-only;
	// a write outside the data dir must fail before the server starts.
	// Temporary directories that are mounts of their own are made
	// read-only too.
	script := fmt.Sprintf(`set -e
mount -t tmpfs -o size=64m,mode=0700 tmpfs %[1]s
mount -o remount,bind,ro /
for d in /tmp /var/tmp; do
	if mountpoint -q "$d"; then mount -o remount,bind,ro "$d"; fi
done
for f in /.provgate-ro-check %[2]s; do
	if touch "$f" 2>/dev/null; then rm -f "$f"; echo "$f is writable" >&2; exit 3; fi
done
exec %[3]s serve --data-dir %[1]s/data --listen %[4]s --admin-password %[5]s`,
		data, filepath.Join(filepath.Dir(bin), "write-check"), bin, addr, pw)
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c", script)
	var stderr logBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Kill()
	}()

	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // self-signed test server
	}}
	defer client.CloseIdleConnections()
	base := "https://" + addr
	var ready bool
	for deadline := time.Now().Add(60 * time.Second); !ready && time.Now().Before(deadline); {
		select {
		case err := <-exited:
			t.Fatalf("the server exited: %v\n%s", err, stderr.String())
		default:
		}
		if res, err := client.Get(base + "/readyz"); err == nil {
			ready = res.StatusCode == 200
			res.Body.Close()
		}
		if !ready {
			time.Sleep(100 * time.Millisecond)
		}
	}
	if !ready {
		t.Fatalf("not ready within 60s\n%s", stderr.String())
	}
	req, _ := http.NewRequest("POST", base+"/api/v3/machines", strings.NewReader(`{"Name":"ro-m1"}`))
	req.SetBasicAuth("rocketskates", pw)
	req.Header.Set("Content-Type", "application/json")
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 201 {
		t.Fatalf("creating a machine on a read-only root: %d %s", res.StatusCode, body)
	}
	client.CloseIdleConnections()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("the server stopped with %v\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the server did not stop\n%s", stderr.String())
	}
	if !strings.Contains(stderr.String(), `"msg":"stopped"`) {
		t.Errorf("no clean stop logged:\n%s", stderr.String())
	}
}
