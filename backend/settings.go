package backend

import "context"

// Settings keeps named server settings, shared by every replica through the
// store; *store.Store satisfies it.
type Settings interface {
	GetSetting(ctx context.Context, name string) (string, bool, error)
	SetSetting(ctx context.Context, name, value string) error
	// EnsureSetting returns a setting, creating it with mk when absent.
	EnsureSetting(ctx context.Context, name string, mk func() string) (string, error)
}
