// Package storetest opens fresh stores for tests: SQLite always, and
// PostgreSQL whenever PROVGATE_TEST_DATABASE holds a DSN. Each PostgreSQL
// store lives in its own schema, dropped at cleanup, so parallel test runs
// against one database never see each other's rows.
//
// When CI=true, a missing or unreachable PostgreSQL fails the test instead
// of skipping it: CI must exercise both dialects.
package storetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/provgate/provgate/backend/store"
)

// EnvDSN names the environment variable holding the PostgreSQL test DSN.
const EnvDSN = "PROVGATE_TEST_DATABASE"

// Case is one fresh store of one dialect.
type Case struct {
	Name  string // "sqlite" or "postgres"
	Store *store.Store
}

// Open returns a fresh SQLite store and, when available, a fresh PostgreSQL
// store; both are closed (and the PostgreSQL schema dropped) at cleanup.
func Open(t testing.TB) []Case {
	t.Helper()
	cases := []Case{{Name: "sqlite", Store: SQLite(t)}}
	if pg := Postgres(t); pg != nil {
		cases = append(cases, Case{Name: "postgres", Store: pg})
	}
	return cases
}

// SQLite opens a fresh SQLite store in a temporary directory.
func SQLite(t testing.TB) *store.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := store.Open(ctx, filepath.Join(t.TempDir(), "store.db"), store.Options{})
	if err != nil {
		t.Fatalf("storetest: open sqlite: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func inCI() bool { return os.Getenv("CI") == "true" }

// Postgres opens a fresh PostgreSQL store in its own schema, or returns nil
// (after logging why) when no test database is configured or reachable. In
// CI it fails the test instead.
func Postgres(t testing.TB) *store.Store {
	t.Helper()
	dsn := PostgresDSN(t)
	if dsn == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := store.Open(ctx, dsn, store.Options{})
	if err != nil {
		t.Fatalf("storetest: open postgres: %v", err)
	}
	// Registered after the schema cleanup, so it runs first.
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// PostgresDSN creates a fresh schema and returns a DSN whose search_path is
// that schema (dropped at cleanup), so several servers can share it. It
// returns "" (after logging why) when no test database is configured or
// reachable; in CI it fails the test instead.
func PostgresDSN(t testing.TB) string {
	t.Helper()
	unavailable := func(format string, args ...any) string {
		t.Helper()
		if inCI() {
			t.Fatalf("storetest: PostgreSQL required in CI: "+format, args...)
		}
		t.Logf("storetest: skipping PostgreSQL: "+format, args...)
		return ""
	}
	dsn := os.Getenv(EnvDSN)
	if dsn == "" {
		return unavailable("%s is not set", EnvDSN)
	}
	u, err := url.Parse(dsn)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return unavailable("%s must be a postgres:// URL", EnvDSN)
	}
	// The schema is made and dropped on short-lived connections: a test
	// holds no connection of its own between the two, so tests waiting for
	// their turn (t.Parallel) do not fill PostgreSQL's max_connections, and
	// neither do two test runs side by side.
	schema := "t_" + randomHex(8)
	if err := adminExec(dsn, `CREATE SCHEMA `+schema); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) {
			t.Fatalf("storetest: create schema: %v", err)
		}
		return unavailable("cannot reach the test database: %v", err)
	}
	t.Cleanup(func() {
		if err := adminExec(dsn, `DROP SCHEMA IF EXISTS `+schema+` CASCADE`); err != nil {
			t.Logf("storetest: drop schema %s: %v", schema, err)
		}
	})
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// adminExec runs one statement on a connection of its own, closed after it.
func adminExec(dsn, sql string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	// A database at max_connections (other tests, another test run) frees
	// connections as tests end; wait for one as servers do (store.Refused).
	for wait := 20 * time.Millisecond; err != nil && store.Refused(err) && ctx.Err() == nil; wait = min(2*wait, time.Second) {
		time.Sleep(wait)
		conn, err = pgx.Connect(ctx, dsn)
	}
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(context.Background()) }()
	_, err = conn.Exec(ctx, sql)
	return err
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}
