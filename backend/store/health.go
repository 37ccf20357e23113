package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/logger"
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

// QueryBuckets are the upper bounds, in seconds, of the store latency
// histogram (QueryStats).
var QueryBuckets = [...]float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}

// queryStats is a latency histogram of the statements run through GORM,
// kept with atomics so that it costs no lock per statement.
type queryStats struct {
	counts [len(QueryBuckets) + 1]atomic.Uint64 // per QueryBuckets entry, then +Inf
	sumNs  atomic.Int64
	errors atomic.Uint64
}

func (q *queryStats) observe(d time.Duration, failed bool) {
	sec := d.Seconds()
	i := 0
	for i < len(QueryBuckets) && sec > QueryBuckets[i] {
		i++
	}
	q.counts[i].Add(1)
	q.sumNs.Add(int64(d))
	if failed {
		q.errors.Add(1)
	}
}

// QueryStats is the latency histogram of the store's statements since the
// start: the bucket bounds in seconds (QueryBuckets), how many took at most
// each bound (cumulative, as Prometheus counts them), their count, their
// total seconds, and how many failed (not found excluded) (docs/design.md
// §15.4).
func (s *Store) QueryStats() (bounds []float64, cumulative []uint64, count uint64, sum float64, failed uint64) {
	q := &s.stats
	cumulative = make([]uint64, len(QueryBuckets))
	var n uint64
	for i := range QueryBuckets {
		n += q.counts[i].Load()
		cumulative[i] = n
	}
	n += q.counts[len(QueryBuckets)].Load()
	return QueryBuckets[:], cumulative, n, time.Duration(q.sumNs.Load()).Seconds(), q.errors.Load()
}

// SQLDB is the connection pool, whose sql.DBStats the metrics export.
func (s *Store) SQLDB() *sql.DB {
	d, _ := s.db.DB()
	return d
}

// timedLogger is the store's GORM logger with every statement timed into
// stats.
type timedLogger struct {
	logger.Interface
	stats *queryStats
}

func (l timedLogger) LogMode(level logger.LogLevel) logger.Interface {
	return timedLogger{Interface: l.Interface.LogMode(level), stats: l.stats}
}

func (l timedLogger) Trace(ctx context.Context, begin time.Time, fc func() (string, int64), err error) {
	l.stats.observe(time.Since(begin), err != nil && !errors.Is(err, gorm.ErrRecordNotFound))
	l.Interface.Trace(ctx, begin, fc, err)
}
