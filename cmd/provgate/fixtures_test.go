package main

import (
	"bytes"
	"strings"
	"testing"
)

// Fixtures the end-to-end suites share: JSON Patch bodies, machines and
// the tokens a job renders. A helper used by more than one suite lives
// here; one used by a single suite stays in its file.

// jsonPatch is a JSON Patch of one operation.
func jsonPatch(op, path string, v any) []map[string]any {
	return []map[string]any{{"op": op, "path": path, "value": v}}
}

// AddMachine creates a machine with extra fields as the admin and returns
// its Uuid.
func (s *tserver) AddMachine(name string, extra map[string]any) string {
	s.t.Helper()
	body := map[string]any{"Name": name}
	for k, v := range extra {
		body[k] = v
	}
	var m struct{ Uuid string }
	s.Must(201, "POST", "/machines", body, admin()).JSON(s.t, &m)
	if m.Uuid == "" {
		s.t.Fatalf("machine %s has no Uuid", name)
	}
	return m.Uuid
}

// renderTokens reads the operations and infinite machine tokens that the
// actions of job render (as "op=" and "inf=" lines), asked as authz.
func renderTokens(t testing.TB, s *tserver, jobID, authz string) (op, inf string) {
	t.Helper()
	var acts []struct{ Name, Content string }
	s.Must(200, "GET", "/jobs/"+jobID+"/actions", nil, authz).JSON(t, &acts)
	for _, a := range acts {
		for _, line := range strings.Split(a.Content, "\n") {
			if v, ok := strings.CutPrefix(line, "op="); ok {
				op = v
			}
			if v, ok := strings.CutPrefix(line, "inf="); ok {
				inf = v
			}
		}
	}
	if op == "" || inf == "" {
		t.Fatalf("rendered actions hold no tokens: %+v", acts)
	}
	return op, inf
}

// wantNoSecrets fails if a reply carries a user's PasswordHash or Secret.
func wantNoSecrets(t testing.TB, what string, body []byte) {
	t.Helper()
	for _, k := range []string{`"PasswordHash"`, `"Secret"`} {
		if bytes.Contains(body, []byte(k)) {
			t.Fatalf("%s: reply carries %s: %s", what, k, body)
		}
	}
}

// fieldOf lists the value of field for every object of a list reply.
func fieldOf(t testing.TB, r resp, field string) []string {
	t.Helper()
	var l []map[string]any
	r.JSON(t, &l)
	out := []string{}
	for _, o := range l {
		out = append(out, o[field].(string))
	}
	return out
}
