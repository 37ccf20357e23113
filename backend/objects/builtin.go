package objects

import (
	"bytes"
	"context"
	"fmt"

	"github.com/provgate/provgate/backend"
)

// Every DRP server has two read-only bootenvs: local (known machines boot
// from their own disk) and ignore (unknown machines do; OnlyUnknown, so no
// machine may be assigned it). Stages and machines name them, so they are
// stored objects like any other: listed, filtered, counted and referenced
// through the same paths. ReadOnly makes every write to them a refusal.
// provgate serves no boot files, so they carry no templates.
func builtinBootEnvs() []*backend.BootEnv {
	meta := func(icon string) map[string]string {
		return map[string]string{"color": "green", "feature-flags": "change-stage-v2", "icon": icon,
			"title": "Digital Rebar Provision"}
	}
	return []*backend.BootEnv{
		{
			Name:        "ignore",
			Description: "The boot environment you should use to have unknown machines boot off their local hard drive",
			OS:          map[string]any{"Name": "ignore"},
			OnlyUnknown: true,
			Envelope:    backend.Envelope{Meta: meta("circle thin"), Bundle: "BasicStore"},
		},
		{
			Name:        "local",
			Description: "The boot environment you should use to have known machines boot off their local hard drive",
			OS:          map[string]any{"Name": "local"},
			Envelope:    backend.Envelope{Meta: meta("radio"), Bundle: "BasicStore"},
		},
	}
}

// builtinRoles: the role superuser holds only the superuser claim (the
// product spec's default role). It is read-only, so no request can empty
// it and lock every administrator out; a copy changed by an older server
// is put back on the next start.
func builtinRoles() []*backend.Role {
	return []*backend.Role{{Name: "superuser", Description: "every right",
		Claims: []backend.Claim{{Scope: "*", Action: "*", Specific: "*"}}}}
}

// builtins are every built-in object.
func builtins() []backend.Model {
	var out []backend.Model
	for _, b := range builtinBootEnvs() {
		out = append(out, b)
	}
	for _, r := range builtinRoles() {
		out = append(out, r)
	}
	return out
}

// InstallBuiltins stores the built-in objects, or puts them back as they
// must be when a stored copy differs (an older server let clients create or
// edit a bootenv of that name, or change the superuser role). It is
// idempotent and safe for several replicas starting together.
func (s *CRUD) InstallBuiltins(ctx context.Context) error {
	ctx = backend.WithSystem(ctx) // start-up work: no caller (docs/design.md §2.3)
	for _, b := range builtins() {
		b.Fill()
		b.Env().ReadOnly = true
		b.Env().SetValid(nil)
		data, err := encode(b)
		if err != nil {
			return err
		}
		err = s.inTx(ctx, func(ctx context.Context) error {
			rec, err := s.st.Get(ctx, b.Prefix(), b.Key())
			switch {
			case backend.IsCode(err, backend.ENOTFOUND):
				if _, err := s.st.Create(ctx, b.Prefix(), b.Key(), data); err != nil {
					return err
				}
				emit(ctx, s.event(ctx, "create", b, nil))
				return nil
			case err != nil:
				return err
			}
			old, err := decodeRecord(s.kinds.Kind(b.Prefix()), rec.Data)
			if err != nil {
				return err
			}
			if cur, err := encode(old); err == nil && bytes.Equal(cur, data) {
				return nil
			}
			if _, err := s.st.Update(ctx, b.Prefix(), b.Key(), rec.Rev, data); err != nil {
				return err
			}
			emit(ctx, s.event(ctx, "update", b, old))
			return nil
		})
		if err != nil && !backend.IsCode(err, backend.ECONFLICT) {
			// A conflict is another replica installing the same object.
			return fmt.Errorf("built-in %s/%s: %w", b.Prefix(), b.Key(), err)
		}
	}
	return nil
}
