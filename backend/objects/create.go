package objects

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/google/uuid"

	"github.com/provgate/provgate/backend"
)

// Create decodes body as a prefix object (drpcli's zero-valued, null-laden
// bodies are fine), fills defaults, validates and stores it, and returns it
// sanitized. Defaults: machines get a Uuid when "", a Secret when empty and
// Runnable true (DRP makes every new machine runnable; drpcli always sends
// false); users get a Secret, and a "Password" member (a provgate
// extension) is hashed into PasswordHash. Empty key: 400 CREATE "Empty key
// not allowed"; duplicate: 409 CREATE "already exists". When ctx carries the
// caller's tenant (WithTenant) and that tenant restricts the scope, the new
// key is added to its Members in the same transaction. Jobs are created with
// CreateJob.
func (s *Service) Create(ctx context.Context, prefix string, body []byte) (backend.Model, error) {
	k, err := backend.LookupKind(prefix)
	if err != nil {
		return nil, err
	}
	if prefix == "jobs" {
		return nil, backend.NewError(backend.EBADREQUEST, "POST", prefix, "", "jobs are created with CreateJob")
	}
	m := k.New()
	if err := json.Unmarshal(body, m); err != nil {
		return nil, bodyError("POST", prefix, "", err)
	}
	m.Fill()
	// ReadOnly marks built-in objects (InstallBuiltins); what a client
	// sends is advisory, as DRP treats it.
	m.Env().ReadOnly = false
	switch v := m.(type) {
	case *backend.Machine:
		if v.Uuid == "" {
			v.Uuid = uuid.NewString()
		}
		if v.Secret == "" {
			v.Secret = s.newSecret()
		}
		v.Runnable = true
	case *backend.User:
		if err := s.createPassword(v, body); err != nil {
			return nil, err
		}
		if v.Secret == "" {
			v.Secret = s.newSecret()
		}
	}
	if m.Key() == "" {
		return nil, backend.NewError(backend.EBADREQUEST, "CREATE", prefix, "", "Empty key not allowed")
	}
	err = s.InTx(ctx, func(ctx context.Context) error {
		if err := s.prepare(ctx, m, nil); err != nil {
			return err
		}
		data, err := encode(m)
		if err != nil {
			return err
		}
		if _, err := s.st.Create(ctx, prefix, m.Key(), data); err != nil {
			if backend.IsCode(err, backend.ECONFLICT) {
				return backend.NewError(backend.ECONFLICT, "CREATE", prefix, m.Key(), "already exists")
			}
			return err
		}
		emit(ctx, s.event(ctx, "create", m, nil))
		return s.addToTenant(ctx, backend.TenantFrom(ctx), prefix, m.Key())
	})
	if err != nil {
		return nil, err
	}
	backend.Sanitize(m)
	return m, nil
}

// createPassword hashes a "Password" member of a users create body and
// checks a given PasswordHash looks like a simple-scrypt string
// (N$r$p$salt$key).
func (s *Service) createPassword(u *backend.User, body []byte) error {
	var extra struct {
		Password *string `json:"Password"`
	}
	_ = json.Unmarshal(body, &extra)
	if extra.Password != nil && *extra.Password != "" {
		if s.hash == nil {
			return backend.NewError(backend.EUNAVAILABLE, "CREATE", "users", u.Name, "Password hashing is not configured")
		}
		h, err := s.hash(*extra.Password)
		if err != nil {
			return err
		}
		u.PasswordHash = h
		return nil
	}
	if len(u.PasswordHash) > 0 && len(strings.Split(string(u.PasswordHash), "$")) != 5 {
		return backend.NewError(backend.EINVALID, "ValidationError", "users", u.Name,
			"Invalid PasswordHash: must be the base64 of a scrypt hash string")
	}
	return nil
}

// SetPassword hashes password into name's PasswordHash and rotates the
// user's Secret, which revokes every token the user holds or granted
// (docs/design.md §4.8).
func (s *Service) SetPassword(ctx context.Context, name, password string) (*backend.User, error) {
	if s.hash == nil {
		return nil, backend.NewError(backend.EUNAVAILABLE, "PUT", "users", name, "Password hashing is not configured")
	}
	h, err := s.hash(password)
	if err != nil {
		return nil, err
	}
	m, err := s.mutate(ctx, backend.KindOf("users"), name, "PUT", "update", false, func(_ context.Context, old backend.Model) (backend.Model, error) {
		u := clone(old).(*backend.User)
		u.PasswordHash = h
		u.Secret = s.newSecret()
		return u, nil
	})
	if err != nil {
		return nil, err
	}
	u := m.(*backend.User)
	u.Sanitize()
	return u, nil
}

// PasswordHash returns a user's stored hash, for the gateway's password
// check; it never leaves the server.
func (s *Service) PasswordHash(ctx context.Context, name string) ([]byte, string, error) {
	_, m, err := s.read(ctx, backend.KindOf("users"), name, "GET")
	if err != nil {
		return nil, "", err
	}
	u := m.(*backend.User)
	return u.PasswordHash, u.Secret, nil
}

// addToTenant appends key to tenant's Members[prefix] when the tenant
// restricts that scope (docs/design.md §6).
func (s *Service) addToTenant(ctx context.Context, tenant, prefix, key string) error {
	if tenant == "" {
		return nil
	}
	rec, err := s.st.Get(ctx, "tenants", tenant)
	if err != nil {
		if backend.IsCode(err, backend.ENOTFOUND) {
			return nil
		}
		return err
	}
	tm, err := decodeRecord(backend.KindOf("tenants"), rec.Data)
	if err != nil {
		return err
	}
	t := tm.(*backend.Tenant)
	list, ok := t.Members[prefix]
	if !ok || contains(list, key) {
		return nil
	}
	old := clone(t)
	t.Members[prefix] = append(list, key)
	return s.writeTenant(ctx, rec.Key, rec.Rev, old, t)
}

func (s *Service) writeTenant(ctx context.Context, key string, rev int64, old, t backend.Model) error {
	data, err := encode(t)
	if err != nil {
		return err
	}
	if _, err := s.st.Update(ctx, "tenants", key, rev, data); err != nil {
		return err
	}
	emit(ctx, s.event(ctx, "update", t, old))
	return nil
}
