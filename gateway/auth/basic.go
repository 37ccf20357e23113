package auth

import (
	"container/list"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"slices"
	"sync"
	"time"

	"github.com/provgate/provgate/backend"
)

// basic authenticates user:pw for one request.
//
// Order matters:
//  1. the user record is loaded (its hash and Secret key the cache);
//  2. a cache hit is accepted at once, even when the user name or IP is over
//     the failure limit: an attacker guessing passwords for a name must not
//     lock out the legitimate client already using it;
//  3. otherwise the failure limits are checked (one read of the failure
//     log, which replicas sharing a store share), and a limited attempt is
//     refused (429) without running scrypt;
//  4. scrypt runs under the concurrency bound; an unknown user runs it
//     against a decoy hash so that timing does not reveal which names exist.
func (a *Authenticator) basic(ctx context.Context, user, pw, clientIP string) (*Principal, error) {
	if len(pw) > MaxPasswordLen {
		// Never a valid password (HashPassword refuses it), and refusing it
		// costs nothing, so it is not counted as a guess.
		return nil, badLogin()
	}
	rec, err := a.secrets.User(ctx, user)
	known := err == nil
	if err != nil && !backend.IsCode(err, backend.ENOTFOUND) {
		return nil, internal(err)
	}
	var ck [sha256.Size]byte
	if known && a.cache != nil {
		ck = a.credKey(user, pw, rec)
		if a.cache.hit(ck, a.now()) {
			return basicPrincipal(rec), nil
		}
	}
	wait, fails, err := a.fails.check(ctx, user, clientIP, a.now())
	if err != nil {
		return nil, internal(err)
	}
	if wait > 0 {
		return nil, limitedError(wait)
	}
	hash := rec.PasswordHash
	if !known {
		if hash, err = a.decoy.get(a.params); err != nil {
			return nil, internal(err)
		}
	}
	ok, err := a.checkPassword(ctx, hash, pw)
	if err != nil {
		return nil, err
	}
	if !ok || !known {
		// Every bad login reads the same; a failure that cannot be counted
		// is the server's, and is refused as such rather than let through
		// uncounted.
		if err := a.fails.failed(ctx, user, clientIP, fails, a.now()); err != nil {
			return nil, internal(err)
		}
		return nil, badLogin()
	}
	if a.cache != nil {
		a.cache.add(ck, a.now())
	}
	return basicPrincipal(rec), nil
}

// basicPrincipal: Basic acts as a one-use token the user grants itself with
// all its roles (docs/design.md §5.5).
func basicPrincipal(u UserRecord) *Principal {
	return &Principal{Kind: KindUser, Name: u.Name, Grantor: u.Name, Roles: slices.Clone(u.Roles), Method: MethodBasic}
}

// credKey keys the cache by an HMAC of everything that makes the credential
// valid: a new password hash or a rotated Secret gives a different key, so
// stale entries can never hit. The password itself is never stored.
func (a *Authenticator) credKey(user, pw string, rec UserRecord) [sha256.Size]byte {
	m := hmac.New(sha256.New, a.cacheKey)
	for _, s := range [][]byte{[]byte(user), []byte(pw), rec.PasswordHash, []byte(rec.Secret)} {
		var n [4]byte
		binary.BigEndian.PutUint32(n[:], uint32(len(s)))
		m.Write(n[:])
		m.Write(s)
	}
	var k [sha256.Size]byte
	m.Sum(k[:0])
	return k
}

// checkPassword runs scrypt in one of the bounded slots. Waiting longer than
// ScryptWait fails fast with 503: queueing without bound would turn a burst
// of logins into unbounded latency and memory for everyone.
func (a *Authenticator) checkPassword(ctx context.Context, hash []byte, pw string) (bool, error) {
	t := time.NewTimer(a.wait)
	defer t.Stop()
	select {
	case a.scrypt <- struct{}{}:
	case <-t.C:
		return false, &backend.Error{Code: backend.EUNAVAILABLE, Type: "AUTH",
			Messages: []string{"too many logins in progress; retry shortly"}, Err: &Limited{RetryAfter: time.Second}}
	case <-ctx.Done():
		return false, ctx.Err()
	}
	defer func() { <-a.scrypt }()
	if a.onScrypt != nil {
		a.onScrypt()
	}
	return CheckPassword(hash, pw), nil
}

// decoyHash is a hash of a random password, built once on first need with
// the authenticator's parameters, checked for unknown users.
type decoyHash struct {
	once sync.Once
	hash []byte
	err  error
}

func (d *decoyHash) get(sp scryptParams) ([]byte, error) {
	d.once.Do(func() { d.hash, d.err = hashPassword(NewSecret(), sp) })
	return d.hash, d.err
}

// basicCache is a bounded LRU set of verified credential keys with a TTL.
type basicCache struct {
	mu   sync.Mutex
	max  int
	ttl  time.Duration
	ll   *list.List // front is most recent; values are *cacheEntry
	byID map[[sha256.Size]byte]*list.Element
}

type cacheEntry struct {
	key     [sha256.Size]byte
	expires time.Time
}

func newBasicCache(size int, ttl time.Duration) *basicCache {
	return &basicCache{max: size, ttl: ttl, ll: list.New(), byID: make(map[[sha256.Size]byte]*list.Element)}
}

func (c *basicCache) hit(k [sha256.Size]byte, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byID[k]
	if !ok {
		return false
	}
	if !now.Before(el.Value.(*cacheEntry).expires) {
		c.ll.Remove(el)
		delete(c.byID, k)
		return false
	}
	// The TTL runs from verification, not from last use, so a cached
	// credential is re-checked against scrypt at least every TTL.
	c.ll.MoveToFront(el)
	return true
}

func (c *basicCache) add(k [sha256.Size]byte, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byID[k]; ok {
		el.Value.(*cacheEntry).expires = now.Add(c.ttl)
		c.ll.MoveToFront(el)
		return
	}
	c.byID[k] = c.ll.PushFront(&cacheEntry{key: k, expires: now.Add(c.ttl)})
	for c.ll.Len() > c.max {
		old := c.ll.Back()
		c.ll.Remove(old)
		delete(c.byID, old.Value.(*cacheEntry).key)
	}
}

func (c *basicCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ll.Len()
}
