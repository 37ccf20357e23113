package objects

import (
	"context"
	"fmt"

	"github.com/provgate/provgate/backend"
)

// maxInUse bounds the references named in one error.
const maxInUse = 10

// Delete removes prefix/key and returns the deleted object, sanitized. It is
// refused as a conflict (StillInUseError) while other objects reference it (a role
// held by a user, a tenant with Users, a pool with machines, a profile,
// stage, workflow, bootenv or task still used), as a conflict "Locked" for
// a locked machine, and as invalid for a job not in a final state. The key is
// removed from every tenant's Members (and a deleted user from tenants'
// Users) in the same transaction.
func (s *CRUD) Delete(ctx context.Context, prefix, key string) (backend.Model, error) {
	k, err := s.kinds.Lookup(prefix)
	if err != nil {
		return nil, err
	}
	var out backend.Model
	err = s.inTx(ctx, func(ctx context.Context) error {
		rec, m, err := s.read(ctx, k, key, backend.DeleteOp)
		if err != nil {
			return err
		}
		r := s.rulesOf(prefix)
		if err := s.checkDelete(ctx, r, m); err != nil {
			return err
		}
		if _, err := s.st.Delete(ctx, prefix, rec.Key); err != nil {
			if backend.IsCode(err, backend.ENOTFOUND) {
				return backend.NotFound(backend.DeleteOp, prefix, key)
			}
			return err
		}
		if err := s.dropFromTenants(ctx, prefix, rec.Key); err != nil {
			return err
		}
		if r.afterDelete != nil {
			if err := r.afterDelete(ctx, rec.Key); err != nil {
				return err
			}
		}
		emit(ctx, s.event(ctx, "delete", m, nil))
		out = m
		return nil
	})
	return sanitized(out, err)
}

// checkDelete refuses the delete of m for its kind's own reason, or while
// the references its kind lists name it (rules.go).
func (s *core) checkDelete(ctx context.Context, r *kindRules, m backend.Model) error {
	prefix, key := m.Prefix(), m.Key()
	if r.deletable != nil {
		if err := r.deletable(m); err != nil {
			return err
		}
	}
	// The refusal names the objects in the way that the caller may see and
	// only counts the others, so it never reveals a hidden object.
	var msgs []string
	hidden, named := 0, 0
	for _, ref := range r.inUse {
		users, err := s.listAll(ctx, ref.prefix, s.eq(ref.prefix, ref.index, key))
		if err != nil {
			return err
		}
		for _, u := range users {
			seen, err := backend.CanSee(ctx, ref.prefix, u.Key())
			if err != nil {
				return err
			}
			switch {
			case !seen:
				hidden++
			case named < maxInUse:
				named++
				msgs = append(msgs, fmt.Sprintf("In use by %s %s", ref.label, displayName(u)))
			case named == maxInUse:
				named++
				msgs = append(msgs, "...")
			}
		}
	}
	switch {
	case hidden == 1:
		msgs = append(msgs, "In use by 1 other object")
	case hidden > 1:
		msgs = append(msgs, fmt.Sprintf("In use by %d other objects", hidden))
	}
	if len(msgs) > 0 {
		return backend.NewError(backend.ECONFLICT, "StillInUseError", prefix, key, msgs...)
	}
	// A built-in object in use reports its users first, as DRP does for
	// the superuser role ("In use by User rocketskates").
	if m.Env().ReadOnly {
		return readOnly(backend.DeleteOp, prefix, key)
	}
	return nil
}

// displayName is what error messages call an object: machines by Name.
func displayName(m backend.Model) string {
	if mc, ok := m.(*backend.Machine); ok && mc.Name != "" {
		return mc.Name
	}
	return m.Key()
}

func without(list []string, s string) []string {
	out := make([]string, 0, len(list))
	for _, v := range list {
		if v != s {
			out = append(out, v)
		}
	}
	return out
}
