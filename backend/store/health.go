package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
)

// pingTimeout bounds Ping when its ctx has no deadline.
const pingTimeout = 2 * time.Second

// sqliteFile remembers the SQLite file the store opened, so that Ping can
// tell when it was removed or replaced under the running server.
type sqliteFile struct {
	path string
	info os.FileInfo
}

// openedFile records the SQLite file behind dsn after it was opened; nil
// for an in-memory database or a path it cannot stat.
func openedFile(dsn string) *sqliteFile {
	path := strings.TrimPrefix(strings.TrimPrefix(dsn, "sqlite://"), "sqlite:")
	path = strings.SplitN(path, "?", 2)[0]
	if path == "" || path == ":memory:" || strings.HasPrefix(path, "file::memory:") {
		return nil
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil
	}
	return &sqliteFile{path: path, info: fi}
}

// Ping reports whether the store answers: a round trip to the database and,
// for SQLite, the file at the configured path still being the one opened
// (an open SQLite file that was deleted keeps answering, but what it holds
// is lost at the next start). Readiness checks call it (docs/design.md
// §15.4).
func (s *Store) Ping(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, pingTimeout)
		defer cancel()
	}
	sqlDB, err := s.db.DB()
	if err != nil {
		return err
	}
	if err := sqlDB.PingContext(ctx); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	if f := s.file; f != nil {
		fi, err := os.Stat(f.path)
		switch {
		case errors.Is(err, os.ErrNotExist):
			return fmt.Errorf("store: SQLite file %s was removed", f.path)
		case err != nil:
			return fmt.Errorf("store: SQLite file %s: %w", f.path, err)
		case !os.SameFile(fi, f.info):
			return fmt.Errorf("store: SQLite file %s was replaced by another file", f.path)
		}
	}
	return nil
}
