// Package auth turns an Authorization header into a Principal: Basic
// credentials checked against scrypt hashes, and Bearer tokens (HS256 JWTs)
// whose MAC key is derived from the server base key and the current Secrets
// of everyone the token depends on. It knows nothing of HTTP frameworks or
// storage; the gateway supplies Secrets over its store.
package auth

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/provgate/provgate/backend"
)

// MaxHeaderLen bounds the Authorization header we are willing to look at.
// Our own tokens are well under 2 KiB; anything longer is refused before any
// decoding or lookup.
const MaxHeaderLen = 8 << 10

// Secrets gives the authenticator the current secrets it binds tokens to. The
// gateway implements it over the store.
type Secrets interface {
	// SystemSecret is the system-wide Secret; changing it kills every token.
	SystemSecret(ctx context.Context) (string, error)
	// BaseKey is the server's token key (at least 32 bytes); changing it
	// kills every token.
	BaseKey(ctx context.Context) ([]byte, error)
	// User returns a user, or a backend ENOTFOUND error.
	User(ctx context.Context, name string) (UserRecord, error)
	// MachineSecret returns a machine's Secret, or a backend ENOTFOUND error.
	MachineSecret(ctx context.Context, uuid string) (string, error)
}

// JobStates is an optional capability of Secrets: without it job tokens
// never verify. JobState returns a job's machine and state, or a backend
// ENOTFOUND error.
type JobStates interface {
	JobState(ctx context.Context, uuid string) (machine, state string, err error)
}

// UserRecord is what authentication needs of a user.
type UserRecord struct {
	Name         string
	Secret       string
	PasswordHash []byte
	Roles        []string
}

// Options tune an Authenticator. Zero values take the defaults noted.
type Options struct {
	Logger *slog.Logger
	// DefaultTTL is the user token lifetime when none is asked for (1h, as
	// DRP).
	DefaultTTL time.Duration
	// MaxTTL caps user token lifetimes (365 days, which admits DRP's "1y").
	MaxTTL time.Duration
	// BasicCacheSize bounds the verified-credentials cache (1024 entries);
	// negative disables the cache.
	BasicCacheSize int
	// BasicCacheTTL is how long a verified credential skips scrypt (5m).
	BasicCacheTTL time.Duration
	// ScryptConcurrency bounds concurrent scrypt runs, so password
	// guessing cannot starve request handling of CPU and memory: by
	// default what ScryptMemory holds of default hashes (1), whatever the
	// cores, so that the server's peak memory does not grow with them.
	ScryptConcurrency int
	// ScryptWait is how long a login waits for a scrypt slot before it is
	// refused with 503 (2s).
	ScryptWait time.Duration
	// FailLimitUser and FailLimitIP are failed Basic logins allowed per user
	// name and per client IP within FailWindow (10, 30, 1m); negative
	// disables that limit.
	FailLimitUser int
	FailLimitIP   int
	FailWindow    time.Duration
	// Failures is where failed logins are counted; give every replica the
	// same one (the store) so that the limits hold across them. Nil counts
	// in memory, for this process only.
	Failures FailureLog
	// FailTrackMax bounds how many user names and IPs the in-memory
	// failure log tracks each (10000), since attackers choose both.
	FailTrackMax int
	// Now is the clock (time.Now).
	Now func() time.Time
	// ScryptN is the scrypt cost of the decoy hash checked for unknown
	// users, which should cost what the stored hashes do: 0 is
	// HashPassword's; a server whose passwords are hashed with
	// HashPasswordN(n) (its tests) gives n.
	ScryptN int
	// ClaimContains reports whether claim have contains claim want (docs/design.md
	// §5.2). When set, a restricted grantor may mint a token
	// narrowed further; without it such a token simply keeps the grantor's
	// restriction. Claim algebra lives with the policies, hence a hook.
	ClaimContains func(have, want backend.Claim) bool
}

// Authenticator authenticates requests and mints tokens. It is safe for
// concurrent use.
type Authenticator struct {
	secrets  Secrets
	log      *slog.Logger
	now      func() time.Time
	defTTL   time.Duration
	maxTTL   time.Duration
	parser   *jwt.Parser
	cache    *basicCache // nil when disabled
	cacheKey []byte
	scrypt   chan struct{}
	wait     time.Duration
	fails    *failLimits
	params   scryptParams // for the unknown-user decoy hash
	decoy    decoyHash
	contains func(have, want backend.Claim) bool
	// onScrypt, when set, is called before every scrypt run (tests count
	// runs with it).
	onScrypt func()
}

// New builds an Authenticator.
func New(secrets Secrets, opts Options) *Authenticator {
	a := &Authenticator{
		secrets: secrets,
		log:     opts.Logger,
		now:     opts.Now,
		defTTL:  orDuration(opts.DefaultTTL, time.Hour),
		maxTTL:  orDuration(opts.MaxTTL, 365*24*time.Hour),
		wait:    orDuration(opts.ScryptWait, 2*time.Second),
		params:  paramsN(opts.ScryptN),

		contains: opts.ClaimContains,
	}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	if a.now == nil {
		a.now = time.Now
	}
	a.parser = jwt.NewParser(
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		jwt.WithExpirationRequired(),
		// iat is informational: only our key can mint tokens, so a future
		// iat proves nothing, and checking it would refuse fresh tokens on a
		// replica whose clock lags the issuer's by a second.
		jwt.WithIssuer(tokenIssuer),
		jwt.WithStrictDecoding(),
		jwt.WithTimeFunc(a.now),
	)
	if opts.BasicCacheSize >= 0 {
		a.cache = newBasicCache(orInt(opts.BasicCacheSize, 1024), orDuration(opts.BasicCacheTTL, 5*time.Minute))
	}
	// A fresh cache key per process: cache entries are meaningless to anyone
	// who reads memory dumps of another process, and restarts flush them.
	a.cacheKey = make([]byte, 32)
	_, _ = rand.Read(a.cacheKey) // crypto/rand.Read never fails on supported platforms
	a.scrypt = make(chan struct{}, orInt(opts.ScryptConcurrency, defaultScryptConcurrency()))
	a.fails = &failLimits{
		log:     opts.Failures,
		userMax: max(orInt(opts.FailLimitUser, 10), 0),
		ipMax:   max(orInt(opts.FailLimitIP, 30), 0),
		window:  orDuration(opts.FailWindow, time.Minute),
		logger:  a.log,
	}
	if a.fails.log == nil {
		a.fails.log = NewMemoryFailures(max(a.fails.userMax, a.fails.ipMax), orInt(opts.FailTrackMax, 10000))
	}
	return a
}

func orDuration(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

func orInt(n, def int) int {
	if n == 0 {
		return def
	}
	return n
}

// Errors. Every credential failure of one kind reads the same, so a client
// cannot tell an unknown user from a wrong password, or which Secret
// invalidated a token.
var (
	errTokenInvalid = &backend.Error{Code: backend.EFORBIDDEN, Type: "AUTH", Messages: []string{"token invalid"}}
	errBadLogin     = &backend.Error{Code: backend.EFORBIDDEN, Type: "AUTH", Messages: []string{"invalid credentials"}}
)

// The errors above are shared values; hand out copies so a caller that
// decorates one (Model, Key) does not change it for everyone.
func tokenInvalid() error { e := *errTokenInvalid; return &e }
func badLogin() error     { e := *errBadLogin; return &e }

// Limited is the cause (backend.Error.Err) of ETOOMANY and EUNAVAILABLE
// answers, so the gateway can send Retry-After.
type Limited struct{ RetryAfter time.Duration }

func (l *Limited) Error() string { return "retry after " + l.RetryAfter.String() }

// RetryAfter returns how long the client should wait, when err says.
func RetryAfter(err error) (time.Duration, bool) {
	var l *Limited
	if errors.As(err, &l) {
		return l.RetryAfter, true
	}
	return 0, false
}

func unauthorized(msg string) error {
	return &backend.Error{Code: backend.EUNAUTHORIZED, Type: "AUTH", Messages: []string{msg}}
}

// Authenticate checks an Authorization header. Missing or malformed
// credentials are EUNAUTHORIZED (401; the gateway adds WWW-Authenticate);
// wrong credentials and every unusable token are EFORBIDDEN (403); too many
// failed logins is ETOOMANY (429); no free scrypt slot is EUNAVAILABLE (503).
// clientIP may be empty, which skips the per-IP failure limit.
func (a *Authenticator) Authenticate(ctx context.Context, header, clientIP string) (*Principal, error) {
	if len(header) > MaxHeaderLen {
		return nil, unauthorized("authorization header too long")
	}
	if header == "" {
		return nil, unauthorized("no credentials")
	}
	scheme, cred, _ := strings.Cut(header, " ")
	cred = strings.TrimSpace(cred)
	// Schemes are case-insensitive (RFC 9110 §11.1).
	switch {
	case strings.EqualFold(scheme, "Bearer"):
		if cred == "" {
			return nil, unauthorized("malformed bearer credentials")
		}
		return a.bearer(ctx, cred)
	case strings.EqualFold(scheme, "Basic"):
		raw, err := base64.StdEncoding.DecodeString(cred)
		if err != nil {
			return nil, unauthorized("malformed basic credentials")
		}
		user, pw, ok := strings.Cut(string(raw), ":")
		if !ok || user == "" {
			return nil, unauthorized("malformed basic credentials")
		}
		return a.basic(ctx, user, pw, clientIP)
	}
	return nil, unauthorized("unsupported authorization scheme")
}

type principalKey struct{}

// NewContext returns ctx carrying p.
func NewContext(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// FromContext returns the Principal stored by NewContext.
func FromContext(ctx context.Context) (*Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(*Principal)
	return p, ok && p != nil
}

// internal wraps a failure of the secret store: it is the server's fault, so
// it is 500 rather than a misleading 403, and its cause stays in Err.
func internal(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return &backend.Error{Code: backend.EINTERNAL, Type: "AUTH", Messages: []string{"cannot authenticate"}, Err: err}
}

// ScryptMemory is the memory concurrent scrypt runs may hold by default:
// each default hash allocates 128*N*r bytes (32 MiB), freed only by the next
// garbage collection, and the collector lets the heap grow to about twice
// what it last found live, so each slot adds about twice its hash to the
// server's peak memory. One slot, whatever the cores (docs/design.md §8.2,
// §15.8).
const ScryptMemory = 32 << 20

// defaultScryptConcurrency is what ScryptMemory holds of default hashes, at
// least one slot.
func defaultScryptConcurrency() int {
	perHash := 128 * defaultParams.n * defaultParams.r
	return max(1, ScryptMemory/perHash)
}
