package store_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/provgate/provgate/backend/store"
)

func TestLoginFailures(t *testing.T) {
	each(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		base := time.Now().Add(-time.Hour).Truncate(time.Microsecond).UTC()
		at := func(i int) time.Time { return base.Add(time.Duration(i) * time.Second) }
		for i := range 6 {
			if err := s.AddLoginFailure(ctx, "bob", "192.0.2.1", at(i)); err != nil {
				t.Fatal(err)
			}
		}
		// Only the user, only the address, another user.
		for _, f := range []struct{ user, ip string }{{"bob", ""}, {"", "192.0.2.1"}, {"carol", "192.0.2.9"}} {
			if err := s.AddLoginFailure(ctx, f.user, f.ip, at(10)); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.AddLoginFailure(ctx, "", "", at(11)); err != nil {
			t.Fatal(err)
		}

		us, is, err := s.RecentLoginFailures(ctx, "bob", "192.0.2.1", at(1), 3, 10)
		if err != nil {
			t.Fatal(err)
		}
		if want := []time.Time{at(10), at(5), at(4)}; !slices.EqualFunc(us, want, time.Time.Equal) {
			t.Errorf("bob: %v, want newest first, at most 3: %v", us, want)
		}
		if want := []time.Time{at(10), at(5), at(4), at(3), at(2)}; !slices.EqualFunc(is, want, time.Time.Equal) {
			t.Errorf("address: %v, want the failures after since, newest first: %v", is, want)
		}
		if us, is, err := s.RecentLoginFailures(ctx, "carol", "", time.Time{}, 5, 5); err != nil || len(us) != 1 || is != nil {
			t.Errorf("carol without address: %v %v %v", us, is, err)
		}
		if us, is, err := s.RecentLoginFailures(ctx, "bob", "192.0.2.1", time.Time{}, 0, 2); err != nil || us != nil || len(is) != 2 {
			t.Errorf("no user limit: %v %v %v", us, is, err)
		}
		if us, is, err := s.RecentLoginFailures(ctx, "nobody", "198.51.100.1", time.Time{}, 5, 5); err != nil || us != nil || is != nil {
			t.Errorf("unknown keys: %v %v %v", us, is, err)
		}
		// Names are compared exactly, and keys of any length are kept.
		if us, _, _ := s.RecentLoginFailures(ctx, "bob ", "", time.Time{}, 5, 0); len(us) != 0 {
			t.Errorf("\"bob \" counts bob's failures: %v", us)
		}
		long := strings.Repeat("x", 9000)
		if err := s.AddLoginFailure(ctx, long, long, at(12)); err != nil {
			t.Fatalf("long key: %v", err)
		}
		if us, is, _ := s.RecentLoginFailures(ctx, long, long, time.Time{}, 5, 5); len(us) != 1 || len(is) != 1 {
			t.Errorf("long key: %v %v", us, is)
		}

		if err := s.PruneLoginFailures(ctx, at(4)); err != nil {
			t.Fatal(err)
		}
		us, is, _ = s.RecentLoginFailures(ctx, "bob", "192.0.2.1", time.Time{}, 10, 10)
		if len(us) != 2 || len(is) != 2 {
			t.Errorf("after pruning up to at(4): %v %v, want at(10) and at(5) each", us, is)
		}
	})
}

// TestLoginFailuresConcurrent: failures recorded at once by many callers
// (several replicas) are all counted.
func TestLoginFailuresConcurrent(t *testing.T) {
	each(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		now := time.Now()
		var wg sync.WaitGroup
		for i := range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := s.AddLoginFailure(ctx, "bob", "192.0.2.1", now.Add(time.Duration(i)*time.Microsecond)); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		us, is, err := s.RecentLoginFailures(ctx, "bob", "192.0.2.1", now.Add(-time.Minute), 100, 100)
		if err != nil || len(us) != 20 || len(is) != 20 {
			t.Fatalf("got %d and %d failures (%v), want 20 each", len(us), len(is), err)
		}
	})
}
