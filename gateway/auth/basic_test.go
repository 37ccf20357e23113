package auth

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/provgate/provgate/backend"
)

func basicHeader(user, pw string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pw))
}

func TestAuthenticateHeader(t *testing.T) {
	s := newFakeSecrets()
	bob := s.addUser(t, "bob", "bob-secret-00001", "pa:ss word", "operator")
	a, _ := newTestAuth(s, Options{})
	tok, _, err := a.IssueUserToken(context.Background(), bob, basicPrincipal(bob), time.Hour, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		header string
		code   string
		msg    string
	}{
		{"basic good, password with colon and space", basicHeader("bob", "pa:ss word"), "", ""},
		{"basic lower-case scheme", "basic " + base64.StdEncoding.EncodeToString([]byte("bob:pa:ss word")), "", ""},
		{"bearer good", "Bearer " + tok, "", ""},
		{"bearer lower-case scheme, extra spaces", "bearer   " + tok + " ", "", ""},
		{"no header", "", backend.EUNAUTHORIZED, ""},
		{"unknown scheme", "Digest abc", backend.EUNAUTHORIZED, ""},
		{"scheme only", "Basic", backend.EUNAUTHORIZED, ""},
		{"bearer without token", "Bearer ", backend.EUNAUTHORIZED, ""},
		{"garbage base64", "Basic !!!notbase64", backend.EUNAUTHORIZED, ""},
		{"no colon", "Basic " + base64.StdEncoding.EncodeToString([]byte("bob")), backend.EUNAUTHORIZED, ""},
		{"empty user", basicHeader("", "pa:ss word"), backend.EUNAUTHORIZED, ""},
		{"huge header", "Bearer " + strings.Repeat("a", MaxHeaderLen), backend.EUNAUTHORIZED, ""},
		{"wrong password", basicHeader("bob", "nope"), backend.EFORBIDDEN, "invalid credentials"},
		{"unknown user", basicHeader("nobody", "nope"), backend.EFORBIDDEN, "invalid credentials"},
		{"empty password", basicHeader("bob", ""), backend.EFORBIDDEN, "invalid credentials"},
		{"password over the cap", basicHeader("bob", strings.Repeat("x", MaxPasswordLen+1)), backend.EFORBIDDEN, "invalid credentials"},
		{"bearer junk", "Bearer abc.def.ghi", backend.EFORBIDDEN, "token invalid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := a.Authenticate(context.Background(), tt.header, "")
			if tt.code == "" {
				if err != nil {
					t.Fatal(err)
				}
				if p.Name != "bob" || p.Kind != KindUser || p.RoleRestricted || !slices.Equal(p.Roles, []string{"operator"}) {
					t.Errorf("got %+v", p)
				}
				return
			}
			e := wantCode(t, err, tt.code)
			if e.Type != "AUTH" {
				t.Errorf("got Type %q, want AUTH", e.Type)
			}
			if tt.msg != "" && strings.Join(e.Messages, "; ") != tt.msg {
				t.Errorf("got messages %q, want %q", e.Messages, tt.msg)
			}
		})
	}
}

func TestBasicPrincipal(t *testing.T) {
	s := newFakeSecrets()
	s.addUser(t, "bob", "bob-secret-00001", "pw", "operator", "readonly")
	a, _ := newTestAuth(s, Options{})
	p, err := a.Authenticate(context.Background(), basicHeader("bob", "pw"), "192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	want := Principal{Kind: KindUser, Name: "bob", Grantor: "bob", Roles: []string{"operator", "readonly"}, Method: MethodBasic}
	if got := fmt.Sprintf("%+v", *p); got != fmt.Sprintf("%+v", want) {
		t.Errorf("got  %s\nwant %+v", got, want)
	}
}

func TestBasicUnknownUserLooksLikeWrongPassword(t *testing.T) {
	s := newFakeSecrets()
	s.addUser(t, "bob", "bob-secret-00001", "pw")
	a, scrypts := newTestAuth(s, Options{})
	_, errUnknown := a.Authenticate(context.Background(), basicHeader("nobody", "pw"), "")
	_, errWrong := a.Authenticate(context.Background(), basicHeader("bob", "bad"), "")
	if errUnknown == nil || errWrong == nil || errUnknown.Error() != errWrong.Error() {
		t.Errorf("got %v and %v, want the same error", errUnknown, errWrong)
	}
	// The unknown user ran scrypt too (against the decoy), so timing does not
	// tell the two apart.
	if got := scrypts.Load(); got != 2 {
		t.Errorf("got %d scrypt runs, want 2", got)
	}
}

func TestBasicStoreOutage(t *testing.T) {
	s := newFakeSecrets()
	s.fail = errOutage
	a, _ := newTestAuth(s, Options{})
	_, err := a.Authenticate(context.Background(), basicHeader("bob", "pw"), "")
	e := wantCode(t, err, backend.EINTERNAL)
	if !errors.Is(e, errOutage) {
		t.Errorf("cause lost: %v", e)
	}
}

func TestBasicCache(t *testing.T) {
	tests := []struct {
		name string
		// between runs after a first successful login.
		between func(s *fakeSecrets, clk *clock, t *testing.T)
		pw      string
		ok      bool
		scrypt  int64 // runs for the second login
	}{
		{"hit skips scrypt", func(*fakeSecrets, *clock, *testing.T) {}, "pw", true, 0},
		{"wrong password is not a hit", func(*fakeSecrets, *clock, *testing.T) {}, "bad", false, 1},
		{"password change invalidates", func(s *fakeSecrets, _ *clock, t *testing.T) {
			s.addUser(t, "bob", "bob-secret-00001", "pw", "operator")
		}, "pw", true, 1},
		{"old password after change", func(s *fakeSecrets, _ *clock, t *testing.T) {
			s.addUser(t, "bob", "bob-secret-00001", "new-pw", "operator")
		}, "pw", false, 1},
		{"secret change invalidates", func(s *fakeSecrets, _ *clock, _ *testing.T) {
			s.setUserSecret("bob", "bob-secret-00002")
		}, "pw", true, 1},
		{"ttl expiry", func(_ *fakeSecrets, clk *clock, _ *testing.T) { clk.Add(5 * time.Minute) }, "pw", true, 1},
		{"within ttl", func(_ *fakeSecrets, clk *clock, _ *testing.T) { clk.Add(5*time.Minute - time.Second) }, "pw", true, 0},
		{"user deleted", func(s *fakeSecrets, _ *clock, _ *testing.T) {
			s.set(func(s *fakeSecrets) { delete(s.users, "bob") })
		}, "pw", false, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newFakeSecrets()
			s.addUser(t, "bob", "bob-secret-00001", "pw", "operator")
			clk := newClock()
			a, scrypts := newTestAuth(s, Options{Now: clk.Now, BasicCacheTTL: 5 * time.Minute})
			if _, err := a.Authenticate(context.Background(), basicHeader("bob", "pw"), ""); err != nil {
				t.Fatal(err)
			}
			if got := scrypts.Load(); got != 1 {
				t.Fatalf("first login: got %d scrypt runs, want 1", got)
			}
			tt.between(s, clk, t)
			_, err := a.Authenticate(context.Background(), basicHeader("bob", tt.pw), "")
			if (err == nil) != tt.ok {
				t.Errorf("got %v, want ok %v", err, tt.ok)
			}
			if got := scrypts.Load() - 1; got != tt.scrypt {
				t.Errorf("second login: got %d scrypt runs, want %d", got, tt.scrypt)
			}
		})
	}
}

func TestBasicCacheBounded(t *testing.T) {
	s := newFakeSecrets()
	for i := range 3 {
		s.addUser(t, fmt.Sprintf("user%d", i), fmt.Sprintf("secret-%d-0000000", i), "pw")
	}
	a, scrypts := newTestAuth(s, Options{BasicCacheSize: 2})
	login := func(name string) {
		t.Helper()
		if _, err := a.Authenticate(context.Background(), basicHeader(name, "pw"), ""); err != nil {
			t.Fatal(err)
		}
	}
	login("user0")
	login("user1")
	login("user0") // hit; user0 becomes most recent
	login("user2") // evicts user1
	if got := a.cache.len(); got != 2 {
		t.Errorf("got %d cache entries, want 2", got)
	}
	before := scrypts.Load()
	login("user0")
	if scrypts.Load() != before {
		t.Error("recently used entry was evicted")
	}
	login("user1")
	if scrypts.Load() != before+1 {
		t.Error("least recently used entry was not evicted")
	}
}

func TestBasicCacheDisabled(t *testing.T) {
	s := newFakeSecrets()
	s.addUser(t, "bob", "bob-secret-00001", "pw")
	a, scrypts := newTestAuth(s, Options{BasicCacheSize: -1})
	for range 3 {
		if _, err := a.Authenticate(context.Background(), basicHeader("bob", "pw"), ""); err != nil {
			t.Fatal(err)
		}
	}
	if got := scrypts.Load(); got != 3 {
		t.Errorf("got %d scrypt runs, want 3", got)
	}
}

func TestScryptConcurrencyBound(t *testing.T) {
	const limit, callers = 2, 50
	s := newFakeSecrets()
	s.addUser(t, "bob", "bob-secret-00001", "pw")
	a, _ := newTestAuth(s, Options{BasicCacheSize: -1, ScryptConcurrency: limit, ScryptWait: time.Minute, FailLimitUser: -1, FailLimitIP: -1})
	var active, peak atomic.Int64
	a.onScrypt = func() {
		n := active.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(time.Millisecond) // widen the window in which overlaps show
		active.Add(-1)
	}
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for i := range callers {
		wg.Go(func() {
			pw := "pw"
			if i%2 == 1 {
				pw = "wrong"
			}
			_, err := a.Authenticate(context.Background(), basicHeader("bob", pw), "")
			if (err == nil) != (pw == "pw") {
				errs <- fmt.Errorf("caller %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := peak.Load(); got > limit || got < 1 {
		t.Errorf("got %d concurrent scrypt runs, want 1..%d", got, limit)
	}
}

func TestScryptSlotFailsFast(t *testing.T) {
	s := newFakeSecrets()
	s.addUser(t, "bob", "bob-secret-00001", "pw")
	a, _ := newTestAuth(s, Options{ScryptConcurrency: 1, ScryptWait: 20 * time.Millisecond})
	hold, held := make(chan struct{}), make(chan struct{})
	// Only the first run blocks; a later one (which a broken bound would let
	// in) must not wait on it, or the test would hang instead of failing.
	var first atomic.Bool
	a.onScrypt = func() {
		if first.CompareAndSwap(false, true) {
			close(held)
			<-hold
		}
	}
	done := make(chan error)
	go func() {
		_, err := a.Authenticate(context.Background(), basicHeader("bob", "pw"), "")
		done <- err
	}()
	<-held
	t.Run("busy", func(t *testing.T) {
		start := time.Now()
		_, err := a.Authenticate(context.Background(), basicHeader("bob", "pw"), "")
		wantCode(t, err, backend.EUNAVAILABLE)
		if _, ok := RetryAfter(err); !ok {
			t.Error("no RetryAfter on 503")
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("waited %s", d)
		}
	})
	t.Run("cancelled while waiting", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		a.wait = time.Minute
		_, err := a.Authenticate(ctx, basicHeader("bob", "pw"), "")
		if !errors.Is(err, context.Canceled) {
			t.Errorf("got %v, want context.Canceled", err)
		}
	})
	close(hold)
	if err := <-done; err != nil {
		t.Errorf("holder: %v", err)
	}
}

func TestFailureLimit(t *testing.T) {
	newWorld := func(t *testing.T) (*Authenticator, *atomic.Int64, *clock) {
		s := newFakeSecrets()
		s.addUser(t, "bob", "bob-secret-00001", "pw")
		s.addUser(t, "carol", "carol-secret-001", "pw")
		clk := newClock()
		a, n := newTestAuth(s, Options{Now: clk.Now, FailLimitUser: 3, FailLimitIP: 5, FailWindow: time.Minute, BasicCacheTTL: time.Hour})
		return a, n, clk
	}
	try := func(a *Authenticator, user, pw, ip string) error {
		_, err := a.Authenticate(context.Background(), basicHeader(user, pw), ip)
		return err
	}

	t.Run("per user", func(t *testing.T) {
		a, scrypts, clk := newWorld(t)
		for i := range 3 {
			wantCode(t, try(a, "bob", "bad", fmt.Sprintf("192.0.2.%d", i)), backend.EFORBIDDEN)
			clk.Add(10 * time.Second)
		}
		before := scrypts.Load()
		e := wantCode(t, try(a, "bob", "bad", "192.0.2.9"), backend.ETOOMANY)
		if got, want := strings.Join(e.Messages, ""), "too many failed logins; retry after 30s"; got != want {
			t.Errorf("got %q, want %q", got, want)
		}
		if d, ok := RetryAfter(e); !ok || d != 30*time.Second {
			t.Errorf("got RetryAfter %s %v, want 30s", d, ok)
		}
		wantCode(t, try(a, "bob", "pw", "192.0.2.9"), backend.ETOOMANY)
		if scrypts.Load() != before {
			t.Error("scrypt ran for a limited attempt")
		}
		if err := try(a, "carol", "pw", "192.0.2.9"); err != nil {
			t.Errorf("other user refused: %v", err)
		}
		clk.Add(31 * time.Second) // the first failure leaves the window
		if err := try(a, "bob", "pw", "192.0.2.9"); err != nil {
			t.Errorf("after the window: %v", err)
		}
	})
	t.Run("per ip", func(t *testing.T) {
		a, _, clk := newWorld(t)
		for i := range 5 {
			wantCode(t, try(a, fmt.Sprintf("guess%d", i), "bad", "198.51.100.7"), backend.EFORBIDDEN)
		}
		wantCode(t, try(a, "carol", "pw", "198.51.100.7"), backend.ETOOMANY)
		if err := try(a, "carol", "pw", "198.51.100.8"); err != nil {
			t.Errorf("other ip refused: %v", err)
		}
		clk.Add(time.Minute + time.Second)
		if err := try(a, "carol", "pw", "198.51.100.7"); err != nil {
			t.Errorf("after the window: %v", err)
		}
	})
	t.Run("cached client survives a lockout of its name", func(t *testing.T) {
		a, scrypts, _ := newWorld(t)
		if err := try(a, "bob", "pw", "203.0.113.1"); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			wantCode(t, try(a, "bob", "bad", "198.51.100.66"), backend.EFORBIDDEN)
		}
		wantCode(t, try(a, "bob", "bad", "198.51.100.66"), backend.ETOOMANY)
		before := scrypts.Load()
		if err := try(a, "bob", "pw", "203.0.113.1"); err != nil {
			t.Errorf("cached credential refused: %v", err)
		}
		if scrypts.Load() != before {
			t.Error("scrypt ran for a cached credential")
		}
	})
	t.Run("empty ip skips the ip limit", func(t *testing.T) {
		a, _, _ := newWorld(t)
		for i := range 6 {
			wantCode(t, try(a, fmt.Sprintf("guess%d", i), "bad", ""), backend.EFORBIDDEN)
		}
	})
}

func TestMemoryFailuresBoundedKeys(t *testing.T) {
	clk := newClock()
	l := NewMemoryFailures(3, 100).(*memoryFailures)
	ctx := context.Background()
	for i := range 1000 {
		clk.Add(time.Millisecond)
		_ = l.AddLoginFailure(ctx, fmt.Sprintf("user%d", i), fmt.Sprintf("ip%d", i), clk.Now())
	}
	if len(l.users) > 100 || len(l.ips) > 100 {
		t.Errorf("got %d user and %d ip keys, want at most 100 each", len(l.users), len(l.ips))
	}
	// The newest keys are the ones kept.
	if us, is, _ := l.RecentLoginFailures(ctx, "user999", "ip999", time.Time{}, 3, 3); len(us) != 1 || len(is) != 1 {
		t.Errorf("newest key forgotten: %v %v", us, is)
	}
	for range 5 {
		clk.Add(time.Second)
		_ = l.AddLoginFailure(ctx, "bob", "", clk.Now())
	}
	if got := len(l.users["bob"]); got != 3 {
		t.Errorf("bob keeps %d failures, want 3", got)
	}
	clk.Add(2 * time.Minute)
	_ = l.PruneLoginFailures(ctx, clk.Now().Add(-time.Minute))
	if len(l.users) != 0 || len(l.ips) != 0 {
		t.Errorf("after pruning %d user and %d ip keys remain", len(l.users), len(l.ips))
	}
}

func TestRecentLoginFailures(t *testing.T) {
	clk := newClock()
	l := NewMemoryFailures(10, 100)
	ctx := context.Background()
	var times []time.Time
	for range 5 {
		clk.Add(10 * time.Second)
		times = append(times, clk.Now())
		_ = l.AddLoginFailure(ctx, "bob", "192.0.2.1", clk.Now())
	}
	_ = l.AddLoginFailure(ctx, "bob", "", clk.Now().Add(time.Second))
	us, is, err := l.RecentLoginFailures(ctx, "bob", "192.0.2.1", times[1], 3, 10)
	if err != nil {
		t.Fatal(err)
	}
	want := []time.Time{clk.Now().Add(time.Second), times[4], times[3]}
	if !slices.Equal(us, want) {
		t.Errorf("user times %v, want newest first %v", us, want)
	}
	if !slices.Equal(is, []time.Time{times[4], times[3], times[2]}) {
		t.Errorf("ip times %v, want the three after since, newest first", is)
	}
	if _, is, _ := l.RecentLoginFailures(ctx, "bob", "", time.Time{}, 3, 3); is != nil {
		t.Errorf("empty ip gave %v", is)
	}
}

// spyFailures counts calls to a FailureLog and can fail them.
type spyFailures struct {
	FailureLog
	reads, adds, prunes atomic.Int64
	pruned              []time.Time
	mu                  sync.Mutex
	fail                error
}

func (s *spyFailures) RecentLoginFailures(ctx context.Context, user, ip string, since time.Time, ul, il int) ([]time.Time, []time.Time, error) {
	s.reads.Add(1)
	if s.fail != nil {
		return nil, nil, s.fail
	}
	return s.FailureLog.RecentLoginFailures(ctx, user, ip, since, ul, il)
}

func (s *spyFailures) AddLoginFailure(ctx context.Context, user, ip string, t time.Time) error {
	s.adds.Add(1)
	if s.fail != nil {
		return s.fail
	}
	return s.FailureLog.AddLoginFailure(ctx, user, ip, t)
}

func (s *spyFailures) PruneLoginFailures(ctx context.Context, t time.Time) error {
	s.prunes.Add(1)
	s.mu.Lock()
	s.pruned = append(s.pruned, t)
	s.mu.Unlock()
	return s.FailureLog.PruneLoginFailures(ctx, t)
}

// TestFailuresShared: two authenticators on one failure log (two replicas
// on one store) count each other's failures.
func TestFailuresShared(t *testing.T) {
	s := newFakeSecrets()
	s.addUser(t, "bob", "bob-secret-00001", "pw")
	clk := newClock()
	shared := NewMemoryFailures(10, 100)
	opts := Options{Now: clk.Now, FailLimitUser: 4, FailLimitIP: -1, Failures: shared}
	a, _ := newTestAuth(s, opts)
	b, _ := newTestAuth(s, opts)
	for i := range 4 {
		r := []*Authenticator{a, b}[i%2]
		_, err := r.Authenticate(context.Background(), basicHeader("bob", "bad"), "192.0.2.1")
		wantCode(t, err, backend.EFORBIDDEN)
	}
	for _, r := range []*Authenticator{a, b} {
		_, err := r.Authenticate(context.Background(), basicHeader("bob", "pw"), "192.0.2.1")
		wantCode(t, err, backend.ETOOMANY)
	}
	clk.Add(time.Minute + time.Second)
	if _, err := b.Authenticate(context.Background(), basicHeader("bob", "pw"), "192.0.2.1"); err != nil {
		t.Errorf("after the window: %v", err)
	}
}

// TestFailuresCost: a cached Basic login reads nothing, an uncached good one
// reads once and writes nothing; only failures write, and the log is pruned
// at most once a window.
func TestFailuresCost(t *testing.T) {
	s := newFakeSecrets()
	s.addUser(t, "bob", "bob-secret-00001", "pw")
	clk := newClock()
	spy := &spyFailures{FailureLog: NewMemoryFailures(10, 100)}
	a, _ := newTestAuth(s, Options{Now: clk.Now, Failures: spy, BasicCacheTTL: time.Hour})
	ctx := context.Background()
	if _, err := a.Authenticate(ctx, basicHeader("bob", "pw"), "192.0.2.1"); err != nil {
		t.Fatal(err)
	}
	if r, w := spy.reads.Load(), spy.adds.Load(); r != 1 || w != 0 {
		t.Errorf("uncached good login: %d reads, %d writes; want 1, 0", r, w)
	}
	for range 3 {
		if _, err := a.Authenticate(ctx, basicHeader("bob", "pw"), "192.0.2.1"); err != nil {
			t.Fatal(err)
		}
	}
	if r, w := spy.reads.Load(), spy.adds.Load(); r != 1 || w != 0 {
		t.Errorf("cached good logins: %d reads, %d writes in all; want 1, 0", r, w)
	}
	for range 3 {
		_, err := a.Authenticate(ctx, basicHeader("bob", "bad"), "192.0.2.1")
		wantCode(t, err, backend.EFORBIDDEN)
		clk.Add(10 * time.Second)
	}
	if r, w, p := spy.reads.Load(), spy.adds.Load(), spy.prunes.Load(); r != 4 || w != 3 || p != 1 {
		t.Errorf("after 3 failures: %d reads, %d writes, %d prunes; want 4, 3, 1", r, w, p)
	}
	clk.Add(time.Minute)
	_, err := a.Authenticate(ctx, basicHeader("bob", "bad"), "192.0.2.1")
	wantCode(t, err, backend.EFORBIDDEN)
	if p := spy.prunes.Load(); p != 2 {
		t.Errorf("%d prunes after a window, want 2", p)
	}
	if got, want := spy.pruned[1], clk.Now().Add(-time.Minute); !got.Equal(want) {
		t.Errorf("pruned up to %v, want %v (one window back)", got, want)
	}
}

// TestFailuresOutage: a failure log that cannot be read or written refuses
// the login as the server's fault (500), never lets it through uncounted.
func TestFailuresOutage(t *testing.T) {
	s := newFakeSecrets()
	s.addUser(t, "bob", "bob-secret-00001", "pw")
	spy := &spyFailures{FailureLog: NewMemoryFailures(10, 100), fail: errors.New("database is down")}
	a, scrypts := newTestAuth(s, Options{Failures: spy})
	for _, pw := range []string{"pw", "bad"} {
		_, err := a.Authenticate(context.Background(), basicHeader("bob", pw), "192.0.2.1")
		e := wantCode(t, err, backend.EINTERNAL)
		if strings.Contains(strings.Join(e.Messages, " "), "database") {
			t.Errorf("message names the cause: %v", e.Messages)
		}
	}
	if n := scrypts.Load(); n != 0 {
		t.Errorf("scrypt ran %d times without the failure count", n)
	}
	// Readable but not writable: the failure is not counted, so it is 500.
	spy.fail = nil
	a2, _ := newTestAuth(s, Options{Failures: &spyFailures{FailureLog: failingAdds{NewMemoryFailures(10, 100)}}})
	_, err := a2.Authenticate(context.Background(), basicHeader("bob", "bad"), "192.0.2.1")
	wantCode(t, err, backend.EINTERNAL)
	if _, err := a2.Authenticate(context.Background(), basicHeader("bob", "pw"), "192.0.2.1"); err != nil {
		t.Errorf("good login with a read-only log: %v", err)
	}
}

type failingAdds struct{ FailureLog }

func (failingAdds) AddLoginFailure(context.Context, string, string, time.Time) error {
	return errors.New("read-only")
}

func TestContext(t *testing.T) {
	if _, ok := FromContext(context.Background()); ok {
		t.Error("empty context has a principal")
	}
	p := &Principal{Kind: KindUser, Name: "bob"}
	got, ok := FromContext(NewContext(context.Background(), p))
	if !ok || got != p {
		t.Errorf("got %v %v, want %v", got, ok, p)
	}
}
