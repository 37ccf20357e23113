package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/provgate/provgate/backend/callback"
	"github.com/provgate/provgate/backend/objects"
	"github.com/provgate/provgate/backend/store"
	"github.com/provgate/provgate/gateway/stream"
)

// envPrefix is prepended to a flag's upper-cased name (dashes become
// underscores) to form its environment variable: --data-dir is
// PROVGATE_DATA_DIR.
const envPrefix = "PROVGATE_"

// Config is everything the serve command needs. It is filled from defaults,
// then the --config file, then the environment, then flags, so the most
// explicit source wins.
type Config struct {
	ConfigFile       string // YAML file of flag values (--config), applied before the environment
	DataDir          string // state directory: SQLite file, TLS files, initial admin password
	Database         string // DSN; empty selects the SQLite file <DataDir>/provgate.db
	DatabaseConns    int    // PostgreSQL connections of this replica's pool (SQLite always uses one)
	Listen           string // host:port of the API listener
	TLSCert          string // PEM certificate file; with TLSKey replaces the generated one
	TLSKey           string // PEM private key file
	NoTLS            bool   // serve plain HTTP (behind a TLS-terminating proxy)
	AdminPassword    string // first-start password of rocketskates; never printed
	LicensePublicKey string // ed25519 PEM public key that verifies License
	License          string // license document file
	PolicyDir        string // Rego directory: extensions, or a policy replacing the embedded one
	PolicyBundle     string // OPA bundle (directory, .tar.gz or URL) replacing the embedded policy
	// PolicyBundlePublicKey is the PEM public key the bundle must be signed with.
	PolicyBundlePublicKey string
	DecisionLog           string        // file receiving JSON-lines decision logs
	CallbackExecDir       string        // only executables under it may run as callback exec auth
	LogLevel              string        // debug, info, warn or error
	BodyLimit             int64         // largest request body in bytes
	MaxTokenTTL           time.Duration // upper bound for a requested token ttl
	ShutdownTimeout       time.Duration // how long in-flight requests get after a stop signal
	BenchRoutes           bool          // enables the unauthenticated benchmark route
	// DecisionLogURL receives decisions batched and gzipped in OPA's
	// decision-log upload format.
	DecisionLogURL string
	// DecisionLogURLBuffer bounds the decisions waiting for upload.
	DecisionLogURLBuffer int
	// ShutdownDelay is how long a stopping server keeps serving while
	// /readyz answers 503, so that load balancers stop sending first.
	ShutdownDelay time.Duration
	// PolicyWatchInterval is how often the policy dir is polled for changed
	// files; tests shorten it so that a reload is seen quickly.
	PolicyWatchInterval time.Duration
	// CallbackDeliveryLease is how long a replica owns a jobfail delivery it
	// claimed; a replica that dies holding one delays that delivery by up
	// to this long. Tests shorten it to watch a takeover.
	CallbackDeliveryLease time.Duration
	// CallbackPollInterval is how often the jobfail worker looks for due
	// deliveries.
	CallbackPollInterval time.Duration
	// EventBuffer bounds the events waiting for one event stream; a client
	// reading slower is disconnected.
	EventBuffer int
	// EventStreams bounds the open event streams of one principal.
	EventStreams int
	// EventFlush is the least time between two writes of events to one
	// event stream (0: none).
	EventFlush time.Duration
	// ObjectCacheSize bounds the read cache of encoded objects (objects
	// held); 0 turns it off.
	ObjectCacheSize int
	// ScryptConcurrency bounds the scrypt runs of Basic logins at once;
	// each holds 32 MiB until the next collection (auth.ScryptMemory).
	ScryptConcurrency int
	// MemoryLimit is the Go runtime's soft memory limit in bytes
	// (debug.SetMemoryLimit); 0 leaves the runtime's own (GOMEMLIMIT, or
	// none).
	MemoryLimit int64

	// CallbackAllow and CallbackDeny are comma-separated CIDR prefixes or
	// addresses: destinations callbacks may reach although refused by
	// default (loopback, link-local, ...), and more to refuse.
	CallbackAllow string
	CallbackDeny  string
	// PolicyBundleAllowHTTP lets --policy-bundle be a plain http:// URL.
	PolicyBundleAllowHTTP bool
}

func defaultConfig() Config {
	return Config{
		DataDir:         "./provgate-data",
		Listen:          ":8092",
		LogLevel:        "info",
		BodyLimit:       4 << 20,
		MaxTokenTTL:     720 * time.Hour,
		ShutdownTimeout: 30 * time.Second,

		PolicyWatchInterval:   2 * time.Second,
		CallbackDeliveryLease: 10 * time.Minute,
		CallbackPollInterval:  time.Second,
		EventBuffer:           256,
		EventFlush:            stream.DefaultFlushInterval,
		EventStreams:          16,
		ObjectCacheSize:       objects.DefaultViewCacheSize,
		ScryptConcurrency:     1,
		DatabaseConns:         20,
		DecisionLogURLBuffer:  10000,
	}
}

// flagSet binds every Config field to a flag whose default is the field's
// current value. Parse errors are returned, not printed: the caller reports
// them in one line.
func (c *Config) flagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&c.ConfigFile, configFlag, c.ConfigFile, "YAML `file` setting any of these flags by name (data-dir: /var/lib/provgate); the environment and flags win over it")
	fs.StringVar(&c.DataDir, "data-dir", c.DataDir, "directory for the SQLite database, generated TLS files and the initial admin password")
	fs.StringVar(&c.Database, "database", c.Database, "database: postgres://..., postgresql://... or libpq key=value pairs for PostgreSQL, sqlite:PATH for a SQLite file; empty selects the SQLite file <data-dir>/provgate.db")
	fs.IntVar(&c.DatabaseConns, "database-conns", c.DatabaseConns, "PostgreSQL connections this server's pool may open (one more listens for other replicas' changes); replicas together must stay under the database's max_connections")
	fs.StringVar(&c.Listen, "listen", c.Listen, "address of the API listener, host:port")
	fs.StringVar(&c.TLSCert, "tls-cert", c.TLSCert, "PEM certificate file (with --tls-key); default: a self-signed certificate generated in the data dir")
	fs.StringVar(&c.TLSKey, "tls-key", c.TLSKey, "PEM private key file (with --tls-cert)")
	fs.BoolVar(&c.NoTLS, "no-tls", c.NoTLS, "serve plain HTTP, e.g. behind a TLS-terminating proxy")
	fs.Var((*secret)(&c.AdminPassword), "admin-password", "`password` of user rocketskates, used only on first start; default: random, printed once")
	fs.StringVar(&c.LicensePublicKey, "license-public-key", c.LicensePublicKey, "ed25519 PEM public key that verifies --license")
	fs.StringVar(&c.License, "license", c.License, "license document file")
	fs.StringVar(&c.PolicyDir, "policy-dir", c.PolicyDir, "directory of Rego policies: provgate.ext extensions of the embedded policy, or a policy replacing it")
	fs.StringVar(&c.PolicyBundle, "policy-bundle", c.PolicyBundle, "OPA bundle (directory, .tar.gz from opa build, or http(s) URL) serving the policy")
	fs.StringVar(&c.PolicyBundlePublicKey, "policy-bundle-public-key", c.PolicyBundlePublicKey, "PEM public key (RS256, opa sign) the --policy-bundle must be signed with")
	fs.BoolVar(&c.PolicyBundleAllowHTTP, "policy-bundle-allow-http", c.PolicyBundleAllowHTTP, "let --policy-bundle be a plain http:// URL, which anyone on the way can read or replace (prefer https)")
	fs.DurationVar(&c.PolicyWatchInterval, "policy-watch-interval", c.PolicyWatchInterval, "how often --policy-dir or --policy-bundle is checked for changes (SIGHUP reloads at once)")
	fs.StringVar(&c.DecisionLog, "decision-log", c.DecisionLog, "file that receives policy decisions as JSON lines")
	fs.StringVar(&c.DecisionLogURL, "decision-log-url", c.DecisionLogURL, "http(s) endpoint that receives policy decisions batched and gzipped as OPA's decision-log service API does (POST of a JSON array)")
	fs.IntVar(&c.DecisionLogURLBuffer, "decision-log-url-buffer", c.DecisionLogURLBuffer, "decisions that may wait for upload to --decision-log-url; more are dropped (and counted) while the receiver is down or slow")
	fs.StringVar(&c.CallbackExecDir, "callback-exec-dir", c.CallbackExecDir, "directory whose executables callback exec auth may run; empty disables exec auth")
	fs.StringVar(&c.CallbackAllow, "callback-allow", c.CallbackAllow, "comma-separated CIDR prefixes or addresses callbacks may reach although refused by default (loopback, link-local, unspecified, multicast)")
	fs.StringVar(&c.CallbackDeny, "callback-deny", c.CallbackDeny, "comma-separated CIDR prefixes or addresses callbacks may never reach (wins over --callback-allow)")
	fs.StringVar(&c.LogLevel, "log-level", c.LogLevel, "log level: debug, info, warn or error")
	fs.Var((*byteSize)(&c.BodyLimit), "body-limit", "largest request body in `bytes` (suffixes KiB, MiB, GiB accepted)")
	fs.DurationVar(&c.MaxTokenTTL, "max-token-ttl", c.MaxTokenTTL, "longest token lifetime a client may request")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", c.ShutdownTimeout, "time in-flight requests get to finish after SIGINT/SIGTERM")
	fs.DurationVar(&c.ShutdownDelay, "shutdown-delay", c.ShutdownDelay, "after SIGINT/SIGTERM, how long to go on serving with /readyz answering 503 before the listener closes (e.g. 5s behind a load balancer)")
	fs.BoolVar(&c.BenchRoutes, "bench-routes", c.BenchRoutes, "enable the unauthenticated route used only by benchmarks")
	fs.DurationVar(&c.CallbackDeliveryLease, "callback-delivery-lease", c.CallbackDeliveryLease, "how long a server owns a claimed jobfail delivery before another may retry it (lower only for tests)")
	fs.DurationVar(&c.CallbackPollInterval, "callback-poll-interval", c.CallbackPollInterval, "how often the jobfail worker looks for due deliveries")
	fs.IntVar(&c.EventBuffer, "event-buffer", c.EventBuffer, "events that may wait for one event stream (GET /api/v3/ws) before it is closed as too slow")
	fs.IntVar(&c.EventStreams, "event-streams", c.EventStreams, "event streams one user or machine may have open at once")
	fs.DurationVar(&c.EventFlush, "event-flush", c.EventFlush, "least time between two writes of events to one event stream: events published meanwhile go out together in the next write (0: every event at once)")
	fs.IntVar(&c.ObjectCacheSize, "object-cache-size", c.ObjectCacheSize, "objects whose encoded form the read cache keeps (least recently used go first; 0 turns it off)")
	fs.IntVar(&c.ScryptConcurrency, "scrypt-concurrency", c.ScryptConcurrency, "Basic logins whose password check (scrypt, 32 MiB each) may run at once, whatever the cores; each more slot adds about 64 MiB to the peak memory")
	fs.Var((*byteSize)(&c.MemoryLimit), "memory-limit", "soft memory limit of the Go runtime in `bytes` (suffixes KiB, MiB, GiB accepted): the collector works harder as the process nears it; 0 leaves the runtime's own (GOMEMLIMIT, or none)")
	fs.VisitAll(func(f *flag.Flag) { f.Usage += " [$" + envName(f.Name) + "]" })
	return fs
}

// envName is the environment variable that sets the flag called name.
func envName(name string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// applyEnv sets every flag of fs whose environment variable is non-empty,
// through the flag's own parser so that both sources accept the same values.
func applyEnv(fs *flag.FlagSet, getenv func(string) string) error {
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		key := envName(f.Name)
		v := getenv(key)
		if v == "" {
			return
		}
		if err := f.Value.Set(v); err != nil {
			if _, ok := f.Value.(*secret); ok {
				err = errors.New("invalid value")
			}
			errs = append(errs, fmt.Errorf("environment %s: %w", key, err))
		}
	})
	return errors.Join(errs...)
}

// Validate reports the first configuration problem in a sentence that names
// the flag to fix.
func (c Config) Validate() error {
	if strings.TrimSpace(c.DataDir) == "" {
		return errors.New("--data-dir must not be empty")
	}
	if err := validateListen(c.Listen); err != nil {
		return err
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return errors.New("--tls-cert and --tls-key must be given together")
	}
	if c.NoTLS && c.TLSCert != "" {
		return errors.New("--no-tls cannot be combined with --tls-cert/--tls-key")
	}
	if c.Database != "" {
		if err := validateDSN(c.Database); err != nil {
			return err
		}
	}
	if c.License != "" && c.LicensePublicKey == "" {
		return errors.New("--license needs --license-public-key to verify it")
	}
	if c.DecisionLogURL != "" {
		u, err := url.Parse(c.DecisionLogURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return errors.New("--decision-log-url: want an http:// or https:// URL, e.g. https://collector.example/logs")
		}
	}
	if c.DecisionLogURLBuffer < 1 || c.DecisionLogURLBuffer > 1<<20 {
		return fmt.Errorf("--decision-log-url-buffer %d: must be between 1 and 1048576", c.DecisionLogURLBuffer)
	}
	if c.PolicyBundle != "" && c.PolicyDir != "" {
		return errors.New("--policy-bundle and --policy-dir exclude each other")
	}
	if c.PolicyBundlePublicKey != "" && c.PolicyBundle == "" {
		return errors.New("--policy-bundle-public-key needs --policy-bundle")
	}
	if strings.HasPrefix(c.PolicyBundle, "http://") && !c.PolicyBundleAllowHTTP {
		return errors.New("--policy-bundle: a plain http:// URL can be read and replaced by anyone on the way; use https, or allow it with --policy-bundle-allow-http")
	}
	if b := c.PolicyBundle; b != "" && !strings.HasPrefix(b, "http://") && !strings.HasPrefix(b, "https://") {
		if _, err := os.Stat(b); err != nil {
			return fmt.Errorf("--policy-bundle %s: %w", b, pathErr(err))
		}
	}
	for _, f := range []struct{ flag, path string }{
		{"--license-public-key", c.LicensePublicKey},
		{"--license", c.License},
		{"--policy-bundle-public-key", c.PolicyBundlePublicKey},
		{"--tls-cert", c.TLSCert},
		{"--tls-key", c.TLSKey},
	} {
		if err := checkPath(f.flag, f.path, false); err != nil {
			return err
		}
	}
	for _, f := range []struct{ flag, path string }{
		{"--policy-dir", c.PolicyDir},
		{"--callback-exec-dir", c.CallbackExecDir},
	} {
		if err := checkPath(f.flag, f.path, true); err != nil {
			return err
		}
	}
	for _, f := range []struct{ flag, list string }{
		{"--callback-allow", c.CallbackAllow},
		{"--callback-deny", c.CallbackDeny},
	} {
		if _, err := callback.ParsePrefixes(f.list); err != nil {
			return fmt.Errorf("%s: %w", f.flag, err)
		}
	}
	if _, err := parseLevel(c.LogLevel); err != nil {
		return err
	}
	if c.BodyLimit <= 0 || c.BodyLimit > math.MaxInt32 {
		return fmt.Errorf("--body-limit %d: must be between 1 byte and 2 GiB", c.BodyLimit)
	}
	if c.MaxTokenTTL <= 0 {
		return fmt.Errorf("--max-token-ttl %s: must be positive", c.MaxTokenTTL)
	}
	if c.PolicyWatchInterval <= 0 {
		return fmt.Errorf("--policy-watch-interval %s: must be positive", c.PolicyWatchInterval)
	}
	if c.ShutdownTimeout <= 0 {
		return fmt.Errorf("--shutdown-timeout %s: must be positive", c.ShutdownTimeout)
	}
	if c.ShutdownDelay < 0 || c.ShutdownDelay > 10*time.Minute {
		return fmt.Errorf("--shutdown-delay %s: must be between 0s and 10m", c.ShutdownDelay)
	}
	// A send may use nine tenths of the lease; below a second that leaves
	// no time for a request.
	if c.CallbackDeliveryLease < time.Second {
		return fmt.Errorf("--callback-delivery-lease %s: must be at least 1s", c.CallbackDeliveryLease)
	}
	if c.CallbackPollInterval <= 0 {
		return fmt.Errorf("--callback-poll-interval %s: must be positive", c.CallbackPollInterval)
	}
	if c.EventBuffer < 1 || c.EventBuffer > 1<<20 {
		return fmt.Errorf("--event-buffer %d: must be between 1 and 1048576", c.EventBuffer)
	}
	if c.EventStreams < 1 || c.EventStreams > 1<<16 {
		return fmt.Errorf("--event-streams %d: must be between 1 and 65536", c.EventStreams)
	}
	if c.DatabaseConns < 2 || c.DatabaseConns > 1000 {
		return fmt.Errorf("--database-conns %d: must be between 2 and 1000", c.DatabaseConns)
	}
	if c.ScryptConcurrency < 1 || c.ScryptConcurrency > 64 {
		return fmt.Errorf("--scrypt-concurrency %d: must be between 1 and 64", c.ScryptConcurrency)
	}
	if c.MemoryLimit != 0 && c.MemoryLimit < minMemoryLimit {
		return fmt.Errorf("--memory-limit %d: must be 0 (the runtime's own) or at least 64MiB", c.MemoryLimit)
	}
	if c.EventFlush < 0 || c.EventFlush > time.Second {
		return fmt.Errorf("--event-flush %s: must be between 0 and 1s", c.EventFlush)
	}
	if c.ObjectCacheSize < 0 || c.ObjectCacheSize > 1<<22 {
		return fmt.Errorf("--object-cache-size %d: must be between 0 and 4194304", c.ObjectCacheSize)
	}
	return nil
}

// DatabaseDSN is what store.Open is given: the PostgreSQL DSN or SQLite path
// of --database, or the SQLite file in the data dir. Call it on a validated
// Config.
func (c Config) DatabaseDSN() string {
	if c.Database == "" {
		return filepath.Join(c.DataDir, "provgate.db")
	}
	_, target, _ := store.ParseDSN(c.Database)
	return target
}

// IsPostgres reports whether the DSN selects PostgreSQL rather than SQLite.
func (c Config) IsPostgres() bool {
	dialect, _, err := store.ParseDSN(c.Database)
	return err == nil && dialect == store.DialectPostgres
}

// SlogLevel is LogLevel as a slog level; call it on a validated Config.
func (c Config) SlogLevel() slog.Level {
	l, _ := parseLevel(c.LogLevel)
	return l
}

// String lists the configuration with the admin password and any database
// password masked, so that a Config can be logged or printed safely.
func (c Config) String() string {
	var b strings.Builder
	b.WriteString("{")
	for i, a := range c.attrs() {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%s=%v", a.Key, a.Value)
	}
	b.WriteString("}")
	return b.String()
}

// GoString keeps %#v from printing the raw struct, password included.
func (c Config) GoString() string { return "main.Config" + c.String() }

// LogValue makes slog print the masked form.
func (c Config) LogValue() slog.Value { return slog.GroupValue(c.attrs()...) }

func (c Config) attrs() []slog.Attr {
	return []slog.Attr{
		slog.String("config", c.ConfigFile),
		slog.String("data_dir", c.DataDir),
		slog.String("database", store.RedactDSN(c.Database)),
		slog.Int("database_conns", c.DatabaseConns),
		slog.String("listen", c.Listen),
		slog.String("tls_cert", c.TLSCert),
		slog.String("tls_key", c.TLSKey),
		slog.Bool("no_tls", c.NoTLS),
		slog.String("admin_password", secret(c.AdminPassword).String()),
		slog.String("license_public_key", c.LicensePublicKey),
		slog.String("license", c.License),
		slog.String("policy_dir", c.PolicyDir),
		slog.String("policy_bundle", redactURL(c.PolicyBundle)),
		slog.String("policy_watch_interval", c.PolicyWatchInterval.String()),
		slog.Bool("policy_bundle_allow_http", c.PolicyBundleAllowHTTP),
		slog.String("decision_log", c.DecisionLog),
		slog.String("decision_log_url", redactURL(c.DecisionLogURL)),
		slog.Int("decision_log_url_buffer", c.DecisionLogURLBuffer),
		slog.String("callback_exec_dir", c.CallbackExecDir),
		slog.String("callback_allow", c.CallbackAllow),
		slog.String("callback_deny", c.CallbackDeny),
		slog.String("log_level", c.LogLevel),
		slog.Int64("body_limit", c.BodyLimit),
		slog.String("max_token_ttl", c.MaxTokenTTL.String()),
		slog.String("shutdown_timeout", c.ShutdownTimeout.String()),
		slog.String("shutdown_delay", c.ShutdownDelay.String()),
		slog.Bool("bench_routes", c.BenchRoutes),
		slog.String("callback_delivery_lease", c.CallbackDeliveryLease.String()),
		slog.String("callback_poll_interval", c.CallbackPollInterval.String()),
		slog.Int("event_buffer", c.EventBuffer),
		slog.Int("event_streams", c.EventStreams),
		slog.String("event_flush", c.EventFlush.String()),
		slog.Int("object_cache_size", c.ObjectCacheSize),
		slog.Int("scrypt_concurrency", c.ScryptConcurrency),
		slog.Int64("memory_limit", c.MemoryLimit),
	}
}

func validateListen(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--listen %q: want host:port, e.g. :8092 or 127.0.0.1:8092", addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("--listen %q: port must be a number from 0 to 65535", addr)
	}
	if strings.ContainsAny(host, " /") {
		return fmt.Errorf("--listen %q: invalid host", addr)
	}
	return nil
}

// validateDSN accepts what store.ParseDSN accepts. Errors never echo the
// DSN, which may hold a password.
func validateDSN(dsn string) error {
	if _, _, err := store.ParseDSN(dsn); err != nil {
		return fmt.Errorf("--database: %w", err)
	}
	return nil
}

// redactURL hides the password of a URL's user info.
func redactURL(s string) string {
	if !strings.Contains(s, "://") {
		return s
	}
	u, err := url.Parse(s)
	if err != nil {
		return "<unparsable URL>"
	}
	return u.Redacted()
}

func checkPath(flagName, path string, wantDir bool) error {
	if path == "" {
		return nil
	}
	fi, err := os.Stat(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return fmt.Errorf("%s %s: %w", flagName, path, err)
	}
	if wantDir && !fi.IsDir() {
		return fmt.Errorf("%s %s: not a directory", flagName, path)
	}
	if !wantDir && fi.IsDir() {
		return fmt.Errorf("%s %s: is a directory, want a file", flagName, path)
	}
	return nil
}

func parseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("--log-level %q: want debug, info, warn or error", s)
}

// secret is a string flag whose value never appears in help output, errors
// or logs.
type secret string

func (s *secret) Set(v string) error { *s = secret(v); return nil }

func (s secret) String() string {
	if s == "" {
		return ""
	}
	return "********"
}

// byteSize is a byte count flag accepting plain numbers or binary suffixes.
type byteSize int64

// minMemoryLimit is the smallest --memory-limit: below it the collector
// would run without pause on an empty server.
const minMemoryLimit = 64 << 20

var sizeSuffixes = []struct {
	suffix string
	mult   int64
}{
	{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10},
	{"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}, {"B", 1},
}

func (b *byteSize) Set(v string) error {
	s := strings.TrimSpace(v)
	mult := int64(1)
	for _, x := range sizeSuffixes {
		if strings.HasSuffix(s, x.suffix) {
			s, mult = strings.TrimSpace(strings.TrimSuffix(s, x.suffix)), x.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > math.MaxInt64/mult {
		return fmt.Errorf("%q is not a byte count (e.g. 4194304 or 4MiB)", v)
	}
	*b = byteSize(n * mult)
	return nil
}

func (b *byteSize) String() string {
	if b == nil {
		return "0"
	}
	return strconv.FormatInt(int64(*b), 10)
}

// callbackDestinations are --callback-allow and --callback-deny parsed;
// call it on a validated Config.
func (c Config) callbackDestinations() callback.Destinations {
	allow, _ := callback.ParsePrefixes(c.CallbackAllow)
	deny, _ := callback.ParsePrefixes(c.CallbackDeny)
	return callback.Destinations{Allow: allow, Deny: deny}
}
