package objects

import (
	"context"
	"fmt"

	"github.com/provgate/provgate/backend"
)

// reference is one kind of object that can keep another from being deleted.
type reference struct {
	prefix, index, label string
}

// inUse lists, per prefix, the references that block a delete (a conflict,
// StillInUseError "In use by <Label> <name>").
var inUse = map[string][]reference{
	"roles":     {{"users", "Roles", "User"}},
	"profiles":  {{"machines", "Profiles", "Machine"}, {"profiles", "Profiles", "Profile"}, {"stages", "Profiles", "Stage"}},
	"stages":    {{"machines", "Stage", "Machine"}, {"workflows", "Stages", "Workflow"}},
	"workflows": {{"machines", "Workflow", "Machine"}},
	"bootenvs":  {{"machines", "BootEnv", "Machine"}, {"stages", "BootEnv", "Stage"}},
	"tasks":     {{"stages", "Tasks", "Stage"}},
	"pools":     {{"machines", "Pool", "Machine"}},
}

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
	k, err := backend.LookupKind(prefix)
	if err != nil {
		return nil, err
	}
	var out backend.Model
	err = s.inTx(ctx, func(ctx context.Context) error {
		rec, m, err := s.read(ctx, k, key, backend.DeleteOp)
		if err != nil {
			return err
		}
		if err := s.checkDelete(ctx, m); err != nil {
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
		if jl, ok := s.jobLogs.(interface {
			DeleteJobLog(ctx context.Context, uuid string) error
		}); ok && prefix == "jobs" {
			if err := jl.DeleteJobLog(ctx, rec.Key); err != nil {
				return err
			}
		}
		emit(ctx, s.event(ctx, "delete", m, nil))
		out = m
		return nil
	})
	if err != nil {
		return nil, err
	}
	backend.Sanitize(out)
	return out, nil
}

func (s *core) checkDelete(ctx context.Context, m backend.Model) error {
	prefix, key := m.Prefix(), m.Key()
	switch v := m.(type) {
	case *backend.Machine:
		if v.Locked {
			return backend.OpError(backend.ECONFLICT, backend.DeleteOp, prefix, key, "Locked")
		}
	case *backend.Job:
		if v.State != backend.JobFailed && v.State != backend.JobFinished {
			return backend.NewError(backend.EINVALID, "ValidationError", prefix, key,
				fmt.Sprintf("Jobs %s is not in a deletable state: %s", key, v.State))
		}
	case *backend.Tenant:
		if len(v.Users) > 0 {
			return backend.NewError(backend.ECONFLICT, "StillInUseError", prefix, key,
				fmt.Sprintf("Constraining Users: %v", v.Users))
		}
	}
	// The refusal names the objects in the way that the caller may see and
	// only counts the others, so it never reveals a hidden object.
	var msgs []string
	hidden, named := 0, 0
	for _, ref := range inUse[prefix] {
		users, err := s.listAll(ctx, ref.prefix, eq(ref.prefix, ref.index, key))
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
