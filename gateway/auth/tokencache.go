package auth

import (
	"context"
	"crypto/sha256"
	"strings"
	"sync"
	"time"
)

// TokenCache is an Authenticator with a cache of verified user tokens:
// verifying a token derives its key from three Secrets and checks the
// signature, which is most of a Bearer request's cost. Entries are keyed by
// a hash of the header, live at most ttl (never past the token's expiry)
// and are all dropped by Reset, which the server calls whenever users,
// roles, tenants or Secrets change, so a rotation still kills a token on
// the next request. Machine tokens are not cached: a machine's Secret can
// change without that signal.
type TokenCache struct {
	a       *Authenticator
	mu      sync.Mutex
	entries map[[sha256.Size]byte]tokenEntry
	max     int
	ttl     time.Duration
	now     func() time.Time
	// gen counts Resets: a token verified against Secrets read before a
	// Reset is not cached after it (see SecretCache.gen).
	gen uint64
}

type tokenEntry struct {
	p       *Principal
	expires time.Time
}

// NewTokenCache returns a cache of at most max tokens in front of a.
func NewTokenCache(a *Authenticator, max int, ttl time.Duration) *TokenCache {
	c := &TokenCache{a: a, entries: map[[sha256.Size]byte]tokenEntry{}, max: max, ttl: ttl, now: time.Now}
	if a != nil {
		c.now = a.now // the clock the tokens are checked against
	}
	return c
}

// Authenticate is Authenticator.Authenticate, served from the cache for a
// user token verified less than ttl ago.
func (c *TokenCache) Authenticate(ctx context.Context, header, clientIP string) (*Principal, error) {
	var key [sha256.Size]byte
	bearer := strings.HasPrefix(header, "Bearer ")
	if bearer {
		key = sha256.Sum256([]byte(header))
		if p, ok := c.get(key); ok {
			return p, nil
		}
	}
	gen := c.generation()
	p, err := c.a.Authenticate(ctx, header, clientIP)
	if err != nil {
		return nil, err
	}
	if bearer && p.Kind == KindUser && !p.ExpiresAt.IsZero() {
		c.putIf(gen, key, p, p.ExpiresAt)
	}
	return p, nil
}

func (c *TokenCache) get(k [sha256.Size]byte) (*Principal, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[k]
	if !ok {
		return nil, false
	}
	if !c.now().Before(e.expires) {
		delete(c.entries, k)
		return nil, false
	}
	// Callers may keep the principal; hand out a copy.
	cp := *e.p
	return &cp, true
}

func (c *TokenCache) generation() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen
}

func (c *TokenCache) put(k [sha256.Size]byte, p *Principal, tokenExpiry time.Time) {
	c.putIf(c.generation(), k, p, tokenExpiry)
}

// putIf caches p unless a Reset ran since generation gen was read.
func (c *TokenCache) putIf(gen uint64, k [sha256.Size]byte, p *Principal, tokenExpiry time.Time) {
	exp := c.now().Add(c.ttl)
	if tokenExpiry.Before(exp) {
		exp = tokenExpiry
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen {
		return
	}
	if len(c.entries) >= c.max {
		// Full: start over rather than track recency; a miss only costs
		// one verification.
		c.entries = map[[sha256.Size]byte]tokenEntry{}
	}
	cp := *p
	c.entries[k] = tokenEntry{p: &cp, expires: exp}
}

// Reset drops every cached token.
func (c *TokenCache) Reset() {
	c.mu.Lock()
	c.entries = map[[sha256.Size]byte]tokenEntry{}
	c.gen++
	c.mu.Unlock()
}
