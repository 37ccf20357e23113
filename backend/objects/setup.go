package objects

import (
	"context"
	"crypto/rand"
	"encoding/base64"
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

// Settings keeps server settings; *store.Store satisfies it.
type Settings interface {
	GetSetting(ctx context.Context, name string) (string, bool, error)
	SetSetting(ctx context.Context, name, value string) error
	// EnsureSetting returns a setting, creating it with mk when absent.
	EnsureSetting(ctx context.Context, name string, mk func() string) (string, error)
}

// SecureKey returns the key of secure params (Options.SecureKey), made on
// the first start with an empty store and shared by every replica.
func SecureKey(ctx context.Context, st Settings) ([]byte, error) {
	sk, err := st.EnsureSetting(ctx, SettingSecureKey, func() string {
		b := make([]byte, 32)
		_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms
		return base64.StdEncoding.EncodeToString(b)
	})
	if err != nil {
		return nil, fmt.Errorf("secure param key: %w", err)
	}
	key, err := base64.StdEncoding.DecodeString(sk)
	if err != nil || len(key) != 32 {
		return nil, errors.New("secure param key setting is corrupt")
	}
	return key, nil
}

// AdminUser is the first administrator Bootstrap creates.
const AdminUser = "rocketskates"

// Bootstrap creates the superuser role and the user AdminUser, with the
// password password returns, on the first start with an empty store
// (docs/design.md §15.2). It does nothing when any user exists, so later
// starts never touch them; password is called only when the user is made.
func (s *Service) Bootstrap(ctx context.Context, password func() (string, error)) (created bool, err error) {
	_, total, _, err := s.st.List(ctx, backend.PrefixUsers, backend.Query{Limit: 1})
	if err != nil {
		return false, err
	}
	if total > 0 {
		return false, nil
	}
	if _, err := s.st.Get(ctx, backend.PrefixRoles, "superuser"); backend.IsCode(err, backend.ENOTFOUND) {
		role, err := json.Marshal(backend.Role{Name: "superuser", Description: "every right",
			Claims: []backend.Claim{{Scope: "*", Action: "*", Specific: "*"}}})
		if err != nil {
			return false, err
		}
		if _, err := s.Create(ctx, backend.PrefixRoles, role); err != nil && !backend.IsCode(err, backend.ECONFLICT) {
			return false, fmt.Errorf("bootstrap role superuser: %w", err)
		}
	} else if err != nil {
		return false, err
	}
	pw, err := password()
	if err != nil {
		return false, err
	}
	user, err := json.Marshal(map[string]any{"Name": AdminUser, "Roles": []string{"superuser"}, "Password": pw,
		"Description": "first administrator"})
	if err != nil {
		return false, err
	}
	if _, err := s.Create(ctx, backend.PrefixUsers, user); err != nil && !backend.IsCode(err, backend.ECONFLICT) {
		return false, fmt.Errorf("bootstrap user %s: %w", AdminUser, err)
	}
	s.log.Info("created role superuser and user " + AdminUser)
	return true, nil
}

// MigrateSecureParamsOnce runs MigrateSecureParams once per store: the
// setting SettingSecureSeal records that it ran to the end.
func (s *Service) MigrateSecureParamsOnce(ctx context.Context, st Settings) error {
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
func (s *Service) SealParam(ctx context.Context, name string) error {
	rec, err := s.st.Get(ctx, backend.PrefixParams, name)
	if err != nil {
		return err
	}
	var def backend.Param
	if err := json.Unmarshal(rec.Data, &def); err != nil {
		return err
	}
	if !def.Secure {
		if _, err := s.Patch(ctx, backend.PrefixParams, name, []byte(`[{"op":"replace","path":"/Secure","value":true}]`), false); err != nil {
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
		err := s.InTx(ctx, func(ctx context.Context) error {
			if _, err := s.DeleteParam(ctx, backend.PrefixPlugins, p.Name, name); err != nil {
				return err
			}
			_, err := s.SetParam(ctx, backend.PrefixPlugins, p.Name, name, v)
			return err
		})
		if err != nil {
			return fmt.Errorf("sealing plugins/%s: %w", p.Name, err)
		}
	}
	return nil
}

// RotateSecret gives user name a new Secret, which kills every token of
// the user (docs/design.md §8.4).
func (s *Service) RotateSecret(ctx context.Context, name string) error {
	_, err := s.mutate(ctx, backend.KindOf(backend.PrefixUsers), name, "POST", "update", false, func(_ context.Context, old backend.Model) (backend.Model, error) {
		u := clone(old).(*backend.User)
		u.Secret = s.newSecret()
		return u, nil
	})
	return err
}
