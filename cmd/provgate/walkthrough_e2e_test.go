package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
)

// walkthroughBlock returns the shell block of the README's ten-minute
// walkthrough, checking that the README opens with it.
func walkthroughBlock(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	first := regexp.MustCompile(`(?m)^## .*$`).FindString(readme)
	if first != "## Ten-minute walkthrough" {
		t.Fatalf("the README's first section is %q, not the walkthrough", first)
	}
	sec := readme[strings.Index(readme, first):]
	start := strings.Index(sec, "```sh\n")
	if start < 0 {
		t.Fatal("the walkthrough has no ```sh block")
	}
	block := sec[start+len("```sh\n"):]
	end := strings.Index(block, "\n```")
	if end < 0 {
		t.Fatal("the walkthrough's block does not end")
	}
	return block[:end+1]
}

var stepLine = regexp.MustCompile(`(?m)^# (\d+)\. (.*)$`)

// TestE2EReadmeWalkthrough runs the README's walkthrough block as it stands,
// step by step in one shell, with the real binary, curl and jq: only the
// port line changes (a free port instead of 8092), and each "# N." comment
// also prints a marker so that every step's output is checked apart.
func TestE2EReadmeWalkthrough(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"bash", "curl", "jq", "date"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the walkthrough needs %s (.ci/run installs curl and jq): %v", tool, err)
		}
	}
	block := walkthroughBlock(t)
	const portLine = "PG=127.0.0.1:8092\n"
	if !strings.HasPrefix(block, portLine) {
		t.Fatalf("the walkthrough does not start with %q", portLine)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	script := "PG=" + addr + "\n" + strings.TrimPrefix(block, portLine)
	script = stepLine.ReplaceAllString(script, "$0\necho '>>> step $1'")
	if n := len(stepLine.FindAllString(block, -1)); n != 9 {
		t.Fatalf("the walkthrough has %d numbered steps, want 9", n)
	}

	bin := filepath.Dir(shippedBinary(t))
	work := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	// The server runs in the script's process group; whatever happens, it
	// does not outlive the test.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err = cmd.Run()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	log, _ := os.ReadFile(filepath.Join(work, "provgate.log"))
	steps := splitSteps(stdout.String())
	if err != nil {
		last := "none"
		if len(steps) > 0 {
			keys := make([]string, 0, len(steps))
			for k := range steps {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			last = keys[len(keys)-1]
		}
		t.Fatalf("the walkthrough failed in step %s: %v\nstdout:\n%s\nstderr:\n%s\nserver log:\n%s", last, err,
			stdout.String(), stderr.String(), log)
	}
	t.Logf("the walkthrough ran in %s", time.Since(start).Round(time.Millisecond))

	want := map[string][]string{
		"6": {"rack-a-01", "rack-a-02"},
		"8": {"rack-a-01", "rack-a-02", "403"},
	}
	for step, lines := range want {
		if got := steps[step]; strings.Join(got, "\n") != strings.Join(lines, "\n") {
			t.Errorf("step %s printed %q, want %q", step, got, lines)
		}
	}
	if got := steps["7"]; len(got) != 1 || !regexp.MustCompile(`^rack-a-0[12] InUse$`).MatchString(got[0]) {
		t.Errorf("step 7 printed %q, want one rack-a machine InUse", got)
	}
	if got := steps["1"]; len(got) != 1 || !strings.HasPrefix(got[0], "wrote private key lic.key and public key lic.pub") {
		t.Errorf("step 1 printed %q, want the key pair written", got)
	}
	for _, step := range []string{"2", "3", "4", "5", "9"} {
		if got := steps[step]; len(got) != 0 {
			t.Errorf("step %s printed %q, want nothing", step, got)
		}
	}
	if !bytes.Contains(log, []byte(`"msg":"stopped"`)) {
		t.Errorf("the server did not stop cleanly:\n%s", log)
	}
}

// splitSteps maps each step number to the lines printed after its marker.
func splitSteps(out string) map[string][]string {
	steps := map[string][]string{}
	cur := ""
	for _, line := range strings.Split(out, "\n") {
		if n, ok := strings.CutPrefix(line, ">>> step "); ok {
			cur = n
			steps[cur] = nil
			continue
		}
		if line != "" && cur != "" {
			steps[cur] = append(steps[cur], line)
		}
	}
	return steps
}
