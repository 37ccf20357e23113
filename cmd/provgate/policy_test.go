package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/provgate/provgate/policies"
)

func runPolicy(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	err := run(context.Background(), append([]string{"policy"}, args...), func(string) string { return "" }, &out, &errb)
	return out.String() + errb.String(), err
}

// provgate policy test runs what a reload runs: the example extensions
// pass, a broad veto loads (it only narrows the base), and one whose own
// test fails is refused with the failing test named and exit status 1.
func TestPolicyTestCommand(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"protected", "freeze", "fresh_token", "weekday_freeze"} {
		dir := filepath.Join("..", "..", "testdata", "policy", "extensions", name)
		out, err := runPolicy(t, "test", dir)
		if err != nil || !strings.Contains(out, "PASS "+dir+" (revision sha256:") || !strings.Contains(out, "mode=extensions") {
			t.Errorf("policy test %s: %v\n%s", name, err, out)
		}
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "x.rego"), []byte("package provgate.ext.x\n\ndeny contains \"no\" if input.principal.kind == \"user\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := runPolicy(t, "test", dir); err != nil {
		t.Errorf("policy test of a broad veto: %v\n%s", err, out)
	}
	if err := os.WriteFile(filepath.Join(dir, "x_test.rego"), []byte("package provgate.ext.x_test\n\ntest_never if false\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := runPolicy(t, "test", dir)
	if err == nil || !strings.Contains(err.Error(), "test_never") || report(err, &bytes.Buffer{}) != 1 {
		t.Errorf("policy test of an extension failing its test: %v", err)
	}
	if _, err := runPolicy(t, "test"); report(err, &bytes.Buffer{}) != 2 {
		t.Errorf("policy test without a directory: %v", err)
	}
}

// provgate policy eval decides the example inputs as their files say, with
// the engine the server uses.
func TestPolicyEvalCommand(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "testdata", "policy", "inputs", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no example inputs: %v", err)
	}
	data := filepath.Join("..", "..", "testdata", "policy", "data.json")
	for _, f := range files {
		out, err := runPolicy(t, "eval", "--input", f, "--data", data)
		if err != nil {
			t.Fatalf("%s: %v\n%s", f, err, out)
		}
		var got struct {
			Revision string
			Decision policies.Decision
		}
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("%s: %v\n%s", f, err, out)
		}
		raw, _ := os.ReadFile(f)
		var want struct{ Decision policies.Decision }
		if err := json.Unmarshal(raw, &want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got.Decision, want.Decision) || !strings.HasPrefix(got.Revision, "sha256:") {
			t.Errorf("%s: got %+v, want %+v", f, got, want.Decision)
		}
	}
	// With an extension, its veto is part of the decision.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "x.rego"), []byte("package provgate.ext.x\n\ndeny contains \"m1 is resting\" if input.path == \"/api/v3/machines/m1\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := runPolicy(t, "eval", "--input", filepath.Join("..", "..", "testdata", "policy", "inputs", "superuser-get.json"),
		"--data", data, "--policy-dir", dir)
	if err != nil || !strings.Contains(out, "m1 is resting") || !strings.Contains(out, `"allow": false`) {
		t.Errorf("eval with an extension: %v\n%s", err, out)
	}
}

// TestPolicyEvalGrants: an input with grants is answered by the grant
// check (docs/policies.md §6): what the writer would hand out without
// holding it.
func TestPolicyEvalGrants(t *testing.T) {
	in := filepath.Join(t.TempDir(), "grants.json")
	if err := os.WriteFile(in, []byte(`{"principal": {"kind": "user", "name": "olga", "roles": ["operator"], "token_roles": null, "claims": []},
		"required": [], "operation": "", "method": "", "path": "",
		"grants": [{"role": "m1reader", "via": {"scope": "roles", "action": "bind", "specific": "m1reader"}},
		           {"claims": [{"scope": "pools", "action": "get,delete", "specific": "p1,p3"}]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := runPolicy(t, "eval", "--input", in, "--data", filepath.Join("..", "..", "testdata", "policy", "data.json"))
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var got struct {
		Ungranted []map[string]string
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	// olga cannot read role m1reader (no roles get): it is given only by
	// binding it, as a missing one would be.
	want := []map[string]string{{"scope": "roles", "action": "bind", "specific": "m1reader"},
		{"scope": "pools", "action": "delete", "specific": "p3"}, {"scope": "pools", "action": "get", "specific": "p3"}}
	if !reflect.DeepEqual(got.Ungranted, want) {
		t.Fatalf("ungranted %v, want %v\n%s", got.Ungranted, want, out)
	}
}

// provgate policy test BUNDLE checks a bundle as --policy-bundle would:
// its signature, then its tests; the revision printed is the manifest's.
func TestPolicyTestCommandBundle(t *testing.T) {
	t.Parallel()
	priv, pub := e2eSigningKey(t)
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "good.tar.gz"), filepath.Join(dir, "bad.tar.gz")
	if err := os.WriteFile(good, e2eBundle(t, "fresh_token", "rel-7", priv, 7, false), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, e2eBundle(t, "protected", "rel-8", priv, 8, true), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := runPolicy(t, "test", good, "--public-key", pub)
	if err != nil || !strings.Contains(out, "(revision rel-7)") {
		t.Errorf("policy test of a signed bundle: %v\n%s", err, out)
	}
	if _, err := runPolicy(t, "test", bad, "--public-key", pub); err == nil || !strings.Contains(err.Error(), "digest mismatch") {
		t.Errorf("policy test of a tampered bundle: %v", err)
	}
	// eval with the bundle: its extension decides, as on the server.
	in := filepath.Join(dir, "in.json")
	if err := os.WriteFile(in, []byte(`{"principal": {"kind": "user", "name": "alice", "roles": ["superuser"], "token_roles": null, "claims": [],
		"auth": {"method": "bearer", "kind": "user", "iat": 1000, "exp": 99999999999, "jti": "x"}},
		"required": [{"scope": "users", "action": "update:/Roles", "specific": "bob"}],
		"operation": "patch", "method": "PATCH", "path": "/api/v3/users/bob"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err = runPolicy(t, "eval", "--input", in, "--data", filepath.Join("..", "..", "testdata", "policy", "data.json"),
		"--policy-bundle", good, "--policy-bundle-public-key", pub)
	if err != nil || !strings.Contains(out, `"revision": "rel-7"`) || !strings.Contains(out, "users changes need a token issued less than 600 seconds ago") {
		t.Errorf("policy eval with a bundle: %v\n%s", err, out)
	}
}
