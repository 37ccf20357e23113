package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// server is a provgate child process on loopback.
type server struct {
	Name    string // "sqlite" or "postgres"
	Base    string // https://127.0.0.1:port
	LogPath string
	cmd     *exec.Cmd
	exited  chan error
	mem     *memSampler
}

// licenseFiles makes a key pair and an rbac license with the server binary's
// own offline tools, as an operator would.
func licenseFiles(ctx context.Context, bin, dir string) (pub, lic string, err error) {
	priv, pub := filepath.Join(dir, "license.key"), filepath.Join(dir, "license.pub")
	if out, err := exec.CommandContext(ctx, bin, "license", "keygen", "--private-key", priv, "--public-key", pub).CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("license keygen: %v: %s", err, out)
	}
	var stdout, stderr bytes.Buffer
	c := exec.CommandContext(ctx, bin, "license", "sign", "--private-key", priv, "--features", "rbac",
		"--expires", time.Now().Add(24*time.Hour).UTC().Format(time.RFC3339), "--owner", "provgate-bench")
	c.Stdout, c.Stderr = &stdout, &stderr
	if err := c.Run(); err != nil {
		return "", "", fmt.Errorf("license sign: %v: %s", err, stderr.String())
	}
	lic = filepath.Join(dir, "license.txt")
	if err := os.WriteFile(lic, stdout.Bytes(), 0o600); err != nil {
		return "", "", err
	}
	return pub, lic, nil
}

// startServer runs bin serve on 127.0.0.1:0 with dataDir, over TLS (its
// generated self-signed certificate, as users run it), and waits until it
// logs its address. dsn "" selects SQLite in dataDir.
func startServer(ctx context.Context, name, bin, dataDir, dsn, adminPassword string, extra ...string) (*server, error) {
	return startServerEnv(ctx, nil, name, bin, dataDir, dsn, adminPassword, extra...)
}

// startServerEnv is startServer with env (KEY=value) added to the server's
// environment, e.g. GOMAXPROCS=16.
func startServerEnv(ctx context.Context, env []string, name, bin, dataDir, dsn, adminPassword string, extra ...string) (*server, error) {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, err
	}
	args := []string{"serve", "--data-dir", dataDir, "--listen", "127.0.0.1:0", "--bench-routes", "--shutdown-timeout", "10s"}
	if dsn != "" {
		args = append(args, "--database", dsn)
	}
	args = append(args, extra...)
	logPath := filepath.Join(dataDir, "server.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(childEnv(adminPassword), env...)
	// A file, not a pipe: the bench process must not spend CPU copying the
	// server's access log while it measures.
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	s := &server{Name: name, LogPath: logPath, cmd: cmd, exited: make(chan error, 1)}
	go func() { s.exited <- cmd.Wait() }()
	addr, err := waitListening(ctx, logPath, s.exited, 60*time.Second)
	if err != nil {
		_ = cmd.Process.Kill()
		return nil, fmt.Errorf("%s server: %w\n%s", name, err, tail(logPath, 20))
	}
	s.Base = "https://" + addr
	s.mem = startMemSampler(cmd.Process.Pid)
	return s, nil
}

// childEnv is the bench's environment without any PROVGATE_ setting (a
// stray PROVGATE_DATABASE would silently change what is measured) and
// without the runtime's GOMAXPROCS, GOGC and GOMEMLIMIT (the server runs
// with its defaults unless a figure says otherwise), plus the first-start
// admin password.
func childEnv(adminPassword string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(k, "PROVGATE_") && k != "GOMAXPROCS" && k != "GOGC" && k != "GOMEMLIMIT" {
			env = append(env, kv)
		}
	}
	return append(env, "PROVGATE_ADMIN_PASSWORD="+adminPassword)
}

// waitListening polls the server's JSON log for its "listening" line.
func waitListening(ctx context.Context, logPath string, exited <-chan error, limit time.Duration) (string, error) {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if addr := findListening(logPath); addr != "" {
			return addr, nil
		}
		select {
		case err := <-exited:
			return "", fmt.Errorf("exited before listening: %v", err)
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return "", fmt.Errorf("not listening after %s", limit)
}

func findListening(logPath string) string {
	f, err := os.Open(logPath)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var line struct {
			Msg  string `json:"msg"`
			Addr string `json:"addr"`
		}
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "listening" && line.Addr != "" {
			return line.Addr
		}
	}
	return ""
}

// tail returns the last n lines of a file, for error messages.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Stop asks the server to shut down (SIGTERM) and kills it if it has not
// exited within 20 s. It returns the peak memory observed.
func (s *server) Stop() memPeak {
	peak := s.mem.stop()
	if s.cmd.ProcessState == nil {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.exited:
		case <-time.After(20 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.exited
		}
	}
	return peak
}

// memPeak is the largest resident set of a process: VmHWM as the kernel
// keeps it, and the largest VmRSS seen by sampling (a cross-check).
type memPeak struct {
	HWMKiB, MaxRSSKiB int64
}

type memSampler struct {
	pid  int
	stpc chan struct{}
	done chan struct{}
	mu   sync.Mutex
	peak memPeak
}

func startMemSampler(pid int) *memSampler {
	m := &memSampler{pid: pid, stpc: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(m.done)
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			m.sample()
			select {
			case <-m.stpc:
				return
			case <-t.C:
			}
		}
	}()
	return m
}

func (m *memSampler) sample() {
	hwm, rss, err := readStatus(m.pid)
	if err != nil {
		return
	}
	m.mu.Lock()
	m.peak.HWMKiB = max(m.peak.HWMKiB, hwm)
	m.peak.MaxRSSKiB = max(m.peak.MaxRSSKiB, rss)
	m.mu.Unlock()
}

func (m *memSampler) stop() memPeak {
	select {
	case <-m.stpc:
	default:
		m.sample()
		close(m.stpc)
	}
	<-m.done
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.peak
}

// readStatus reads VmHWM and VmRSS (KiB) from /proc/<pid>/status.
func readStatus(pid int) (hwm, rss int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	return parseStatus(string(b))
}

func parseStatus(s string) (hwm, rss int64, err error) {
	for _, line := range strings.Split(s, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || (k != "VmHWM" && k != "VmRSS") {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		n, perr := strconv.ParseInt(f[0], 10, 64)
		if perr != nil {
			return 0, 0, perr
		}
		if k == "VmHWM" {
			hwm = n
		} else {
			rss = n
		}
	}
	if hwm == 0 && rss == 0 {
		return 0, 0, errors.New("no VmHWM/VmRSS in status")
	}
	return hwm, rss, nil
}
