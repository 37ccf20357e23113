package objects

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/provgate/provgate/backend"
)

// Create decodes body as a prefix object (drpcli's zero-valued, null-laden
// bodies are fine), fills defaults, validates and stores it, and returns it
// sanitized. Defaults: machines get a Uuid when "", a Secret when empty and
// Runnable true (DRP makes every new machine runnable; drpcli always sends
// false); users get a Secret, and a "Password" member (a provgate
// extension) is hashed into PasswordHash. Empty key: bad request, CreateOp,
// "Empty key not allowed"; duplicate: conflict, CreateOp, "already exists". When ctx carries the
// caller's tenant (WithTenant) and that tenant restricts the scope, the new
// key is added to its Members in the same transaction. Jobs are created with
// CreateJob.
func (s *CRUD) Create(ctx context.Context, prefix string, body []byte) (backend.Model, error) {
	k, err := s.kinds.Lookup(prefix)
	if err != nil {
		return nil, err
	}
	if prefix == "jobs" {
		return nil, backend.OpError(backend.EBADREQUEST, backend.ActionOp, prefix, "", "jobs are created with CreateJob")
	}
	m := k.New()
	if err := json.Unmarshal(body, m); err != nil {
		return nil, bodyError(backend.ActionOp, prefix, "", err)
	}
	m.Fill()
	// ReadOnly marks built-in objects (InstallBuiltins); what a client
	// sends is advisory, as DRP treats it.
	m.Env().ReadOnly = false
	if r := s.rulesOf(prefix); r.defaults != nil {
		if err := r.defaults(m, body); err != nil {
			return nil, err
		}
	}
	if m.Key() == "" {
		return nil, backend.OpError(backend.EBADREQUEST, backend.CreateOp, prefix, "", "Empty key not allowed")
	}
	err = s.inTx(ctx, func(ctx context.Context) error {
		if err := s.prepare(ctx, m, nil); err != nil {
			return err
		}
		data, err := encode(m)
		if err != nil {
			return err
		}
		if _, err := s.st.Create(ctx, prefix, m.Key(), data); err != nil {
			if backend.IsCode(err, backend.ECONFLICT) {
				return backend.OpError(backend.ECONFLICT, backend.CreateOp, prefix, m.Key(), "already exists")
			}
			return err
		}
		emit(ctx, s.event(ctx, "create", m, nil))
		return s.addToTenant(ctx, backend.TenantFrom(ctx), prefix, m.Key(), prefix == backend.PrefixUsers)
	})
	return sanitized(m, err)
}

// createPassword hashes a "Password" member of a users create body and
// checks a given PasswordHash looks like a simple-scrypt string
// (N$r$p$salt$key).
func (s *CRUD) createPassword(u *backend.User, body []byte) error {
	var extra struct {
		Password *string `json:"Password"`
	}
	_ = json.Unmarshal(body, &extra)
	if extra.Password != nil && *extra.Password != "" {
		if s.hash == nil {
			return backend.OpError(backend.EUNAVAILABLE, backend.CreateOp, "users", u.Name, "Password hashing is not configured")
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
