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
	"gorm.io/gorm"

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
// delivered only if and when the transaction commits: an event notice is
// sent after the commit, in a batch with other transactions' (see
// notifier), the authorization revision notice (backend.RevisionNotice)
// inside the transaction. On SQLite it does nothing.
func (s *Store) Notify(ctx context.Context, payload string) error {
	if !s.Notifies() {
		return nil
	}
	if st := s.txFrom(ctx); st != nil && payload != backend.RevisionNotice {
		st.notices = append(st.notices, payload)
		return nil
	}
	return s.sendNotices(ctx, s.conn(ctx), []string{payload})
}

// sendNotices sends payloads in order, in one statement.
func (s *Store) sendNotices(ctx context.Context, db *gorm.DB, payloads []string) error {
	var b strings.Builder
	args := make([]any, 0, 2*len(payloads))
	b.WriteString("SELECT ")
	for i, p := range payloads {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("pg_notify(?, ?)")
		args = append(args, s.channel, p)
	}
	if err := db.WithContext(ctx).Exec(b.String(), args...).Error; err != nil {
		return s.dbErr(backend.ActionOp, "notify", "", err)
	}
	return nil
}

// The store's notifier sends the event notices of committed transactions, off their
// commit. PostgreSQL serializes the commits of transactions that sent a
// NOTIFY (one lock on the notification queue, held through the commit's
// WAL flush), so notices sent inside every writing transaction made
// concurrent writers (pool allocations, say) commit one at a time. Sent
// after the commit by one writer, in batches, they cost one such commit
// per batch and keep "delivered only if the change committed". A notice
// can then be lost if the process stops between a commit and its batch:
// like a full relay queue, that only leaves other replicas' subscribers
// to re-read or time out (docs/design.md §13.4); Close sends what is
// queued first.

// maxQueuedNotices bounds the notices waiting; beyond it the committing
// caller sends its own.
const maxQueuedNotices = 4096

// maxNoticeBatch bounds the notices of one statement.
const maxNoticeBatch = 256

// queueNotices hands the notices of a committed transaction to the
// notifier.
func (s *Store) queueNotices(payloads []string) { s.notifier.Add(payloads...) }

func (s *Store) writeNotices(payloads []string) {
	for len(payloads) > 0 {
		k := min(len(payloads), maxNoticeBatch)
		ctx, cancel := withDefaultTimeout(context.Background())
		err := s.sendNotices(ctx, s.db, payloads[:k])
		cancel()
		if err != nil {
			s.log.Warn("store: sending notices to other replicas failed", "notices", k, "err", err.Error())
		}
		payloads = payloads[k:]
	}
}

// FlushNotices returns once every notice of a transaction committed before
// it has been sent.
func (s *Store) FlushNotices() { s.notifier.Flush() }

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
