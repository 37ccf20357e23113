package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// tarGz packs the files of dir into a .tar.gz.
func tarGz(t *testing.T, dir string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := tw.WriteHeader(&tar.Header{Name: e.Name(), Mode: 0o600, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// A candidate policy's effect before it is served (docs/design.md §9.8):
// the change freeze example freezes carol; the diff shows her write cells
// lost and her logged PATCH replayed as a refusal, and only a holder of
// system action:policyDiff may ask.
func TestE2EPolicyDiff(t *testing.T) {
	t.Parallel()
	for _, db := range databases(t) {
		t.Run(db.Name, func(t *testing.T) {
			t.Parallel()
			decisions := filepath.Join(t.TempDir(), "decisions.jsonl")
			s := startE2E(t, db, append(licenseArgs(t), "--decision-log", decisions)...)
			policyDiffCase(t, s, decisions)
		})
	}
}

func policyDiffCase(t *testing.T, s *tserver, decisions string) {
	{
		s.AddRole("d-writer", [3]string{"machines", "get,list,update", "*"})
		s.AddUser("carol", "carol-pw-1", "d-writer")
		s.AddUser("dave", "dave-pw-1", "d-writer")
		m := s.AddMachine("d-m", nil)
		s.Must(200, "PATCH", "/machines/"+m, jsonPatch("replace", "/Description", "x"), basic("carol", "carol-pw-1"),
			"X-Request-Id", "d-carol-patch")
		// The log is written in the background: the diff replays it once
		// carol's PATCH is there, instead of building the candidate again
		// and again until it is.
		waitFileHas(t, decisions, `"request_id":"d-carol-patch"`)
		archive := tarGz(t, filepath.Join("..", "..", "testdata", "policy", "extensions", "freeze"))
		s.Must(403, "POST", "/access/policy/diff", map[string]any{"Archive": archive}, basic("dave", "dave-pw-1"))

		var d struct {
			Revision, Candidate string
			Users               []struct {
				User    string
				Changes []struct{ Scope, Action, Before, After string }
			}
			Replayed int
			Changed  []struct{ Principal, Method, Logged, Candidate string }
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			s.Must(200, "POST", "/access/policy/diff", map[string]any{"Archive": archive}, admin()).JSON(t, &d)
			if len(d.Changed) > 0 || time.Now().After(deadline) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if d.Candidate == "" || d.Candidate == d.Revision {
			t.Errorf("revisions %q → %q", d.Revision, d.Candidate)
		}
		if len(d.Users) != 1 || d.Users[0].User != "carol" {
			t.Fatalf("users with changes: %+v", d.Users)
		}
		lost := false
		for _, c := range d.Users[0].Changes {
			lost = lost || (c.Scope == "machines" && c.Action == "update" && c.Before == "all" && c.After == "none")
			if c.Action == "get" {
				t.Errorf("a read changed: %+v", c)
			}
		}
		if !lost {
			t.Errorf("carol's machines update cell: %+v", d.Users[0].Changes)
		}
		patch := false
		for _, c := range d.Changed {
			patch = patch || (c.Method == "PATCH" && c.Logged == "allow" && c.Candidate == "deny")
			if c.Principal != "carol" {
				t.Errorf("a change of someone else's decision: %+v", c)
			}
		}
		if !patch {
			t.Errorf("carol's PATCH not among the replayed changes: %+v (of %d)", d.Changed, d.Replayed)
		}
		r := s.Do("POST", "/access/policy/diff", map[string]any{"Archive": []byte("not a tarball")}, admin())
		if r.Status != 422 || !strings.Contains(string(r.Body), "candidate") {
			t.Errorf("a bad archive: %s", r)
		}
	}
}
