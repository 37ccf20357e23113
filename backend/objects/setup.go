package objects

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/provgate/provgate/backend"
)

// Settings that belong to secure params.
const (
	// SettingSecureKey holds the AES-256 key of secure params (base64).
	SettingSecureKey = "secure_param_key"
	// SettingSecureSeal records that every secure param is sealed to its
	// object (MigrateSecureParams has run to the end).
	SettingSecureSeal = "secure_param_seal"
)

// SecureKey returns the key of secure params (Options.SecureKey), made on
// the first start with an empty store and shared by every replica.
func SecureKey(ctx context.Context, st backend.Settings) ([]byte, error) {
	sk, err := st.EnsureSetting(ctx, SettingSecureKey, backend.NewKey)
	if err != nil {
		return nil, fmt.Errorf("secure param key: %w", err)
	}
	key, ok := backend.DecodeKey(sk)
	if !ok || len(key) != backend.KeySize { // AES-256 takes exactly this size
		return nil, errors.New("secure param key setting is corrupt")
	}
	return key, nil
}

// MigrateSecureParamsOnce runs MigrateSecureParams once per store: the
// setting SettingSecureSeal records that it ran to the end.
func (s *Params) MigrateSecureParamsOnce(ctx context.Context, st backend.Settings) error {
	ctx = backend.WithSystem(ctx) // start-up work: no caller (docs/design.md §2.3)
	const done = "object-bound"
	if v, _, err := st.GetSetting(ctx, SettingSecureSeal); err != nil {
		return err
	} else if v == done {
		return nil
	}
	n, err := s.MigrateSecureParams(ctx)
	if err != nil {
		return fmt.Errorf("secure params: %w", err)
	}
	if n > 0 {
		s.log.Info("secure params re-sealed to their objects", "count", n)
	}
	return st.SetSetting(ctx, SettingSecureSeal, done)
}

// SealParam makes the param definition name Secure when it is not, and
// seals the values plugins hold of it in the clear: a value stored in the
// clear would otherwise still be shown to every reader. Running it again
// changes nothing.
func (s *Params) SealParam(ctx context.Context, name string) error {
	rec, err := s.st.Get(ctx, backend.PrefixParams, name)
	if err != nil {
		return err
	}
	var def backend.Param
	if err := json.Unmarshal(rec.Data, &def); err != nil {
		return err
	}
	if !def.Secure {
		if _, err := s.objects.Patch(ctx, backend.PrefixParams, name, []byte(`[{"op":"replace","path":"/Secure","value":true}]`), false); err != nil {
			return err
		}
	}
	recs, _, _, err := s.st.List(ctx, backend.PrefixPlugins, backend.Query{Limit: -1})
	if err != nil {
		return err
	}
	for _, r := range recs {
		var p backend.Plugin
		if err := json.Unmarshal(r.Data, &p); err != nil {
			return fmt.Errorf("plugins/%s: %w", r.Key, err)
		}
		v, ok := p.Params[name]
		if !ok {
			continue
		}
		if _, sealed := asSecureData(v); sealed {
			continue
		}
		// Unchanged values are not sealed again on save, so the clear value
		// is removed and set anew, in one transaction.
		err := s.inTx(ctx, func(ctx context.Context) error {
			if _, err := s.deleteParam(ctx, backend.PrefixPlugins, p.Name, name); err != nil {
				return err
			}
			_, err := s.setParam(ctx, backend.PrefixPlugins, p.Name, name, v)
			return err
		})
		if err != nil {
			return fmt.Errorf("sealing plugins/%s: %w", p.Name, err)
		}
	}
	return nil
}
