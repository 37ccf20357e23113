package backend

import (
	"context"
	"crypto/rand"
	"encoding/base64"
)

// Settings keeps named server settings, shared by every replica through the
// store; *store.Store satisfies it.
type Settings interface {
	GetSetting(ctx context.Context, name string) (string, bool, error)
	SetSetting(ctx context.Context, name, value string) error
	// EnsureSetting returns a setting, creating it with mk when absent.
	EnsureSetting(ctx context.Context, name string, mk func() string) (string, error)
}

// KeySize is the size in bytes of the keys NewKey makes: 256 bits.
const KeySize = 32

// NewKey is a fresh random key as a setting holds it (base64), for
// EnsureSetting: the token key, the key of secure params.
func NewKey() string {
	b := make([]byte, KeySize)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms
	return base64.StdEncoding.EncodeToString(b)
}

// DecodeKey reads a key setting that NewKey made: false when the setting is
// not base64 of at least KeySize bytes.
func DecodeKey(v string) ([]byte, bool) {
	key, err := base64.StdEncoding.DecodeString(v)
	if err != nil || len(key) < KeySize {
		return nil, false
	}
	return key, true
}
