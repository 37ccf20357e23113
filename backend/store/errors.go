package store

import (
	"context"
	"errors"
	"strings"

	gosqlite "github.com/glebarez/go-sqlite"
	"github.com/jackc/pgx/v5/pgconn"
	"gorm.io/gorm"

	"github.com/provgate/provgate/backend"
)

// SQLite result codes (sqlite3.h); the driver reports extended codes, whose
// low byte is the primary code.
const (
	sqliteBusy       = 5
	sqliteLocked     = 6
	sqliteConstraint = 19
	sqliteFull       = 13
	sqliteCantOpen   = 14
	// extended constraint codes that mean "duplicate"
	sqliteConstraintPrimaryKey = 1555
	sqliteConstraintUnique     = 2067
)

// dbErr translates a driver failure into a domain error at the store
// boundary. The cause is kept in Err (for logs), never in Messages.
func (s *Store) dbErr(op backend.Operation, model, key string, err error) error {
	if err == nil {
		return nil
	}
	var de *backend.Error
	if errors.As(err, &de) {
		return err
	}
	mk := func(code, msg string) error {
		return &backend.Error{Code: code, Op: op, Model: model, Key: key, Messages: []string{msg}, Err: err}
	}
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return mk(backend.EUNAVAILABLE, "request canceled or timed out")
	case errors.Is(err, gorm.ErrDuplicatedKey):
		return mk(backend.ECONFLICT, "already exists")
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case pe.Code == "23505": // unique_violation
			return mk(backend.ECONFLICT, "already exists")
		case pe.Code == "23503": // foreign_key_violation
			return mk(backend.ECONFLICT, "still in use")
		case pe.Code == "40001", pe.Code == "40P01": // serialization failure, deadlock
			return mk(backend.ECONFLICT, "concurrent update, retry")
		case pe.Code == "22P02", pe.Code == "22P05", pe.Code == "22023", pe.Code == "2201B", pe.Code == "22021":
			// bad JSON text, characters JSONB refuses (\u0000), bad regular
			// expression, bad encoding
			return mk(backend.EINVALID, "value rejected by the database")
		case pe.Code == "57014": // query_canceled (statement timeout)
			return mk(backend.EUNAVAILABLE, "query canceled")
		case strings.HasPrefix(pe.Code, "08"), strings.HasPrefix(pe.Code, "53"), strings.HasPrefix(pe.Code, "57P"):
			return mk(backend.EUNAVAILABLE, "database unavailable")
		}
		return mk(backend.EINTERNAL, "database error")
	}
	var se *gosqlite.Error
	if errors.As(err, &se) {
		code := se.Code()
		switch {
		case code == sqliteConstraintUnique, code == sqliteConstraintPrimaryKey:
			return mk(backend.ECONFLICT, "already exists")
		case code&0xff == sqliteConstraint:
			return mk(backend.ECONFLICT, "constraint violated")
		case code&0xff == sqliteBusy, code&0xff == sqliteLocked, code&0xff == sqliteCantOpen, code&0xff == sqliteFull:
			return mk(backend.EUNAVAILABLE, "database unavailable")
		}
		return mk(backend.EINTERNAL, "database error")
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) || strings.Contains(err.Error(), "connection refused") || errors.Is(err, gorm.ErrInvalidDB) {
		return mk(backend.EUNAVAILABLE, "database unavailable")
	}
	return mk(backend.EINTERNAL, "database error")
}
