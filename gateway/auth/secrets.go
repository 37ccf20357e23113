package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/provgate/provgate/backend"
)

// Settings that hold the keys tokens are bound to (docs/design.md §14.5),
// shared by every replica through the store.
const (
	SettingSystemSecret = "system_secret"
	SettingTokenKey     = "token_key"
)

// KeyStore keeps server settings; *store.Store satisfies it.
type KeyStore = backend.Settings

// RecordStore is KeyStore with stored objects; *store.Store satisfies it.
type RecordStore interface {
	KeyStore
	Get(ctx context.Context, prefix, key string) (backend.Record, error)
}

// EnsureKeys creates the system Secret and the token key on the first start
// with an empty store; later starts keep them.
func EnsureKeys(ctx context.Context, st KeyStore) error {
	if _, err := st.EnsureSetting(ctx, SettingSystemSecret, NewSecret); err != nil {
		return fmt.Errorf("system secret: %w", err)
	}
	if _, err := st.EnsureSetting(ctx, SettingTokenKey, backend.NewKey); err != nil {
		return fmt.Errorf("token key: %w", err)
	}
	return nil
}

// maxCachedUsers bounds the user cache; beyond it users are read each time.
const maxCachedUsers = 10000

// SecretCache implements Secrets over the store. The system Secret, the
// token key and user records are cached in memory until Reset, which the
// server calls whenever users, roles, tenants or settings change (a local
// write or another replica's; docs/design.md §14.4). Machine Secrets are
// read each time: a machine's Secret can change without that signal.
type SecretCache struct {
	st    RecordStore
	mu    sync.RWMutex
	sys   string
	key   []byte
	users map[string]UserRecord
	// gen counts Resets. A value read from the store is cached only when
	// no Reset ran while it was read: otherwise a read that started before
	// a change and ended after its Reset would put the old Secret back,
	// and a rotated Secret would keep working (docs/design.md §14.4).
	gen uint64
}

// NewSecretCache returns an empty cache over st.
func NewSecretCache(st RecordStore) *SecretCache { return &SecretCache{st: st} }

// Reset drops everything cached.
func (s *SecretCache) Reset() {
	s.mu.Lock()
	s.sys, s.key, s.users = "", nil, nil
	s.gen++
	s.mu.Unlock()
}

// generation is the number of Resets so far.
func (s *SecretCache) generation() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.gen
}

// read reads the system Secret and the token key from the store and caches
// them unless a Reset ran meanwhile.
func (s *SecretCache) read(ctx context.Context) (string, []byte, error) {
	gen := s.generation()
	sys, _, err := s.st.GetSetting(ctx, SettingSystemSecret)
	if err != nil {
		return "", nil, err
	}
	k, _, err := s.st.GetSetting(ctx, SettingTokenKey)
	if err != nil {
		return "", nil, err
	}
	key, ok := backend.DecodeKey(k)
	if !ok {
		return "", nil, errors.New("token key setting is corrupt")
	}
	s.mu.Lock()
	if s.gen == gen {
		s.sys, s.key = sys, key
	}
	s.mu.Unlock()
	return sys, key, nil
}

// SystemSecret implements Secrets.
func (s *SecretCache) SystemSecret(ctx context.Context) (string, error) {
	sys, _, err := s.keys(ctx)
	return sys, err
}

// BaseKey implements Secrets.
func (s *SecretCache) BaseKey(ctx context.Context) ([]byte, error) {
	_, key, err := s.keys(ctx)
	return key, err
}

// keys returns the system Secret and the token key, from the cache or, when
// a Reset emptied it, as read from the store.
func (s *SecretCache) keys(ctx context.Context) (string, []byte, error) {
	s.mu.RLock()
	sys, key := s.sys, s.key
	s.mu.RUnlock()
	if key != nil {
		return sys, key, nil
	}
	return s.read(ctx)
}

// User implements Secrets. The user is read by its exact name, never by
// an index key.
func (s *SecretCache) User(ctx context.Context, name string) (UserRecord, error) {
	s.mu.RLock()
	u, ok := s.users[name]
	gen := s.gen
	s.mu.RUnlock()
	if ok {
		return u, nil
	}
	rec, err := s.st.Get(ctx, backend.PrefixUsers, name)
	if err != nil {
		return UserRecord{}, err
	}
	var bu backend.User
	if err := json.Unmarshal(rec.Data, &bu); err != nil {
		return UserRecord{}, err
	}
	u = UserRecord{Name: bu.Name, Secret: bu.Secret, PasswordHash: bu.PasswordHash, Roles: bu.Roles}
	s.mu.Lock()
	if s.users == nil {
		s.users = map[string]UserRecord{}
	}
	if s.gen == gen && len(s.users) < maxCachedUsers {
		s.users[name] = u
	}
	s.mu.Unlock()
	return u, nil
}

// MachineSecret implements Secrets.
func (s *SecretCache) MachineSecret(ctx context.Context, uuid string) (string, error) {
	rec, err := s.st.Get(ctx, backend.PrefixMachines, uuid)
	if err != nil {
		return "", err
	}
	var m backend.Machine
	if err := json.Unmarshal(rec.Data, &m); err != nil {
		return "", err
	}
	return m.Secret, nil
}

// JobState gives job tokens their job's machine and state (JobStates).
func (s *SecretCache) JobState(ctx context.Context, uuid string) (string, string, error) {
	rec, err := s.st.Get(ctx, backend.PrefixJobs, uuid)
	if err != nil {
		return "", "", err
	}
	var j backend.Job
	if err := json.Unmarshal(rec.Data, &j); err != nil {
		return "", "", err
	}
	return j.Machine, j.State, nil
}

// RotateSystemSecret replaces the system Secret, which kills every token
// (docs/design.md §8.4), and drops the cache.
func (s *SecretCache) RotateSystemSecret(ctx context.Context) error {
	if err := s.st.SetSetting(ctx, SettingSystemSecret, NewSecret()); err != nil {
		return err
	}
	s.Reset()
	return nil
}
