package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Every logged decision replays to the logged result (docs/design.md
// §9.5): a refusal of a token restricted to roles, taken from the server's
// own decision log, decided again by `provgate policy eval --input`, with
// --explain printing the same trail as the explain endpoint.
func TestE2EDecisionLogReplay(t *testing.T) {
	t.Parallel()
	logPath := filepath.Join(t.TempDir(), "decisions.jsonl")
	s := startE2E(t, dbCase{Name: "sqlite"}, append(licenseArgs(t), "--decision-log", logPath)...)
	s.AddRole("r-all-machines", [3]string{"machines", "*", "*"})
	s.AddRole("r-m1-reader", [3]string{"machines", "get", "r-only-this"})
	s.AddUser("r-user", "r-user-pw-1", "r-all-machines", "r-m1-reader")
	m := s.AddMachine("r-m", nil)
	tok := s.Token("r-user", basic("r-user", "r-user-pw-1"), "?roles=r-m1-reader")
	s.Must(403, "GET", "/machines/"+m, nil, bearer(tok))
	s.Must(200, "GET", "/machines/"+m, nil, basic("r-user", "r-user-pw-1"))

	// The log is written in the background: wait for the refusal's line.
	var line string
	deadline := time.Now().Add(30 * time.Second)
	for line == "" && time.Now().Before(deadline) {
		f, err := os.Open(logPath)
		if err == nil {
			sc := bufio.NewScanner(f)
			sc.Buffer(make([]byte, 1<<20), 1<<20)
			for sc.Scan() {
				if strings.Contains(sc.Text(), `"token_roles":["r-m1-reader"]`) && strings.Contains(sc.Text(), `"allow":false`) {
					line = sc.Text()
				}
			}
			_ = f.Close()
		}
		if line == "" {
			time.Sleep(50 * time.Millisecond)
		}
	}
	if line == "" {
		t.Fatalf("no logged refusal of the restricted token in %s", logPath)
	}
	lineFile := filepath.Join(t.TempDir(), "line.json")
	dataFile := filepath.Join(t.TempDir(), "data.json")
	data := map[string]any{
		"roles": map[string]any{
			"r-all-machines": map[string]any{"claims": []map[string]string{{"scope": "machines", "action": "*", "specific": "*"}}},
			"r-m1-reader":    map[string]any{"claims": []map[string]string{{"scope": "machines", "action": "get", "specific": "r-only-this"}}},
		},
		"license": map[string]any{"valid": true, "features": []string{"rbac"}},
	}
	raw, _ := json.Marshal(data)
	for path, body := range map[string][]byte{lineFile: []byte(line), dataFile: raw} {
		if err := os.WriteFile(path, body, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	out, err := runPolicy(t, "eval", "--input", lineFile, "--data", dataFile, "--explain")
	if err != nil {
		t.Fatalf("policy eval: %v\n%s", err, out)
	}
	var got struct {
		Decision   struct{ Allow bool }
		MatchesLog *bool `json:"matches_log"`
		Steps      []struct{ Step, Outcome, Detail string }
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if got.Decision.Allow || got.MatchesLog == nil || !*got.MatchesLog {
		t.Errorf("replay of the logged refusal: %s", out)
	}
	found := false
	for _, st := range got.Steps {
		found = found || (st.Step == "claim" && st.Outcome == "fail" && strings.Contains(st.Detail, "none of the roles the token was restricted to"))
	}
	if !found {
		t.Errorf("--explain steps do not name the token's roles: %s", out)
	}
}
