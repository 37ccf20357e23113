package main

import (
	"io"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestMakeRunInterrupt: `make run` serves on 127.0.0.1 only, and Ctrl-C on
// its terminal stops the server gracefully with make exiting 0. script(1)
// gives make a terminal; a ^C typed into it interrupts the foreground job as
// a user's does. The server is this test binary in child mode (TestMain),
// standing in for bin/provgate so that nothing is built.
func TestMakeRunInterrupt(t *testing.T) {
	for _, tool := range []string{"make", "script"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is needed to check make run: %v", tool, err)
		}
	}
	dry, err := exec.Command("make", "-s", "-C", "../..", "-n", "run").Output()
	if err != nil {
		t.Fatalf("make -n run: %v", err)
	}
	if !strings.Contains(string(dry), "serve --listen 127.0.0.1:8092") {
		t.Fatalf("make run does not bind 127.0.0.1:8092:\n%s", dry)
	}

	dir := t.TempDir()
	quote := func(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
	cmdline := "make -s -C ../.. -o build run RUN_BIN=" + quote(os.Args[0]) +
		" RUN_LISTEN=127.0.0.1:0 ARGS=" + quote("--data-dir "+dir+" --shutdown-timeout 5s")
	cmd := exec.Command("script", "-qefc", cmdline, "/dev/null")
	// The make that runs the tests (make test) must not hand its flags or
	// jobserver to this one.
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "MAKEFLAGS=") || strings.HasPrefix(kv, "MFLAGS=") || strings.HasPrefix(kv, "MAKELEVEL=")
	})
	cmd.Env = append(env, childEnv+"=1", "PROVGATE_ADMIN_PASSWORD="+e2eAdminPassword)
	var out logBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
	})
	listening := regexp.MustCompile(`"msg":"listening","addr":"127\.0\.0\.1:\d+"`)
	for deadline := time.Now().Add(90 * time.Second); !listening.MatchString(out.String()); {
		if time.Now().After(deadline) {
			t.Fatalf("make run did not listen on 127.0.0.1 within 90s:\n%s", out.String())
		}
		select {
		case err := <-exited:
			t.Fatalf("make run ended before listening: %v\n%s", err, out.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
	if _, err := io.WriteString(stdin, "\x03"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("make run after Ctrl-C: %v, want status 0\n%s", err, out.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("make run still running 30s after Ctrl-C:\n%s", out.String())
	}
	if !strings.Contains(out.String(), `"msg":"stopped"`) || strings.Contains(out.String(), "make: ***") {
		t.Fatalf("no graceful stop, or make reported an error:\n%s", out.String())
	}
	_ = stdin.Close()
}
