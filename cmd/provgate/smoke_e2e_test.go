package main

import (
	"context"
	"strings"
	"testing"
)

// TestE2ESmoke walks the basic DRP flow on every database: info with Basic,
// a token, create/get/patch/list a machine, and a pool move.
func TestE2ESmoke(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, s *tserver) {
		s.Must(200, "GET", "/info", nil, admin())
		tok := s.Token("rocketskates", admin(), "?ttl=600")
		auth := bearer(tok)
		var m map[string]any
		s.Must(201, "POST", "/machines", map[string]any{"Name": "m1", "Uuid": "", "Params": nil}, auth).JSON(t, &m)
		if m["Uuid"] == "" || m["Pool"] != "default" || m["PoolStatus"] != "Free" {
			t.Fatalf("create defaults: %v", m)
		}
		if _, ok := m["Secret"]; ok {
			t.Fatalf("Secret returned: %v", m)
		}
		r := s.Must(200, "PATCH", "/machines/Name:m1", `[{"op":"test","path":"/Description","from":"","value":""},{"op":"replace","path":"/Description","from":"","value":"hi"}]`, auth)
		if got := r.Map(t)["Description"]; got != "hi" {
			t.Fatalf("patched Description = %v", got)
		}
		r = s.Must(200, "HEAD", "/machines?Name=Re(^m)", nil, auth)
		if got := r.Header.Get("X-DRP-LIST-FILTER-COUNT"); got != "1" {
			t.Fatalf("filter count %q", got)
		}
		s.Must(201, "POST", "/pools", map[string]any{"Id": "p1"}, auth)
		var pr []map[string]any
		s.Must(200, "POST", "/pools/p1/addMachines", map[string]any{"pool/count": 1}, auth).JSON(t, &pr)
		if len(pr) != 1 || pr[0]["Status"] != "Free" {
			t.Fatalf("addMachines: %v", pr)
		}
		s.Must(401, "GET", "/machines", nil, "")
		s.Must(403, "GET", "/machines", nil, bearer("garbage"))
	})
}

// TestStartFailsCleanly: a database that cannot be reached ends the command
// with one error naming the problem (no panic, no password).
func TestStartFailsCleanly(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var out, errb logBuffer
	err := run(context.Background(), []string{"serve", "--data-dir", dir, "--listen", "127.0.0.1:0",
		"--database", "postgres://nobody:s3cretpw@127.0.0.1:1/x?connect_timeout=2"},
		func(string) string { return "" }, &out, &errb)
	if err == nil {
		t.Fatal("serve with an unreachable database succeeded")
	}
	if strings.Contains(err.Error(), "s3cretpw") || strings.Contains(errb.String(), "s3cretpw") {
		t.Fatalf("password leaked: %v", err)
	}
}
