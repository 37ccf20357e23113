package store

import (
	"errors"
	"net/url"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// Dialects a DSN can select.
const (
	DialectSQLite   = dialectSQLite
	DialectPostgres = dialectPostgres
)

// keywordValue matches the start of a libpq keyword/value DSN
// ("host=db user=pg ..."): a keyword, optional blanks, then "=".
var keywordValue = regexp.MustCompile(`^\s*[A-Za-z_]+\s*=`)

// ParseDSN tells which database a configured DSN selects, and what Open
// should be given for it (docs/design.md §15.1). PostgreSQL is selected by a
// postgres:// or postgresql:// URL or a libpq keyword/value string
// ("host=db dbname=x ..."); SQLite only by an explicit "sqlite:PATH". An
// empty value is refused here: the caller supplies its default path.
// Anything else is refused rather than guessed, since a PostgreSQL DSN taken
// for a file name would start the server on an empty SQLite file. Errors
// never repeat the DSN, which may hold a password.
func ParseDSN(dsn string) (dialect, target string, err error) {
	switch {
	case strings.TrimSpace(dsn) == "":
		return "", "", errors.New("empty database DSN")
	case isPostgresURL(dsn):
		if _, err := url.Parse(dsn); err != nil {
			return "", "", errors.New("malformed postgres:// URL")
		}
		return DialectPostgres, dsn, nil
	case keywordValue.MatchString(dsn):
		if _, err := pgconn.ParseConfig(dsn); err != nil {
			return "", "", errors.New("malformed PostgreSQL keyword=value DSN")
		}
		return DialectPostgres, dsn, nil
	case strings.HasPrefix(dsn, "sqlite:"):
		path := strings.TrimPrefix(strings.TrimPrefix(dsn, "sqlite:"), "//")
		if strings.TrimSpace(path) == "" {
			return "", "", errors.New("sqlite: needs a file path, e.g. sqlite:/var/lib/provgate/provgate.db")
		}
		return DialectSQLite, path, nil
	}
	if scheme, _, ok := strings.Cut(dsn, "://"); ok && !strings.ContainsAny(scheme, " /=") {
		return "", "", errors.New("unsupported scheme \"" + scheme + "\" (want postgres://…, postgresql://…, libpq key=value pairs, or sqlite:PATH)")
	}
	return "", "", errors.New("not a database DSN (want postgres://…, postgresql://…, libpq key=value pairs such as host=db dbname=provgate, or sqlite:PATH)")
}

func isPostgresURL(dsn string) bool {
	l := strings.ToLower(dsn)
	return strings.HasPrefix(l, "postgres://") || strings.HasPrefix(l, "postgresql://")
}

// isPostgresDSN reports whether Open connects to PostgreSQL for dsn: a URL or
// a keyword/value string. Everything else is a SQLite file path.
func isPostgresDSN(dsn string) bool {
	return isPostgresURL(dsn) || keywordValue.MatchString(dsn)
}

// passwordKV matches the password setting of a keyword/value DSN, quoted
// or not, with libpq's backslash escapes.
var passwordKV = regexp.MustCompile(`(?i)(^|\s)password\s*=\s*('(?:[^'\\]|\\.)*'?|(?:[^\s\\]|\\.)*)`)

// RedactDSN is dsn with any password replaced by "xxxxx", for logs and
// messages: the user info of a URL, a password query parameter, or the
// password setting of a keyword/value string. A DSN that cannot be read
// is replaced whole.
func RedactDSN(dsn string) string {
	if dsn == "" {
		return ""
	}
	out := dsn
	switch {
	case isPostgresURL(dsn):
		u, err := url.Parse(dsn)
		if err != nil {
			return "<unparsable DSN>"
		}
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		}
		if q := u.Query(); q.Has("password") {
			q.Set("password", "xxxxx")
			u.RawQuery = q.Encode()
		}
		out = u.String()
	case keywordValue.MatchString(dsn):
		out = passwordKV.ReplaceAllString(dsn, "${1}password=xxxxx")
	default:
		return dsn
	}
	// Whatever spelling the password had, its decoded value must not
	// remain either.
	return scrub(errors.New(out), dsnPassword(dsn))
}

// dsnPassword is the password a PostgreSQL DSN holds, decoded; "" when it
// holds none or cannot be read.
func dsnPassword(dsn string) string {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return ""
	}
	return cfg.Password
}
