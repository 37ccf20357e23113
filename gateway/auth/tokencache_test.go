package auth

import (
	"crypto/sha256"
	"testing"
	"time"
)

func TestTokenCache(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	c := NewTokenCache(nil, 2, time.Minute)
	c.now = func() time.Time { return now }
	k1, k2, k3 := sha256.Sum256([]byte("a")), sha256.Sum256([]byte("b")), sha256.Sum256([]byte("c"))
	p := &Principal{Kind: KindUser, Name: "bob", Roles: []string{"ops"}}

	t.Run("hit returns a copy", func(t *testing.T) {
		c.put(k1, p, now.Add(time.Hour))
		got, ok := c.get(k1)
		if !ok || got.Name != "bob" {
			t.Fatalf("get = %v, %v", got, ok)
		}
		got.Name = "mallory"
		if again, _ := c.get(k1); again.Name != "bob" {
			t.Fatalf("cached principal changed through a returned copy: %v", again.Name)
		}
	})
	t.Run("entry never outlives the token", func(t *testing.T) {
		c.put(k2, p, now.Add(10*time.Second))
		now = now.Add(11 * time.Second)
		if _, ok := c.get(k2); ok {
			t.Fatal("expired token served from the cache")
		}
	})
	t.Run("entry lives at most the cache ttl", func(t *testing.T) {
		c.put(k1, p, now.Add(time.Hour))
		now = now.Add(61 * time.Second)
		if _, ok := c.get(k1); ok {
			t.Fatal("entry served past the cache ttl")
		}
	})
	t.Run("reset drops everything", func(t *testing.T) {
		c.put(k1, p, now.Add(time.Hour))
		c.Reset()
		if _, ok := c.get(k1); ok {
			t.Fatal("entry survived reset")
		}
	})
	t.Run("bounded", func(t *testing.T) {
		c.Reset()
		c.put(k1, p, now.Add(time.Hour))
		c.put(k2, p, now.Add(time.Hour))
		c.put(k3, p, now.Add(time.Hour))
		c.mu.Lock()
		n := len(c.entries)
		c.mu.Unlock()
		if n > 2 {
			t.Fatalf("cache holds %d entries, max 2", n)
		}
		if _, ok := c.get(k3); !ok {
			t.Fatal("newest entry missing")
		}
	})
}

// TestTokenCacheResetDuringVerify: a token verified against Secrets read
// before a Reset is not cached after it.
func TestTokenCacheResetDuringVerify(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	c := NewTokenCache(nil, 10, time.Minute)
	c.now = func() time.Time { return now }
	k := sha256.Sum256([]byte("Bearer x"))
	p := &Principal{Kind: KindUser, Name: "cy"}
	gen := c.generation() // verification starts
	c.Reset()             // a Secret changes meanwhile
	c.putIf(gen, k, p, now.Add(time.Hour))
	if _, ok := c.get(k); ok {
		t.Fatal("a token verified before a Reset was cached after it")
	}
	c.putIf(c.generation(), k, p, now.Add(time.Hour))
	if _, ok := c.get(k); !ok {
		t.Fatal("a token verified with no Reset in between was not cached")
	}
}
