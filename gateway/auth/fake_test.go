package auth

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/provgate/provgate/backend"
)

// testParams keep scrypt cheap under -race; production parameters are
// exercised once in TestHashPasswordDefaults.
var testParams = scryptParams{n: minN, r: 1, p: 1, saltLen: 16, keyLen: 32}

// fakeSecrets is an in-memory Secrets.
type fakeSecrets struct {
	mu       sync.Mutex
	system   string
	base     []byte
	users    map[string]UserRecord
	machines map[string]string
	jobs     map[string][2]string // uuid -> machine, state
	fail     error                // when set, every call returns it (a store outage)
}

func newFakeSecrets() *fakeSecrets {
	return &fakeSecrets{
		system:   "system-secret-0001",
		base:     []byte("0123456789abcdef0123456789abcdef"),
		users:    map[string]UserRecord{},
		machines: map[string]string{},
		jobs:     map[string][2]string{},
	}
}

func (f *fakeSecrets) JobState(_ context.Context, uuid string) (string, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return "", "", f.fail
	}
	j, ok := f.jobs[uuid]
	if !ok {
		return "", "", backend.NotFound(backend.ReadOp, "jobs", uuid)
	}
	return j[0], j[1], nil
}

func (f *fakeSecrets) SystemSecret(context.Context) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.system, f.fail
}

func (f *fakeSecrets) BaseKey(context.Context) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]byte(nil), f.base...), f.fail
}

func (f *fakeSecrets) User(_ context.Context, name string) (UserRecord, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return UserRecord{}, f.fail
	}
	u, ok := f.users[name]
	if !ok {
		return UserRecord{}, backend.NotFound(backend.ReadOp, "users", name)
	}
	return u, nil
}

func (f *fakeSecrets) MachineSecret(_ context.Context, uuid string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return "", f.fail
	}
	s, ok := f.machines[uuid]
	if !ok {
		return "", backend.NotFound(backend.ReadOp, "machines", uuid)
	}
	return s, nil
}

// addUser stores a user with a cheap hash of pw.
func (f *fakeSecrets) addUser(t testing.TB, name, secret, pw string, roles ...string) UserRecord {
	t.Helper()
	h, err := hashPassword(pw, testParams)
	if err != nil {
		t.Fatal(err)
	}
	u := UserRecord{Name: name, Secret: secret, PasswordHash: h, Roles: roles}
	f.mu.Lock()
	f.users[name] = u
	f.mu.Unlock()
	return u
}

func (f *fakeSecrets) setUserSecret(name, secret string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	u := f.users[name]
	u.Secret = secret
	f.users[name] = u
}

func (f *fakeSecrets) set(fn func(f *fakeSecrets)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

var errOutage = errors.New("database is down")

// clock is a settable time source.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// newTestAuth builds an Authenticator with cheap scrypt and a scrypt counter.
func newTestAuth(s Secrets, opts Options) (*Authenticator, *atomic.Int64) {
	a := New(s, opts)
	a.params = testParams
	var n atomic.Int64
	a.onScrypt = func() { n.Add(1) }
	return a, &n
}

// wantCode fails unless err is a *backend.Error with code.
func wantCode(t *testing.T, err error, code string) *backend.Error {
	t.Helper()
	if got := backend.ErrorCode(err); got != code {
		t.Fatalf("error %v: got code %q, want %q", err, got, code)
	}
	return backend.AsError(err)
}
