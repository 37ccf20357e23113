// Package prefs keeps the server preferences (GET and PUT /prefs): their
// names, defaults and validation, stored as settings shared by every
// replica.
package prefs

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/provgate/provgate/backend"
)

// Preference names with a meaning to the server.
const (
	KnownTokenTimeout   = "knownTokenTimeout"   // seconds a known machine's token lives
	UnknownTokenTimeout = "unknownTokenTimeout" // seconds a discovery token lives
	DebugEnable         = "rs-debug-enable"     // callback debug logs (docs/design.md §12.8)
)

// settingPrefix prefixes a preference's name in the settings table.
const settingPrefix = "pref/"

// defaults are every known preference with its default, as DRP.
var defaults = map[string]string{
	KnownTokenTimeout:   "3600",
	UnknownTokenTimeout: "600",
	DebugEnable:         "false",
	"defaultWorkflow":   "",
	"defaultStage":      "none",
	"defaultBootEnv":    "local",
}

// Settings keeps server settings; *store.Store satisfies it.
type Settings interface {
	GetSetting(ctx context.Context, name string) (string, bool, error)
	SetSetting(ctx context.Context, name, value string) error
	InTx(ctx context.Context, fn func(ctx context.Context) error) error
}

// Service reads and writes the preferences.
type Service struct{ st Settings }

// New returns the preferences kept in st.
func New(st Settings) *Service { return &Service{st: st} }

// Prefs returns every preference, defaults filled in.
func (p *Service) Prefs(ctx context.Context) (map[string]string, error) {
	out := map[string]string{}
	for k, def := range defaults {
		v, ok, err := p.st.GetSetting(ctx, settingPrefix+k)
		if err != nil {
			return nil, err
		}
		if !ok {
			v = def
		}
		out[k] = v
	}
	return out, nil
}

// SetPrefs validates and stores in, all or nothing, and returns every
// preference. Unknown names and malformed values are refused.
func (p *Service) SetPrefs(ctx context.Context, in map[string]string) (map[string]string, error) {
	var v backend.ValidationErrors
	names := slices.Sorted(maps.Keys(in))
	for _, k := range names {
		val := in[k]
		if _, ok := defaults[k]; !ok {
			v.Add("Unknown Preference %s", k)
			continue
		}
		switch k {
		case KnownTokenTimeout, UnknownTokenTimeout:
			if n, err := strconv.Atoi(val); err != nil || n < 0 {
				v.Add("Preference %s: %q is not a number of seconds", k, val)
			}
		case DebugEnable:
			if _, err := strconv.ParseBool(val); err != nil {
				v.Add("Preference %s must be true or false", k)
			}
		}
	}
	if err := v.Err("preferences", ""); err != nil {
		return nil, err
	}
	err := p.st.InTx(ctx, func(ctx context.Context) error {
		for _, k := range names {
			if err := p.st.SetSetting(ctx, settingPrefix+k, in[k]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return p.Prefs(ctx)
}

// seconds reads a preference holding seconds; 0 when it cannot be read.
func (p *Service) seconds(ctx context.Context, name string) time.Duration {
	all, err := p.Prefs(ctx)
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(all[name])
	return time.Duration(n) * time.Second
}

// KnownTokenTTL is the lifetime of a known machine's token from a template.
func (p *Service) KnownTokenTTL(ctx context.Context) time.Duration {
	return p.seconds(ctx, KnownTokenTimeout)
}

// UnknownTokenTTL is the lifetime of a discovery token from a template.
func (p *Service) UnknownTokenTTL(ctx context.Context) time.Duration {
	return p.seconds(ctx, UnknownTokenTimeout)
}

// Debug reports rs-debug-enable; false when it cannot be read.
func (p *Service) Debug() bool {
	all, err := p.Prefs(context.Background())
	if err != nil {
		return false
	}
	b, _ := strconv.ParseBool(all[DebugEnable])
	return b
}
