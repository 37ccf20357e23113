package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgxlisten"

	"github.com/provgate/provgate/backend"
)

// notifyChannel names the NOTIFY channel of this store: one per schema, so
// that stores sharing a database in different schemas (test runs, separate
// deployments) never hear each other.
func (s *Store) notifyChannel(ctx context.Context) (string, error) {
	var schema string
	rows, err := s.db.WithContext(ctx).Raw(`SELECT current_schema()`).Rows()
	if err != nil {
		return "", s.dbErr(backend.ReadOp, "schema", "", err)
	}
	defer rows.Close()
	if rows.Next() {
		if err := rows.Scan(&schema); err != nil {
			return "", s.dbErr(backend.ReadOp, "schema", "", err)
		}
	}
	if err := rows.Err(); err != nil {
		return "", s.dbErr(backend.ReadOp, "schema", "", err)
	}
	sum := sha256.Sum256([]byte(schema))
	return "provgate_" + hex.EncodeToString(sum[:8]), nil
}

// Notifies reports whether the store can carry notices between processes
// (PostgreSQL's LISTEN/NOTIFY); SQLite has one process and cannot.
func (s *Store) Notifies() bool { return s.pg() && s.channel != "" }

// Notify sends payload to every process listening on this store
// (docs/design.md §13.4). Inside a transaction (ctx from InTx) it is
// delivered only if and when the transaction commits. On SQLite it does
// nothing.
func (s *Store) Notify(ctx context.Context, payload string) error {
	if !s.Notifies() {
		return nil
	}
	if err := s.conn(ctx).Exec(`SELECT pg_notify(?, ?)`, s.channel, payload).Error; err != nil {
		return s.dbErr(backend.ActionOp, "notify", "", err)
	}
	return nil
}

// Listen receives every payload sent with Notify, by any process, and hands
// it to handle, until ctx ends. It keeps its own connection and makes it
// again after a loss (after retry), calling resync once listening again,
// since notices sent meanwhile are lost. handle must not block. On SQLite
// it returns at once.
func (s *Store) Listen(ctx context.Context, retry time.Duration, handle func(payload string), resync func(ctx context.Context)) error {
	if !s.Notifies() {
		return nil
	}
	if retry <= 0 {
		retry = time.Second
	}
	first := true
	l := &pgxlisten.Listener{
		Connect: func(ctx context.Context) (*pgx.Conn, error) {
			cctx, cancel := withDefaultTimeout(ctx)
			defer cancel()
			return pgx.Connect(cctx, s.dsn)
		},
		LogError: func(ctx context.Context, err error) {
			if ctx.Err() == nil {
				_, password := describePostgres(s.dsn)
				s.log.WarnContext(ctx, "store: listening for notices", "err", scrub(err, password))
			}
		},
		ReconnectDelay: retry,
	}
	l.Handle(s.channel, listenHandler{handle: handle, resync: func(ctx context.Context) {
		if !first && resync != nil {
			resync(ctx)
		}
		first = false
	}})
	err := l.Listen(ctx)
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return nil
	}
	return err
}

// listenHandler passes payloads on; HandleBacklog runs each time the
// listener (re)starts listening.
type listenHandler struct {
	handle func(string)
	resync func(context.Context)
}

func (h listenHandler) HandleNotification(_ context.Context, n *pgconn.Notification, _ *pgx.Conn) error {
	h.handle(n.Payload)
	return nil
}

func (h listenHandler) HandleBacklog(ctx context.Context, _ string, _ *pgx.Conn) error {
	h.resync(ctx)
	return nil
}

// scrub is err's text without the DSN's password.
func scrub(err error, password string) string {
	msg := err.Error()
	if password != "" {
		msg = strings.ReplaceAll(msg, password, "xxxxx")
	}
	return msg
}
