package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestE2EImport: `provgate import` creates the users and roles of a JSON
// array (drpcli's list output) through a running server, in batches that
// are each written whole or not at all, with the validation and the
// authorization of single creates: a refused item leaves nothing of its
// batch, and a caller without create rights on every item is refused
// (docs/design.md §4.9).
func TestE2EImport(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, s *tserver) {
		dir := t.TempDir()
		write := func(name string, v any) string {
			t.Helper()
			b, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(dir, name)
			if err := os.WriteFile(p, b, 0o600); err != nil {
				t.Fatal(err)
			}
			return p
		}
		imp := func(key string, args ...string) (string, error) {
			t.Helper()
			env := map[string]string{"RS_KEY": key}
			var out, errb bytes.Buffer
			endpoint := strings.TrimSuffix(s.Base, "/api/v3")
			all := append([]string{"import", "--endpoint", endpoint, "--ca-cert", filepath.Join(s.DataDir, "tls.crt")}, args...)
			err := run(context.Background(), all, func(k string) string { return env[k] }, &out, &errb)
			return out.String() + errb.String(), err
		}
		adminKey := "rocketskates:" + e2eAdminPassword
		exists := func(prefix, key string) bool {
			t.Helper()
			return s.Do("GET", "/"+prefix+"/"+key, nil, admin()).Status == 200
		}

		// Roles as `drpcli roles list` prints them, three requests of two.
		var roles []map[string]any
		for i := range 5 {
			roles = append(roles, map[string]any{"Name": fmt.Sprintf("imp-r%d", i), "Description": "", "ReadOnly": false,
				"Validated": true, "Available": true, "Errors": []string{}, "Meta": map[string]string{},
				"Claims": []map[string]string{{"Scope": "profiles", "Action": "get", "Specific": fmt.Sprintf("p%d", i)}}})
		}
		roles[0]["Claims"] = []map[string]string{{"Scope": "users", "Action": "create", "Specific": "imp-self"}}
		if out, err := imp(adminKey, "--batch", "2", write("roles.json", roles)); err != nil || !strings.Contains(out, "imported 5 roles") {
			t.Fatalf("import roles: %v\n%s", err, out)
		}
		for i := range 5 {
			if !exists("roles", fmt.Sprintf("imp-r%d", i)) {
				t.Fatalf("role imp-r%d missing", i)
			}
		}

		// Users, one holding an imported role: its claims apply at once.
		users := []map[string]any{
			{"Name": "imp-u1", "Roles": []string{"imp-r0"}, "Password": "pw-u1-long"},
			{"Name": "imp-u2", "Roles": []string{}, "Password": "pw-u2-long"},
			{"Name": "imp-u3", "Roles": []string{"imp-r1"}},
		}
		if out, err := imp(adminKey, write("users.json", users)); err != nil || !strings.Contains(out, "imported 3 users") {
			t.Fatalf("import users: %v\n%s", err, out)
		}
		u1 := basic("imp-u1", "pw-u1-long")
		s.Must(200, "GET", "/users/imp-u1", nil, u1)

		// One invalid item (a name with surrounding space) refuses its
		// whole batch: the valid item before it is not written either.
		bad := []map[string]any{{"Name": "imp-ok", "Roles": []string{}}, {"Name": " imp-bad", "Roles": []string{}}}
		out, err := imp(adminKey, write("bad.json", bad))
		if err == nil || !strings.Contains(out+err.Error(), "item 1") {
			t.Fatalf("invalid item: %v\n%s", err, out)
		}
		if exists("users", "imp-ok") {
			t.Fatal("the valid item of a refused batch was written")
		}
		// A duplicate, within the file or of a stored user, likewise.
		dup := []map[string]any{{"Name": "imp-d1", "Roles": []string{}}, {"Name": "imp-u2", "Roles": []string{}}}
		if out, err := imp(adminKey, write("dup.json", dup)); err == nil || !strings.Contains(err.Error(), "409") {
			t.Fatalf("duplicate: %v\n%s", err, out)
		}
		if exists("users", "imp-d1") {
			t.Fatal("a batch with a duplicate was partly written")
		}

		// Authorization: a caller without create rights is refused, and
		// one allowed to create imp-self alone may import exactly that.
		if out, err := imp("imp-u2:pw-u2-long", write("one.json", []map[string]any{{"Name": "imp-x", "Roles": []string{}}})); err == nil || !strings.Contains(err.Error(), "403") {
			t.Fatalf("caller without create rights: %v\n%s", err, out)
		}
		if exists("users", "imp-x") {
			t.Fatal("a refused caller's import was written")
		}
		two := write("two.json", []map[string]any{{"Name": "imp-self", "Roles": []string{}}, {"Name": "imp-other", "Roles": []string{}}})
		if out, err := imp("imp-u1:pw-u1-long", two); err == nil || !strings.Contains(err.Error(), "users create imp-other") {
			t.Fatalf("caller allowed one of two: %v\n%s", err, out)
		}
		if exists("users", "imp-self") || exists("users", "imp-other") {
			t.Fatal("a batch refused for one item was partly written")
		}
		self := write("self.json", []map[string]any{{"Name": "imp-self", "Roles": []string{}}})
		if out, err := imp("imp-u1:pw-u1-long", self); err != nil {
			t.Fatalf("caller allowed its item: %v\n%s", err, out)
		}

		// The route itself answers as the command reports.
		r := s.Do("POST", "/users/import", `{"Name":"not-an-array"}`, admin())
		if r.Status != 400 {
			t.Fatalf("object body: %s", r)
		}
		if r := s.Do("POST", "/machines/import", `[{"Name":"m"}]`, admin()); r.Status == 201 {
			t.Fatalf("machines import: %s", r)
		}
		// Mixed kinds are refused before anything is sent.
		mixed := write("mixed.json", []map[string]any{roles[1], users[1]})
		if out, err := imp(adminKey, mixed); err == nil || !strings.Contains(err.Error(), "one kind at a time") {
			t.Fatalf("mixed kinds: %v\n%s", err, out)
		}
	}, licenseArgs(t)...)
}

// importExtension vetoes creating a user whose name starts with "held-",
// reading the object the create proposes (input.proposed).
const importExtension = `package provgate.ext.heldnames

deny contains sprintf("user %s is held", [input.proposed.Name]) if {
	input.operation == "create"
	startswith(input.proposed.Name, "held-")
}
`

const importExtensionTest = `package provgate.ext.heldnames_test

import data.provgate.ext.heldnames

test_held if {
	count(heldnames.deny) == 1 with input as {"operation": "create", "proposed": {"Name": "held-1"}}
	count(heldnames.deny) == 0 with input as {"operation": "create", "proposed": {"Name": "free-1"}}
}
`

// TestE2EImportExtension: a policy that reads the proposed object decides
// each imported object as it decides its single create: an import holding
// one object it vetoes is refused whole, with the policy's reason.
func TestE2EImportExtension(t *testing.T) {
	t.Parallel()
	for _, db := range databases(t) {
		t.Run(db.Name, func(t *testing.T) {
			dir := t.TempDir()
			writeExtFile(t, dir, "heldnames.rego", importExtension)
			writeExtFile(t, dir, "heldnames_test.rego", importExtensionTest)
			s := startE2E(t, db, "--policy-dir", dir)
			refusedWith(t, s.Do("POST", "/users", map[string]any{"Name": "held-1"}, admin()), "user held-1 is held")
			r := s.Do("POST", "/users/import", []map[string]any{{"Name": "free-1"}, {"Name": "held-2"}}, admin())
			refusedWith(t, r, "user held-2 is held")
			if s.Do("GET", "/users/free-1", nil, admin()).Status != 404 {
				t.Fatal("the allowed object of a refused import was written")
			}
			s.Must(201, "POST", "/users/import", []map[string]any{{"Name": "free-2"}, {"Name": "free-3"}}, admin())
			s.Must(200, "GET", "/users/free-3", nil, admin())
		})
	}
}
