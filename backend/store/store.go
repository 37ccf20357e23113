// Package store keeps provgate's objects with GORM on SQLite (the default,
// pure Go) or PostgreSQL. Every object kind of backend.Kinds has its own
// table holding the object's JSON; list filters run in SQL.
package store

import (
	"context"
	"errors"
	"log/slog"

	"gorm.io/gorm"

	"github.com/provgate/provgate/backend"
)

// Options tune a Store.
type Options struct {
	Logger *slog.Logger
}

// Record is one stored object: its key, its revision (bumped on every write,
// used for ETags and optimistic updates) and its JSON.
type Record struct {
	Key  string
	Rev  int64
	Data []byte
}

// Store is the GORM-backed repository. Transactions travel in the context:
// every method called with a ctx derived from InTx's runs in that transaction.
type Store struct {
	db      *gorm.DB
	dialect string
	log     *slog.Logger
}

var errTODO = errors.New("store: not implemented")

// Open connects to dsn ("postgres://..." for PostgreSQL; anything else is a
// SQLite file path) and migrates the schema.
func Open(ctx context.Context, dsn string, opts Options) (*Store, error) { return nil, errTODO }

// Close releases the connection pool.
func (s *Store) Close() error { return errTODO }

// Dialect is "sqlite" or "postgres".
func (s *Store) Dialect() string { return s.dialect }

// Get reads one object by native key. ENOTFOUND when absent.
func (s *Store) Get(ctx context.Context, prefix, key string) (Record, error) {
	return Record{}, errTODO
}

// GetBy reads one object by a unique index value (the "Name:m1" key form).
func (s *Store) GetBy(ctx context.Context, prefix, index, value string) (Record, error) {
	return Record{}, errTODO
}

// Create inserts an object. ECONFLICT when the key or a unique index exists.
func (s *Store) Create(ctx context.Context, prefix, key string, data []byte) (Record, error) {
	return Record{}, errTODO
}

// Update replaces an object's JSON. With rev > 0 the write happens only if
// the stored revision still equals rev (ECONFLICT otherwise).
func (s *Store) Update(ctx context.Context, prefix, key string, rev int64, data []byte) (Record, error) {
	return Record{}, errTODO
}

// Delete removes an object and returns what it held.
func (s *Store) Delete(ctx context.Context, prefix, key string) (Record, error) {
	return Record{}, errTODO
}

// List returns the page of objects matching q, the total number of objects
// of the kind and the number matching q's filters (before offset and limit).
func (s *Store) List(ctx context.Context, prefix string, q backend.Query) (recs []Record, total, matched int, err error) {
	return nil, 0, 0, errTODO
}

// InTx runs fn in one transaction carried by fn's ctx; store calls made with
// that ctx join it. A nested InTx joins the outer transaction. fn's error
// rolls everything back.
func (s *Store) InTx(ctx context.Context, fn func(ctx context.Context) error) error { return errTODO }

// ClaimForUpdate, inside InTx, selects and locks up to n objects matching q
// that no other transaction holds (FOR UPDATE SKIP LOCKED on PostgreSQL),
// in a random order so that callers spread over the candidates.
func (s *Store) ClaimForUpdate(ctx context.Context, prefix string, q backend.Query, n int) ([]Record, error) {
	return nil, errTODO
}

// GetSetting reads a server setting (system secret, license, preferences).
func (s *Store) GetSetting(ctx context.Context, name string) (string, bool, error) {
	return "", false, errTODO
}

// SetSetting writes a server setting.
func (s *Store) SetSetting(ctx context.Context, name, value string) error { return errTODO }

// Revision is a counter bumped by every write to users, roles, tenants and
// settings; replicas compare it to know when their caches are stale.
func (s *Store) Revision(ctx context.Context) (int64, error) { return 0, errTODO }
