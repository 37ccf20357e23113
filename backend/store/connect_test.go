package store_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/provgate/provgate/backend/store"
	"github.com/provgate/provgate/backend/store/storetest"
)

// limitedRole makes a login role allowed one connection at a time, owning
// the schema of dsn, and returns dsn as that role. The role and what it owns
// are dropped at cleanup.
func limitedRole(t *testing.T, dsn string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	schema := u.Query().Get("search_path")
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	role := "r_" + hex.EncodeToString(b)
	exec := func(sql string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = conn.Close(context.Background()) }()
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec(`CREATE ROLE ` + role + ` LOGIN CONNECTION LIMIT 1`)
	exec(`ALTER SCHEMA ` + schema + ` OWNER TO ` + role)
	t.Cleanup(func() {
		exec(`DROP OWNED BY ` + role + ` CASCADE`)
		exec(`DROP ROLE ` + role)
	})
	u.User = url.User(role)
	return u.String()
}

// TestPostgresWaitsForConnectionSlot: a PostgreSQL server that refuses a
// connection because the limit is reached (max_connections, here a role's
// CONNECTION LIMIT: both SQLSTATE 53300) makes the store wait until a
// connection is free, not fail; a limit that does not clear fails within
// the caller's deadline with PostgreSQL's words (docs/design.md §14.3).
func TestPostgresWaitsForConnectionSlot(t *testing.T) {
	dsn := storetest.PostgresDSN(t)
	if dsn == "" {
		t.Skip("no PostgreSQL test database")
	}
	roleDSN := limitedRole(t, dsn)
	ctx := context.Background()
	hold := func() *pgx.Conn {
		t.Helper()
		c, err := pgx.Connect(ctx, roleDSN)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}

	// The limit holds: a second connection of the role is refused.
	blocker := hold()
	if c, err := pgx.Connect(ctx, roleDSN); err == nil {
		_ = c.Close(ctx)
		t.Fatal("a second connection of a role limited to one was accepted")
	} else if !store.Refused(err) {
		t.Fatalf("second connection: %v, want SQLSTATE 53300", err)
	}

	// A limit that does not clear: Open fails at the caller's deadline,
	// after waiting, with PostgreSQL's words.
	short, cancel := context.WithTimeout(ctx, 700*time.Millisecond)
	t0 := time.Now()
	_, err := store.Open(short, roleDSN, store.Options{MaxOpenConns: 2})
	cancel()
	if err == nil {
		t.Fatal("Open succeeded while the role's only connection was held")
	}
	if waited := time.Since(t0); waited < 600*time.Millisecond {
		t.Fatalf("Open gave up after %s, before the deadline", waited)
	}
	if !strings.Contains(err.Error(), "too many connections") {
		t.Fatalf("Open error %q does not carry PostgreSQL's reason", err)
	}

	// A limit that clears: Open waits for the held connection to close.
	const held = 400 * time.Millisecond
	released := make(chan struct{})
	go func() {
		time.Sleep(held)
		_ = blocker.Close(ctx)
		close(released)
	}()
	t0 = time.Now()
	s, err := store.Open(ctx, roleDSN, store.Options{MaxOpenConns: 2})
	if err != nil {
		t.Fatalf("Open while the connection was held for %s: %v", held, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	<-released
	if waited := time.Since(t0); waited < held-50*time.Millisecond {
		t.Fatalf("Open returned after %s, before the held connection closed", waited)
	}
	const key = "00000000-0000-4000-8000-000000000001"
	if _, err := s.Create(ctx, "machines", key, mustJSON(t, map[string]any{"Uuid": key, "Name": "m1"})); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "machines", key); err != nil {
		t.Fatal(err)
	}
}
