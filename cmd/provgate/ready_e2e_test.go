package main

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fasthttp/websocket"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/provgate/provgate/backend/store/storetest"
)

// root is the server's URL without /api/v3, where /healthz and /readyz are.
func (s *tserver) root() string { return strings.TrimSuffix(s.Base, "/api/v3") }

// readyz fetches /readyz and returns its status and body.
func (s *tserver) readyz(t testing.TB) resp {
	t.Helper()
	return s.DoURL(t, "GET", s.root()+"/readyz", nil, "")
}

// waitReady polls /readyz until it answers want, failing after d.
func (s *tserver) waitReady(t testing.TB, want int, d time.Duration) resp {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		r := s.readyz(t)
		if r.Status == want || time.Now().After(deadline) {
			if r.Status != want {
				t.Fatalf("/readyz: %s, want %d within %s", r, want, d)
			}
			return r
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestE2EReadyzStore: /readyz answers 200 while the store answers, and 503
// naming the store once the database is gone, while /healthz (liveness)
// still answers 200. On SQLite the database file is moved away (an open
// file keeps answering, but what it holds would be lost at the next
// start); on PostgreSQL the server's database is dropped.
func TestE2EReadyzStore(t *testing.T) {
	check := func(t *testing.T, s *tserver, remove func(), restore func()) {
		r := s.readyz(t)
		if r.Status != 200 || r.Map(t)["status"] != "ready" {
			t.Fatalf("/readyz of a healthy server: %s", r)
		}
		remove()
		r = s.waitReady(t, 503, 10*time.Second)
		checks, _ := r.Map(t)["checks"].(map[string]any)
		if checks["store"] != "unavailable" || checks["policy"] != "ok" || checks["draining"] != false {
			t.Fatalf("/readyz without a database: %s", r)
		}
		if h := s.DoURL(t, "GET", s.root()+"/healthz", nil, ""); h.Status != 200 {
			t.Fatalf("/healthz without a database: %s", h)
		}
		if !strings.Contains(s.Stderr.String(), "readiness: store unavailable") {
			t.Errorf("the cause is not logged:\n%s", s.Stderr.String())
		}
		if restore != nil {
			restore()
			s.waitReady(t, 200, 10*time.Second)
		}
	}
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		s := startE2E(t, dbCase{Name: "sqlite"})
		db := filepath.Join(s.DataDir, "provgate.db")
		moved := db + ".moved"
		check(t, s, func() {
			if err := os.Rename(db, moved); err != nil {
				t.Fatal(err)
			}
		}, func() {
			if err := os.Rename(moved, db); err != nil {
				t.Fatal(err)
			}
		})
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		if storetest.PostgresDSN(t) == "" {
			return // logged (and a failure in CI) by storetest
		}
		admin, dsn, name := createDatabase(t)
		s := startE2E(t, dbCase{Name: "postgres", DSN: dsn})
		check(t, s, func() {
			if err := admin.Exec(`DROP DATABASE ` + name + ` WITH (FORCE)`).Error; err != nil {
				t.Fatal(err)
			}
		}, nil)
	})
}

// createDatabase makes a PostgreSQL database of its own (dropped at
// cleanup) next to the test database, and returns an administrative
// connection, the new database's DSN and its name.
func createDatabase(t *testing.T) (*gorm.DB, string, string) {
	t.Helper()
	base := os.Getenv(storetest.EnvDSN)
	admin, err := gorm.Open(postgres.Open(base), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		t.Fatal(err)
	}
	sqlDB, _ := admin.DB()
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "readyz_" + hex.EncodeToString(b[:])
	if err := admin.Exec(`CREATE DATABASE ` + name).Error; err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admin.Exec(`DROP DATABASE IF EXISTS ` + name + ` WITH (FORCE)`).Error
		_ = sqlDB.Close()
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	return admin, u.String(), name
}

// TestE2EDrain: a stop signal turns /readyz to 503 at once, while the server
// still serves for --shutdown-delay; open event streams are closed "going
// away" and new ones refused, and a long poll and a pool wait answer at
// once, long before their waits end; /healthz stays 200 meanwhile.
func TestE2EDrain(t *testing.T) {
	forEachDB(t, func(t *testing.T, s *tserver) {
		adm := admin()
		if r := s.readyz(t); r.Status != 200 {
			t.Fatalf("/readyz before the stop: %s", r)
		}
		ws := s.mustWS(t, adm)
		ws.register("machines.*.*")

		m := s.AddMachine("drain-m1", nil)
		etag := s.Must(200, "GET", "/machines/"+m, nil, adm).Header.Get("ETag")
		poll := s.Go("GET", "/machines/"+m, nil, adm, "If-None-Match", etag, "Prefer", "wait=120s")

		s.Must(201, "POST", "/tasks", map[string]any{"Name": "drain-t"}, adm)
		s.Must(201, "POST", "/stages", map[string]any{"Name": "drain-s", "Tasks": []string{"drain-t"}}, adm)
		s.Must(201, "POST", "/workflows", map[string]any{"Name": "drain-wf", "Stages": []string{"drain-s"}}, adm)
		s.Must(201, "POST", "/pools", map[string]any{"Id": "drain-pool", "EnterActions": map[string]any{"Workflow": "drain-wf"}}, adm)
		m2 := s.AddMachine("drain-m2", nil)
		pool := s.Go("POST", "/pools/drain-pool/addMachines", map[string]any{
			"pool/machine-list": []string{m2}, "pool/wait-timeout": "120s"}, adm)
		// Both requests are waiting: nothing answered them yet.
		time.Sleep(500 * time.Millisecond)
		select {
		case r := <-poll:
			t.Fatalf("the long poll answered before the stop: %v %s", r.Err, r.resp)
		case r := <-pool:
			t.Fatalf("the pool wait answered before the stop: %v %s", r.Err, r.resp)
		default:
		}

		start := time.Now()
		stopped := make(chan struct{})
		go func() { defer close(stopped); s.Stop() }()

		s.waitReady(t, 503, 2*time.Second)
		if code, _ := ws.closed(3 * time.Second); code != websocket.CloseGoingAway {
			t.Errorf("event stream closed with %d, want %d (going away)", code, websocket.CloseGoingAway)
		}
		if r := await(t, poll, 3*time.Second, "the long poll during the drain"); r.Status != 304 {
			t.Errorf("long poll during the drain: %s", r.resp)
		}
		r := await(t, pool, 3*time.Second, "the pool wait during the drain")
		if r.Status != 200 || !strings.Contains(string(r.Body), m2) {
			t.Errorf("pool wait during the drain: %s", r.resp)
		}
		took := time.Since(start)
		// Still serving: the delay is not over.
		if h := s.DoURL(t, "GET", s.root()+"/healthz", nil, ""); h.Status != 200 {
			t.Errorf("/healthz during the drain: %s", h)
		}
		rz := s.readyz(t)
		if checks, _ := rz.Map(t)["checks"].(map[string]any); rz.Status != 503 || checks["draining"] != true {
			t.Errorf("/readyz during the drain: %s", rz)
		}
		if _, res, err := s.dialWS(t, adm); err == nil || res == nil || res.StatusCode != 503 {
			status := 0
			if res != nil {
				status = res.StatusCode
			}
			t.Errorf("a new event stream during the drain: %v (status %d), want 503", err, status)
		}
		if took >= 4*time.Second {
			t.Errorf("streams and waits ended %s after the stop, not before the listener closed", took)
		}
		// The requests above, made after Stop began, may have left
		// connections the client dialed and never used; as in Stop, a
		// real client goes away, this one closes them.
		if tr, ok := s.client.Transport.(*http.Transport); ok {
			tr.CloseIdleConnections()
		}
		select {
		case <-stopped:
		case <-time.After(30 * time.Second):
			t.Fatal("the server did not stop")
		}
		logs := s.Stderr.String()
		if i, j := strings.Index(logs, `"msg":"draining"`), strings.Index(logs, `"msg":"shutting down"`); i < 0 || j < i {
			t.Errorf("draining is not logged before shutting down:\n%s", logs)
		}
	}, "--shutdown-delay", "5s")
}
