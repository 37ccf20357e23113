package store

import (
	"context"
	stdsql "database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v5"
	gosqlite "github.com/glebarez/go-sqlite"
	"github.com/glebarez/sqlite"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

const connectTimeout = 15 * time.Second

func gormConfig(log *slog.Logger) *gorm.Config {
	return &gorm.Config{
		Logger:                 &slogLogger{log: log},
		SkipDefaultTransaction: true,
		DisableAutomaticPing:   true,
	}
}

func openPostgres(ctx context.Context, dsn string, opts Options, log *slog.Logger) (*gorm.DB, error) {
	where, password := describePostgres(dsn)
	fail := func(err error) error {
		msg := err.Error()
		if password != "" {
			msg = strings.ReplaceAll(msg, password, "xxxxx")
		}
		// The cause is flattened into text so that no wrapped driver error
		// can carry the password further.
		return fmt.Errorf("store: cannot connect to PostgreSQL %s: %s", where, msg)
	}
	n := opts.MaxOpenConns
	if n <= 0 {
		n = 20
	}
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fail(err)
	}
	sqlDB := stdsql.OpenDB(&patientConnector{Connector: stdlib.GetConnector(*cfg), wait: connectTimeout, log: log})
	return connect(ctx, postgres.New(postgres.Config{Conn: sqlDB}), log, fail, func(sqlDB *stdsql.DB) {
		sqlDB.SetMaxOpenConns(n)
		sqlDB.SetMaxIdleConns(n / 2)
		sqlDB.SetConnMaxIdleTime(5 * time.Minute)
	})
}

// patientConnector opens PostgreSQL connections for the pool, waiting out
// refusals that end by themselves: a server at max_connections (SQLSTATE
// 53300, also a role's CONNECTION LIMIT) accepts again once other clients
// close theirs, one starting up or shutting down (57P03) once a failover or
// restart is over. It retries with exponential backoff for up to wait or the
// caller's deadline, whichever is first, then fails with the server's own
// words (docs/design.md §14.3). Any other error fails at once.
type patientConnector struct {
	driver.Connector
	wait time.Duration
	log  *slog.Logger
}

func (c *patientConnector) Connect(ctx context.Context) (driver.Conn, error) {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = 20 * time.Millisecond
	b.MaxInterval = time.Second
	start := time.Now()
	for refused := false; ; refused = true {
		conn, err := c.Connector.Connect(ctx)
		if err == nil || !Refused(err) {
			if err == nil && refused {
				c.log.Warn("store: PostgreSQL refused connections for a while; connected", "waited", time.Since(start).Round(time.Millisecond))
			}
			return conn, err
		}
		next := b.NextBackOff()
		if time.Since(start)+next > c.wait {
			return nil, fmt.Errorf("still refused after %s: %w", time.Since(start).Round(time.Millisecond), err)
		}
		t := time.NewTimer(next)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("%w (refused while waiting: %w)", context.Cause(ctx), err)
		}
	}
}

// Refused reports whether err is PostgreSQL refusing a new connection for a
// while: too many connections (53300) or not accepting them now (57P03).
func Refused(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "53300" || pgErr.Code == "57P03")
}

// connect opens d, sets up its connection pool with pool and pings it
// (within connectTimeout unless ctx has a deadline); fail words every error.
func connect(ctx context.Context, d gorm.Dialector, log *slog.Logger, fail func(error) error, pool func(*stdsql.DB)) (*gorm.DB, error) {
	db, err := gorm.Open(d, gormConfig(log))
	if err != nil {
		return nil, fail(err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, fail(err)
	}
	pool(sqlDB)
	pctx, cancel := withDefaultTimeout(ctx)
	defer cancel()
	if err := sqlDB.PingContext(pctx); err != nil {
		_ = sqlDB.Close()
		return nil, fail(err)
	}
	return db, nil
}

// describePostgres names the server and database of a DSN (URL or
// keyword/value) for error messages, and returns its password so that it can
// be scrubbed.
func describePostgres(dsn string) (where, password string) {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return "(unparsable DSN)", ""
	}
	where = net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))) + "/" + cfg.Database
	return where, cfg.Password
}

func withDefaultTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, connectTimeout)
}

// sqliteDSN turns a file path into a DSN with the pragmas the store relies
// on: WAL (readers do not block the writer), a busy timeout for other
// processes touching the file, foreign keys, and IMMEDIATE transactions so
// that a transaction holds the write lock from its first statement.
func sqliteDSN(path string) string {
	path = strings.TrimPrefix(path, "sqlite://")
	path = strings.TrimPrefix(path, "sqlite:")
	params := []string{
		"_pragma=busy_timeout(10000)",
		"_pragma=journal_mode(WAL)",
		"_pragma=foreign_keys(1)",
		"_pragma=synchronous(NORMAL)",
		"_txlock=immediate",
	}
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	return path + sep + strings.Join(params, "&")
}

func openSQLite(ctx context.Context, path string, log *slog.Logger) (*gorm.DB, error) {
	registerSQLiteFuncs()
	name := strings.SplitN(path, "?", 2)[0]
	fail := func(err error) error {
		return fmt.Errorf("store: cannot open SQLite database %q: %w", name, err)
	}
	if strings.TrimSpace(name) == "" {
		return nil, fail(errors.New("empty path"))
	}
	return connect(ctx, sqlite.Open(sqliteDSN(path)), log, fail, func(sqlDB *stdsql.DB) {
		// One connection serializes every transaction: SQLite has no row
		// locks, so this is what keeps ClaimForUpdate and ClaimDeliveries
		// exclusive.
		sqlDB.SetMaxOpenConns(1)
		sqlDB.SetMaxIdleConns(1)
		sqlDB.SetConnMaxLifetime(0)
		sqlDB.SetConnMaxIdleTime(0)
	})
}

var sqliteFuncsOnce sync.Once

// registerSQLiteFuncs adds regexp(pattern, value) to the SQLite driver (the
// function behind SQLite's REGEXP operator, absent by default). It uses Go's
// regexp syntax, the same one list filters are validated with. ipkey and
// timekey give IP and time index values an order-preserving text form
// (ipKey, timeKey), which SQLite lacks natively.
func registerSQLiteFuncs() {
	sqliteFuncsOnce.Do(func() {
		for name, f := range map[string]func(*gosqlite.FunctionContext, []driver.Value) (driver.Value, error){
			"regexp": sqliteRegexp, "ipkey": sqliteKey(ipKey), "timekey": sqliteKey(timeKey),
		} {
			n := 2
			if name != "regexp" {
				n = 1
			}
			err := gosqlite.RegisterDeterministicScalarFunction(name, int32(n), f)
			if err != nil && !strings.Contains(err.Error(), "already registered") {
				panic(err)
			}
		}
	})
}

// sqliteKey wraps a text key function: NULL for NULL or unparseable input.
func sqliteKey(key func(string) (string, bool)) func(*gosqlite.FunctionContext, []driver.Value) (driver.Value, error) {
	return func(_ *gosqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
		var s string
		switch v := args[0].(type) {
		case string:
			s = v
		case []byte:
			s = string(v)
		default:
			return nil, nil
		}
		if k, ok := key(s); ok {
			return k, nil
		}
		return nil, nil
	}
}

func sqliteRegexp(_ *gosqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
	pat, ok := args[0].(string)
	if !ok {
		return nil, errors.New("regexp: pattern must be text")
	}
	var s string
	switch v := args[1].(type) {
	case nil:
		return nil, nil
	case string:
		s = v
	case []byte:
		s = string(v)
	case int64:
		s = strconv.FormatInt(v, 10)
	case float64:
		s = strconv.FormatFloat(v, 'g', -1, 64)
	default:
		s = fmt.Sprint(v)
	}
	re, err := cachedRegexp(pat)
	if err != nil {
		return nil, err
	}
	if re.MatchString(s) {
		return int64(1), nil
	}
	return int64(0), nil
}

var reCache = struct {
	sync.Mutex
	m map[string]*regexp.Regexp
}{m: map[string]*regexp.Regexp{}}

const reCacheMax = 256

func cachedRegexp(pat string) (*regexp.Regexp, error) {
	reCache.Lock()
	re, ok := reCache.m[pat]
	reCache.Unlock()
	if ok {
		return re, nil
	}
	re, err := regexp.Compile(pat)
	if err != nil {
		return nil, err
	}
	reCache.Lock()
	if len(reCache.m) >= reCacheMax {
		// Patterns come from clients; dropping the whole cache keeps it
		// bounded without bookkeeping, and hot patterns come back at once.
		reCache.m = map[string]*regexp.Regexp{}
	}
	reCache.m[pat] = re
	reCache.Unlock()
	return re, nil
}

// slogLogger routes GORM's own messages to slog. Query errors are not logged
// here (they are returned and translated); slow queries are logged at warn
// with their SQL text only, never parameter values.
type slogLogger struct {
	log *slog.Logger
}

const slowQuery = 2 * time.Second

func (l *slogLogger) LogMode(logger.LogLevel) logger.Interface { return l }

func (l *slogLogger) Info(ctx context.Context, msg string, args ...any) {
	l.log.DebugContext(ctx, "gorm: "+fmt.Sprintf(msg, args...))
}

func (l *slogLogger) Warn(ctx context.Context, msg string, args ...any) {
	l.log.WarnContext(ctx, "gorm: "+fmt.Sprintf(msg, args...))
}

func (l *slogLogger) Error(ctx context.Context, msg string, args ...any) {
	l.log.WarnContext(ctx, "gorm: "+fmt.Sprintf(msg, args...))
}

func (l *slogLogger) Trace(ctx context.Context, begin time.Time, fc func() (string, int64), err error) {
	if d := time.Since(begin); d >= slowQuery {
		sqlText, rows := fc()
		l.log.WarnContext(ctx, "store: slow query", "duration", d, "rows", rows, "sql", sqlText)
	}
}

// ParamsFilter drops parameter values before GORM renders SQL for logging.
func (l *slogLogger) ParamsFilter(_ context.Context, sql string, _ ...any) (string, []any) {
	return sql, nil
}
