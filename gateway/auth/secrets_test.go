package auth

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"sync"
	"testing"

	"github.com/provgate/provgate/backend"
)

// slowStore is a RecordStore whose reads can be held mid-way, to run a
// Reset while a read is in flight.
type slowStore struct {
	mu       sync.Mutex
	settings map[string]string
	users    map[string]backend.User
	reads    int
	// hold, when set, is received from inside the next read: the read has
	// taken its value and waits for the test to let it return.
	hold chan chan struct{}
}

func (s *slowStore) pause() {
	s.mu.Lock()
	h := s.hold
	s.hold = nil
	s.mu.Unlock()
	if h != nil {
		release := make(chan struct{})
		h <- release
		<-release
	}
}

func (s *slowStore) GetSetting(_ context.Context, name string) (string, bool, error) {
	s.mu.Lock()
	v, ok := s.settings[name]
	s.reads++
	s.mu.Unlock()
	s.pause()
	return v, ok, nil
}

func (s *slowStore) SetSetting(_ context.Context, name, value string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settings[name] = value
	return nil
}

func (s *slowStore) EnsureSetting(ctx context.Context, name string, mk func() string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.settings[name]; ok {
		return v, nil
	}
	s.settings[name] = mk()
	return s.settings[name], nil
}

func (s *slowStore) Get(_ context.Context, prefix, key string) (backend.Record, error) {
	s.mu.Lock()
	u, ok := s.users[key]
	s.reads++
	s.mu.Unlock()
	if prefix != backend.PrefixUsers || !ok {
		return backend.Record{}, backend.NotFound(backend.ReadOp, prefix, key)
	}
	data, err := json.Marshal(u)
	if err != nil {
		return backend.Record{}, err
	}
	s.pause()
	return backend.Record{Data: data}, nil
}

func (s *slowStore) set(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f()
}

// TestSecretCacheResetDuringRead: a value read before a change and
// returned after the change's Reset is not cached, so the next caller reads
// the changed one. Otherwise a rotated Secret could keep a token alive on a
// replica until the next change.
func TestSecretCacheResetDuringRead(t *testing.T) {
	st := &slowStore{
		settings: map[string]string{
			SettingSystemSecret: "sys-1",
			SettingTokenKey:     base64.StdEncoding.EncodeToString(make([]byte, 32)),
		},
		users: map[string]backend.User{"cy": {Name: "cy", Secret: "cy-1"}},
	}
	c := NewSecretCache(st)
	ctx := context.Background()

	t.Run("user", func(t *testing.T) {
		hold := make(chan chan struct{})
		st.set(func() { st.hold = hold })
		got := make(chan UserRecord, 1)
		go func() {
			u, err := c.User(ctx, "cy")
			if err != nil {
				t.Error(err)
			}
			got <- u
		}()
		release := <-hold // the read has the old Secret
		st.set(func() { st.users["cy"] = backend.User{Name: "cy", Secret: "cy-2"} })
		c.Reset()
		close(release)
		if u := <-got; u.Secret != "cy-1" {
			t.Fatalf("the read in flight returned %q, want the value it read", u.Secret)
		}
		u, err := c.User(ctx, "cy")
		if err != nil || u.Secret != "cy-2" {
			t.Fatalf("after the Reset: %q, %v; want the rotated Secret cy-2", u.Secret, err)
		}
		// Without a Reset in between, the value is cached.
		st.set(func() { st.reads = 0 })
		if _, err := c.User(ctx, "cy"); err != nil {
			t.Fatal(err)
		}
		st.set(func() {
			if st.reads != 0 {
				t.Fatalf("a cached user was read %d more times", st.reads)
			}
		})
	})

	t.Run("system secret", func(t *testing.T) {
		c.Reset()
		hold := make(chan chan struct{})
		st.set(func() { st.hold = hold })
		got := make(chan string, 1)
		go func() {
			s, err := c.SystemSecret(ctx)
			if err != nil {
				t.Error(err)
			}
			got <- s
		}()
		release := <-hold
		st.set(func() { st.settings[SettingSystemSecret] = "sys-2" })
		c.Reset()
		close(release)
		<-got
		if s, err := c.SystemSecret(ctx); err != nil || s != "sys-2" {
			t.Fatalf("after the Reset: %q, %v; want sys-2", s, err)
		}
	})
}
