// Package store keeps provgate's objects with GORM on SQLite (the default,
// pure Go) or PostgreSQL. Every kind of the kind catalog (backend.Catalog)
// has its own table holding the object's JSON; list filters run in SQL.
//
// Dialect notes:
//   - SQLite runs on one connection (SetMaxOpenConns(1)) and every
//     transaction begins IMMEDIATE: transactions are serialized, which is
//     what makes ClaimForUpdate safe there, since SQLite has no row locks.
//     The price is that a caller inside InTx must pass the transaction's ctx
//     to every store call: a call with an unrelated ctx waits for the single
//     connection and blocks until that ctx ends.
//   - PostgreSQL stores data as JSONB; text comparisons and sorting use the
//     "C" collation (byte order) so that both dialects order alike.
package store

import (
	"bytes"
	"context"
	stdsql "database/sql"
	"encoding/json"
	"errors"
	"log/slog"
	mrand "math/rand/v2"
	"strings"
	"sync"

	"gorm.io/gorm"

	"github.com/provgate/provgate/backend"
	"github.com/provgate/provgate/backend/internal/writebehind"
)

// Options tune a Store.
type Options struct {
	Logger *slog.Logger
	// Kinds is the kind catalog cmd built (docs/design.md §1.4): one
	// table per kind. nil builds one.
	Kinds *backend.Catalog
	// MaxOpenConns bounds the PostgreSQL pool (default 20). SQLite always
	// uses one connection.
	MaxOpenConns int
}

// Record is one stored object (backend.Record).
type Record = backend.Record

// Store is the GORM-backed repository. Transactions travel in the context:
// every method called with a ctx derived from InTx's runs in that transaction.
type Store struct {
	db      *gorm.DB
	kinds   *backend.Catalog
	dialect string
	log     *slog.Logger
	// dsn and channel serve LISTEN/NOTIFY on PostgreSQL (notify.go).
	dsn     string
	channel string
	// revStmts holds Rev's prepared statement per kind (*sql.Stmt).
	revStmts sync.Map
	hookMu   sync.RWMutex
	onWrite  []func(prefix, key string)
	// file is the SQLite file opened (health.go); nil on PostgreSQL.
	file *sqliteFile
	// stats times the statements (QueryStats).
	stats queryStats
	// notifier sends committed transactions' notices (notify.go).
	notifier *writebehind.Queue[string]
	// counts keeps restricted lists' totals on SQLite (visible.go).
	counts *visibleCounts
}

const (
	dialectSQLite   = "sqlite"
	dialectPostgres = "postgres"
)

// Open connects to dsn (a postgres:// URL or libpq keyword/value string for
// PostgreSQL; anything else is a SQLite file path, see ParseDSN for what a
// configuration may name) and migrates the schema.
func Open(ctx context.Context, dsn string, opts Options) (*Store, error) {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	s := &Store{log: log, kinds: opts.Kinds}
	if s.kinds == nil {
		s.kinds = backend.NewCatalog()
	}
	s.notifier = writebehind.New(maxQueuedNotices, 0, s.writeNotices)
	var err error
	if isPostgresDSN(dsn) {
		s.dialect = dialectPostgres
		s.db, err = openPostgres(ctx, dsn, opts, log)
	} else {
		s.dialect = dialectSQLite
		s.db, err = openSQLite(ctx, dsn, log)
		s.file = openedFile(dsn)
	}
	if err != nil {
		return nil, err
	}
	s.db.Logger = timedLogger{Interface: s.db.Logger, stats: &s.stats}
	s.counts = newVisibleCounts()
	if !s.pg() {
		s.OnCommittedWrite(s.counts.wrote)
	}
	if err := s.migrate(ctx); err != nil {
		_ = s.Close()
		return nil, err
	}
	if s.pg() {
		s.dsn = dsn
		if s.channel, err = s.notifyChannel(ctx); err != nil {
			_ = s.Close()
			return nil, err
		}
	}
	return s, nil
}

// Close releases the connection pool.
func (s *Store) Close() error {
	s.FlushNotices()
	sqlDB, err := s.db.DB()
	if err != nil {
		return err
	}
	return sqlDB.Close()
}

// Dialect is "sqlite" or "postgres".
func (s *Store) Dialect() string { return s.dialect }

// DB is the underlying GORM handle, for tests and operational tooling.
func (s *Store) DB() *gorm.DB { return s.db }

func (s *Store) pg() bool { return s.dialect == dialectPostgres }

// txKey carries the transaction in a ctx.
type txKey struct{}

type txState struct {
	owner *Store
	db    *gorm.DB
	// written are the objects the transaction wrote, told to onWrite
	// once it commits.
	written []objectRef
	// notices are the event notices it sent, sent once it commits.
	notices []string
	// exist: the transaction created or deleted an object whose kind's
	// existence generation moves (visible.go); bumped last, before commit.
	exist bool
}

type objectRef struct{ prefix, key string }

// OnCommittedWrite adds fn to run after every committed create, update or
// delete of an object made through this Store (after the commit of the
// transaction it ran in). On SQLite, where only this process writes the
// file, that is every change (the read cache relies on it, docs/design.md
// §14.6); on PostgreSQL other replicas write too.
func (s *Store) OnCommittedWrite(fn func(prefix, key string)) {
	s.hookMu.Lock()
	defer s.hookMu.Unlock()
	s.onWrite = append(s.onWrite[:len(s.onWrite):len(s.onWrite)], fn)
}

func (s *Store) hooks() []func(prefix, key string) {
	s.hookMu.RLock()
	defer s.hookMu.RUnlock()
	return s.onWrite
}

func (s *Store) tell(prefix, key string) {
	for _, fn := range s.hooks() {
		fn(prefix, key)
	}
}

// SoleWriter says whether every write to the database goes through this
// process (SQLite), so that OnCommittedWrite sees them all.
func (s *Store) SoleWriter() bool { return !s.pg() }

// wrote records a successful object write: at once outside a transaction,
// at commit inside one.
func (s *Store) wrote(ctx context.Context, prefix, key string) {
	if len(s.hooks()) == 0 {
		return
	}
	if st := s.txFrom(ctx); st != nil {
		st.written = append(st.written, objectRef{prefix, key})
		return
	}
	s.tell(prefix, key)
}

func (s *Store) txFrom(ctx context.Context) *txState {
	if st, ok := ctx.Value(txKey{}).(*txState); ok && st.owner == s {
		return st
	}
	return nil
}

// conn is the handle a store call uses: ctx's transaction when there is one.
func (s *Store) conn(ctx context.Context) *gorm.DB {
	if st := s.txFrom(ctx); st != nil {
		return st.db.WithContext(ctx)
	}
	return s.db.WithContext(ctx)
}

// InTx runs fn in one transaction carried by fn's ctx; store calls made with
// that ctx join it. A nested InTx joins the outer transaction (no savepoint:
// an error returned by the inner fn is the caller's to propagate). fn's error
// rolls everything back. A transaction ctx must not be shared between
// goroutines.
func (s *Store) InTx(ctx context.Context, fn func(ctx context.Context) error) error {
	if s.txFrom(ctx) != nil {
		return fn(ctx)
	}
	var fnErr error
	st := &txState{owner: s}
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		st.db = tx
		if fnErr = fn(context.WithValue(ctx, txKey{}, st)); fnErr != nil {
			return fnErr
		}
		if st.exist {
			// Last, so that the row is held only for the commit and
			// always after the revision row: no lock order cycle.
			return tx.Exec(`UPDATE obj_exist SET gen = gen + 1 WHERE id = ?`, mrand.IntN(existStripes)).Error
		}
		return nil
	})
	if err == nil {
		for _, w := range st.written {
			s.tell(w.prefix, w.key)
		}
		if len(st.notices) > 0 {
			s.queueNotices(st.notices)
		}
		return nil
	}
	if fnErr != nil {
		return fnErr
	}
	return s.dbErr(backend.CommitOp, "", "", err)
}

func (s *Store) kind(prefix string) (*backend.Kind, error) {
	k := s.kinds.Kind(prefix)
	if k == nil {
		return nil, backend.OpError(backend.EINTERNAL, backend.ReadOp, prefix, "", "unknown object kind")
	}
	return k, nil
}

// bumpsRevision says whether writes to prefix change the auth data replicas
// cache (users, roles, tenants).
func bumpsRevision(prefix string) bool {
	return prefix == "users" || prefix == "roles" || prefix == "tenants"
}

// ChangeLogKeep is how many change log entries the store keeps: a
// replica further behind than that reloads everything.
const ChangeLogKeep = 10000

// bumpRevision moves the revision and logs what moved it, prefix/key, in
// the caller's transaction (docs/design.md §14.4). The revision row's lock
// orders the writers, so revisions are committed in order and without gaps.
func (s *Store) bumpRevision(ctx context.Context, prefix, key string) error {
	var rev int64
	rows, err := s.conn(ctx).Raw(`UPDATE revision SET value = value + 1 WHERE id = 1 RETURNING value`).Rows()
	if err != nil {
		return s.dbErr(backend.ReplaceOp, "revision", "", err)
	}
	if rows.Next() {
		err = rows.Scan(&rev)
	}
	if cerr := rows.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return s.dbErr(backend.ReplaceOp, "revision", "", err)
	}
	if err := s.conn(ctx).Exec(`INSERT INTO revision_changes (rev, prefix, "key") VALUES (?, ?, ?)`, rev, prefix, key).Error; err != nil {
		return s.dbErr(backend.ReplaceOp, "revision", "", err)
	}
	if rev%100 == 0 {
		if err := s.conn(ctx).Exec(`DELETE FROM revision_changes WHERE rev <= ?`, rev-ChangeLogKeep).Error; err != nil {
			return s.dbErr(backend.ReplaceOp, "revision", "", err)
		}
	}
	// Other replicas reload at once, not only on their next request
	// (docs/design.md §14.4): event streams have no next request.
	return s.Notify(ctx, backend.RevisionNotice)
}

// Changes returns the change log entries with after < Rev <= upto, oldest
// first. Entries older than the last ChangeLogKeep revisions are gone: a
// caller that gets fewer than upto-after entries reloads everything.
func (s *Store) Changes(ctx context.Context, after, upto int64) ([]backend.Change, error) {
	rows, err := s.conn(ctx).Raw(`SELECT rev, prefix, "key" FROM revision_changes WHERE rev > ? AND rev <= ? ORDER BY rev`, after, upto).Rows()
	if err != nil {
		return nil, s.dbErr(backend.ReadOp, "revision", "", err)
	}
	defer rows.Close()
	var out []backend.Change
	for rows.Next() {
		var c backend.Change
		if err := rows.Scan(&c.Rev, &c.Prefix, &c.Key); err != nil {
			return nil, s.dbErr(backend.ReadOp, "revision", "", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, s.dbErr(backend.ReadOp, "revision", "", err)
	}
	return out, nil
}

// write runs fn in a transaction that also bumps the revision counter when
// prefix requires it; other kinds run fn directly.
func (s *Store) write(ctx context.Context, prefix, key string, fn func(ctx context.Context) error) error {
	return s.writeExist(ctx, prefix, key, false, fn)
}

// existInline says whether a create or delete of prefix outside a
// transaction moves the existence generation in its own statement
// (existBumped) rather than in a transaction around it: on PostgreSQL,
// for the kinds without revision.
func (s *Store) existInline(ctx context.Context, prefix string) bool {
	return s.pg() && tracksExistence(prefix) && !bumpsRevision(prefix) && s.txFrom(ctx) == nil
}

// existBumped wraps a single-row INSERT or DELETE ... RETURNING cols so
// that the same statement, and so its commit, moves the existence
// generation when it wrote a row: one round trip, the stripe's row held
// only until that statement commits.
func existBumped(sql, cols string, args []any) (string, []any) {
	return `WITH w AS (` + sql + `), b AS (UPDATE obj_exist SET gen = gen + 1 WHERE id = ? AND EXISTS (SELECT 1 FROM w)) SELECT ` + cols + ` FROM w`,
		append(args, mrand.IntN(existStripes))
}

// writeExist is write for a create or delete (exist): on PostgreSQL, it
// also moves the existence generation when the transaction commits
// (visible.go).
func (s *Store) writeExist(ctx context.Context, prefix, key string, exist bool, fn func(ctx context.Context) error) error {
	exist = exist && s.pg() && tracksExistence(prefix)
	if !bumpsRevision(prefix) && !exist {
		return fn(ctx)
	}
	return s.InTx(ctx, func(ctx context.Context) error {
		if err := fn(ctx); err != nil {
			return err
		}
		if exist {
			s.txFrom(ctx).exist = true
		}
		if !bumpsRevision(prefix) {
			return nil
		}
		return s.bumpRevision(ctx, prefix, key)
	})
}

// columns is the select list of a page: with or without the documents.
func columns(data bool) string {
	if data {
		return `"key", rev, data`
	}
	return `"key", rev`
}

// scanRows scans the rows of a page selected with columns(data).
func (s *Store) scanRows(db *gorm.DB, model string, data bool) ([]Record, error) {
	out, err := queryRows(db, func(rows *stdsql.Rows, r *Record) error {
		if data {
			return rows.Scan(&r.Key, &r.Rev, &r.Data)
		}
		return rows.Scan(&r.Key, &r.Rev)
	})
	if err != nil {
		return nil, s.dbErr(backend.ReadOp, model, "", err)
	}
	return out, nil
}

// scanRecords scans the rows of a select of "key", rev, data.
func (s *Store) scanRecords(db *gorm.DB, model string) ([]Record, error) {
	return s.scanRows(db, model, true)
}

// Get reads one object by native key. ENOTFOUND when absent.
func (s *Store) Get(ctx context.Context, prefix, key string) (Record, error) {
	if _, err := s.kind(prefix); err != nil {
		return Record{}, err
	}
	if strings.IndexByte(key, 0) >= 0 {
		// No stored key holds a NUL (PostgreSQL text cannot), so it names
		// nothing on either database, rather than failing on one of them.
		return Record{}, backend.NotFound(backend.ReadOp, prefix, key)
	}
	recs, err := s.scanRecords(s.conn(ctx).Raw(`SELECT "key", rev, data FROM `+tableName(prefix)+` WHERE "key" = ?`, key), prefix)
	if err != nil {
		return Record{}, err
	}
	if len(recs) == 0 {
		return Record{}, backend.NotFound(backend.ReadOp, prefix, key)
	}
	return recs[0], nil
}

// GetBy reads one object by a unique index value (the "Name:m1" key form).
// An index that is not a unique index of the kind finds nothing.
func (s *Store) GetBy(ctx context.Context, prefix, index, value string) (Record, error) {
	k, err := s.kind(prefix)
	if err != nil {
		return Record{}, err
	}
	idx, ok := k.Indexes[index]
	if !ok || !idx.Unique || strings.IndexByte(value, 0) >= 0 {
		return Record{}, backend.NotFound(backend.ReadOp, prefix, index+":"+value)
	}
	if idx.Field == k.KeyField {
		r, err := s.Get(ctx, prefix, value)
		if err != nil {
			return Record{}, backend.NotFound(backend.ReadOp, prefix, index+":"+value)
		}
		return r, nil
	}
	b := s.newBuilder(k)
	cond, err := b.filter(backend.Filter{Name: index, Target: backend.TargetIndex, Index: idx, Op: backend.OpEq, Values: []string{value}})
	if err != nil {
		return Record{}, err
	}
	recs, err := s.scanRecords(s.conn(ctx).Raw(`SELECT "key", rev, data FROM `+tableName(prefix)+` WHERE `+cond.sql+` ORDER BY "key" LIMIT 1`, cond.args...), prefix)
	if err != nil {
		return Record{}, err
	}
	if len(recs) == 0 {
		return Record{}, backend.NotFound(backend.ReadOp, prefix, index+":"+value)
	}
	return recs[0], nil
}

func checkJSON(op backend.Operation, prefix, key string, data []byte) error {
	if !json.Valid(data) {
		return backend.OpError(backend.EINVALID, op, prefix, key, "object is not valid JSON")
	}
	return nil
}

// Create inserts an object. ECONFLICT when the key or a unique index exists.
func (s *Store) Create(ctx context.Context, prefix, key string, data []byte) (Record, error) {
	if _, err := s.kind(prefix); err != nil {
		return Record{}, err
	}
	if key == "" {
		return Record{}, backend.OpError(backend.EBADREQUEST, backend.CreateOp, prefix, "", "Empty key not allowed")
	}
	if err := checkJSON(backend.CreateOp, prefix, key, data); err != nil {
		return Record{}, err
	}
	// ON CONFLICT DO NOTHING covers the primary key and every unique index
	// without raising an error, which on PostgreSQL would abort a caller's
	// surrounding transaction.
	var rev int64
	inline := s.existInline(ctx, prefix)
	err := s.writeExist(ctx, prefix, key, !inline, func(ctx context.Context) error {
		expr, revArgs, err := s.nextRev(ctx)
		if err != nil {
			return s.dbErr(backend.CreateOp, prefix, key, err)
		}
		sql := `INSERT INTO ` + tableName(prefix) + ` ("key", rev, data) VALUES (?, ` + expr + `, ` + s.jsonParam() +
			`) ON CONFLICT DO NOTHING RETURNING rev`
		args := append(append([]any{key}, revArgs...), string(data))
		if inline {
			sql, args = existBumped(sql, "rev", args)
		}
		found, err := s.scanRev(s.conn(ctx), sql, args, &rev)
		if err != nil {
			return s.dbErr(backend.CreateOp, prefix, key, err)
		}
		if !found {
			return backend.OpError(backend.ECONFLICT, backend.CreateOp, prefix, key, "already exists")
		}
		return nil
	})
	if err != nil {
		return Record{}, err
	}
	s.wrote(ctx, prefix, key)
	return Record{Key: key, Rev: rev, Data: append([]byte(nil), data...)}, nil
}

// nextRev is the SQL expression of a new object revision and its
// arguments. Revisions come from one counter for every object of every
// kind, so a revision names one version of one object for good: an object
// deleted and created again never repeats a revision it had, and a cache
// keyed by revision is never fooled (docs/design.md §14.6). PostgreSQL uses
// a sequence, which orders no writers; SQLite, whose writers are serialized
// anyway, a counter row.
func (s *Store) nextRev(ctx context.Context) (string, []any, error) {
	if s.pg() {
		return `nextval('obj_rev_seq')`, nil, nil
	}
	var v int64
	found, err := s.scanRev(s.conn(ctx), `UPDATE obj_rev SET value = value + 1 WHERE id = 1 RETURNING value`, nil, &v)
	if err == nil && !found {
		err = errors.New("object revision counter is missing")
	}
	return `?`, []any{v}, err
}

// scanRev runs a statement returning at most one integer into v.
func (s *Store) scanRev(db *gorm.DB, sql string, args []any, v *int64) (bool, error) {
	rows, err := db.Raw(sql, args...).Rows()
	if err != nil {
		return false, err
	}
	defer rows.Close()
	found := false
	if rows.Next() {
		found = true
		if err := rows.Scan(v); err != nil {
			return false, err
		}
	}
	return found, rows.Err()
}

// Rev reads the revision of one object by native key (ENOTFOUND when
// absent): one primary-key lookup, which is how a cache of decoded objects
// knows its copy is current. Outside a transaction it runs as a statement
// prepared once per kind, since it runs on every cached read.
func (s *Store) Rev(ctx context.Context, prefix, key string) (int64, error) {
	if _, err := s.kind(prefix); err != nil {
		return 0, err
	}
	if strings.IndexByte(key, 0) >= 0 {
		return 0, backend.NotFound(backend.ReadOp, prefix, key)
	}
	sql := `SELECT rev FROM ` + tableName(prefix) + ` WHERE "key" = ?`
	var rev int64
	if s.txFrom(ctx) == nil {
		stmt, err := s.revStmt(ctx, prefix, sql)
		if err != nil {
			return 0, s.dbErr(backend.ReadOp, prefix, key, err)
		}
		err = stmt.QueryRowContext(ctx, key).Scan(&rev)
		if errors.Is(err, stdsql.ErrNoRows) {
			return 0, backend.NotFound(backend.ReadOp, prefix, key)
		}
		if err != nil {
			return 0, s.dbErr(backend.ReadOp, prefix, key, err)
		}
		return rev, nil
	}
	found, err := s.scanRev(s.conn(ctx), sql, []any{key}, &rev)
	if err != nil {
		return 0, s.dbErr(backend.ReadOp, prefix, key, err)
	}
	if !found {
		return 0, backend.NotFound(backend.ReadOp, prefix, key)
	}
	return rev, nil
}

// revStmt is the prepared revision lookup of prefix's table.
func (s *Store) revStmt(ctx context.Context, prefix, query string) (*stdsql.Stmt, error) {
	if st, ok := s.revStmts.Load(prefix); ok {
		return st.(*stdsql.Stmt), nil
	}
	sqlDB, err := s.db.DB()
	if err != nil {
		return nil, err
	}
	if s.pg() {
		query = `SELECT rev FROM ` + tableName(prefix) + ` WHERE "key" = $1`
	}
	st, err := sqlDB.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	if prev, loaded := s.revStmts.LoadOrStore(prefix, st); loaded {
		_ = st.Close()
		return prev.(*stdsql.Stmt), nil
	}
	return st, nil
}

func (s *Store) jsonParam() string {
	if s.pg() {
		return `CAST(? AS jsonb)`
	}
	return `?`
}

// Update replaces an object's JSON. With rev > 0 the write happens only if
// the stored revision still equals rev (ECONFLICT otherwise).
func (s *Store) Update(ctx context.Context, prefix, key string, rev int64, data []byte) (Record, error) {
	if _, err := s.kind(prefix); err != nil {
		return Record{}, err
	}
	if err := checkJSON(backend.ReplaceOp, prefix, key, data); err != nil {
		return Record{}, err
	}
	var newRev int64
	err := s.write(ctx, prefix, key, func(ctx context.Context) error {
		expr, revArgs, err := s.nextRev(ctx)
		if err != nil {
			return s.dbErr(backend.ReplaceOp, prefix, key, err)
		}
		sql := `UPDATE ` + tableName(prefix) + ` SET data = ` + s.jsonParam() + `, rev = ` + expr + ` WHERE "key" = ?`
		args := append(append([]any{string(data)}, revArgs...), key)
		if rev > 0 {
			sql += ` AND rev = ?`
			args = append(args, rev)
		}
		sql += ` RETURNING rev`
		found := false
		err = s.guarded(ctx, func(db *gorm.DB) error {
			var err error
			found, err = s.scanRev(db, sql, args, &newRev)
			return err
		})
		if err != nil {
			return s.dbErr(backend.ReplaceOp, prefix, key, err)
		}
		if found {
			return nil
		}
		if rev > 0 {
			if _, gerr := s.Get(ctx, prefix, key); gerr == nil {
				return backend.OpError(backend.ECONFLICT, backend.ReplaceOp, prefix, key, "object was modified (revision mismatch)")
			}
		}
		return backend.NotFound(backend.ReplaceOp, prefix, key)
	})
	if err != nil {
		return Record{}, err
	}
	s.wrote(ctx, prefix, key)
	return Record{Key: key, Rev: newRev, Data: append([]byte(nil), data...)}, nil
}

// guarded runs a statement that may violate a unique index. Inside a
// PostgreSQL transaction it runs under a savepoint, so that the failure does
// not abort the caller's transaction.
func (s *Store) guarded(ctx context.Context, fn func(db *gorm.DB) error) error {
	st := s.txFrom(ctx)
	if st == nil || !s.pg() {
		return fn(s.conn(ctx))
	}
	db := s.conn(ctx)
	if err := db.SavePoint("store_guard").Error; err != nil {
		return err
	}
	if err := fn(db); err != nil {
		if rerr := db.RollbackTo("store_guard").Error; rerr != nil {
			return rerr
		}
		return err
	}
	return db.Exec(`RELEASE SAVEPOINT store_guard`).Error
}

// Delete removes an object and returns what it held.
func (s *Store) Delete(ctx context.Context, prefix, key string) (Record, error) {
	if _, err := s.kind(prefix); err != nil {
		return Record{}, err
	}
	var rec Record
	inline := s.existInline(ctx, prefix)
	err := s.writeExist(ctx, prefix, key, !inline, func(ctx context.Context) error {
		sql, args := `DELETE FROM `+tableName(prefix)+` WHERE "key" = ? RETURNING "key", rev, data`, []any{key}
		if inline {
			sql, args = existBumped(sql, `"key", rev, data`, args)
		}
		recs, err := s.scanRecords(s.conn(ctx).Raw(sql, args...), prefix)
		if err != nil {
			return err
		}
		if len(recs) == 0 {
			return backend.NotFound(backend.DeleteOp, prefix, key)
		}
		rec = recs[0]
		return nil
	})
	if err == nil {
		s.wrote(ctx, prefix, key)
	}
	return rec, err
}

// GetSetting reads a server setting (system secret, license, preferences).
func (s *Store) GetSetting(ctx context.Context, name string) (string, bool, error) {
	rows, err := s.conn(ctx).Raw(`SELECT value FROM settings WHERE name = ?`, name).Rows()
	if err != nil {
		return "", false, s.dbErr(backend.ReadOp, "settings", name, err)
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return "", false, s.dbErr(backend.ReadOp, "settings", name, err)
		}
		return "", false, nil
	}
	var v string
	if err := rows.Scan(&v); err != nil {
		return "", false, s.dbErr(backend.ReadOp, "settings", name, err)
	}
	return v, true, nil
}

// SetSetting writes a server setting.
func (s *Store) SetSetting(ctx context.Context, name, value string) error {
	return s.InTx(ctx, func(ctx context.Context) error {
		err := s.conn(ctx).Exec(`INSERT INTO settings (name, value) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET value = excluded.value`, name, value).Error
		if err != nil {
			return s.dbErr(backend.ReplaceOp, "settings", name, err)
		}
		return s.bumpRevision(ctx, backend.PrefixSettings, name)
	})
}

// EnsureSetting returns the setting name, first creating it with mk() when
// it is absent or empty: keys made on the first start and then shared by
// every replica. When replicas race to create it, all get the one stored.
func (s *Store) EnsureSetting(ctx context.Context, name string, mk func() string) (string, error) {
	cur, ok, err := s.GetSetting(ctx, name)
	if err != nil || (ok && cur != "") {
		return cur, err
	}
	if ok {
		// Present but empty: replaced.
		v := mk()
		return v, s.SetSetting(ctx, name, v)
	}
	err = s.InTx(ctx, func(ctx context.Context) error {
		err := s.conn(ctx).Exec(`INSERT INTO settings (name, value) VALUES (?, ?) ON CONFLICT (name) DO NOTHING`, name, mk()).Error
		if err != nil {
			return s.dbErr(backend.ReplaceOp, "settings", name, err)
		}
		return s.bumpRevision(ctx, backend.PrefixSettings, name)
	})
	if err != nil {
		return "", err
	}
	cur, _, err = s.GetSetting(ctx, name)
	return cur, err
}

// Revision is a counter bumped by every write to users, roles, tenants and
// settings; replicas compare it to know when their caches are stale.
func (s *Store) Revision(ctx context.Context) (int64, error) {
	v, err := queryValue[int64](s.conn(ctx).Raw(`SELECT value FROM revision WHERE id = 1`))
	if err != nil {
		return 0, s.dbErr(backend.ReadOp, "revision", "", err)
	}
	return v, nil
}

// CreateMany inserts objects of one kind in bulk: a few statements per
// thousands of objects instead of one each, for loading a large fleet
// (provgate-bench's fixtures). It fails, inserting none of them, when a
// key or a unique index exists. The kinds whose writes move the
// authorization revision (users, roles, tenants) are created one by one
// with Create.
func (s *Store) CreateMany(ctx context.Context, prefix string, keys []string, data [][]byte) error {
	if _, err := s.kind(prefix); err != nil {
		return err
	}
	if bumpsRevision(prefix) || len(keys) != len(data) {
		return backend.OpError(backend.EBADREQUEST, backend.CreateOp, prefix, "", "CreateMany takes one document per key, of a kind without revision")
	}
	const batch = 5000
	var pairs bytes.Buffer
	return s.InTx(ctx, func(ctx context.Context) error {
		for lo := 0; lo < len(keys); lo += batch {
			hi := min(lo+batch, len(keys))
			pairs.Reset()
			pairs.WriteByte('[')
			for i := lo; i < hi; i++ {
				if keys[i] == "" {
					return backend.OpError(backend.EBADREQUEST, backend.CreateOp, prefix, "", "Empty key not allowed")
				}
				if err := checkJSON(backend.CreateOp, prefix, keys[i], data[i]); err != nil {
					return err
				}
				k, err := json.Marshal(keys[i])
				if err != nil {
					return err
				}
				if i > lo {
					pairs.WriteByte(',')
				}
				pairs.WriteByte('[')
				pairs.Write(k)
				pairs.WriteByte(',')
				pairs.Write(data[i])
				pairs.WriteByte(']')
			}
			pairs.WriteByte(']')
			var sql string
			args := []any{pairs.String()}
			if s.pg() {
				sql = `INSERT INTO ` + tableName(prefix) + ` ("key", rev, data) SELECT e->>0, nextval('obj_rev_seq'), e->1 FROM jsonb_array_elements(CAST(? AS jsonb)) AS e`
			} else {
				// Revisions first+0...first+n-1, taken from the counter at once.
				var last int64
				if _, err := s.scanRev(s.conn(ctx), `UPDATE obj_rev SET value = value + ? WHERE id = 1 RETURNING value`, []any{hi - lo}, &last); err != nil {
					return s.dbErr(backend.CreateOp, prefix, "", err)
				}
				sql = `INSERT INTO ` + tableName(prefix) + ` ("key", rev, data) SELECT json_extract(value, '$[0]'), ? + CAST("key" AS INTEGER), json_extract(value, '$[1]') FROM json_each(?)`
				args = []any{last - int64(hi-lo) + 1, pairs.String()}
			}
			if err := s.conn(ctx).Exec(sql, args...).Error; err != nil {
				return s.dbErr(backend.CreateOp, prefix, "", err)
			}
			for i := lo; i < hi; i++ {
				s.wrote(ctx, prefix, keys[i])
			}
		}
		if s.pg() && tracksExistence(prefix) {
			s.txFrom(ctx).exist = true
		}
		return nil
	})
}
