package objects

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"unicode"

	"github.com/provgate/provgate/backend"
)

// paramsOf returns the Params map of the kinds that have one.
func paramsOf(m backend.Model) *map[string]any {
	switch v := m.(type) {
	case *backend.Machine:
		return &v.Params
	case *backend.Profile:
		return &v.Params
	case *backend.Stage:
		return &v.Params
	case *backend.Plugin:
		return &v.Params
	}
	return nil
}

// paramDefs caches Param definitions for the duration of one operation.
type paramDefs struct {
	s    *core
	defs map[string]*backend.Param
}

func (s *Params) newParamDefs() *paramDefs {
	return &paramDefs{s: s.core, defs: map[string]*backend.Param{}}
}

// get returns the definition of param name as the caller sees it: a
// definition the caller may not see is absent (no schema, no sealing), so a
// write never reveals it.
func (d *paramDefs) get(ctx context.Context, name string) (*backend.Param, error) {
	if p, ok := d.defs[name]; ok {
		return p, nil
	}
	ok, err := backend.CanSee(ctx, "params", name)
	if err != nil {
		return nil, err
	}
	if !ok {
		d.defs[name] = nil
		return nil, nil
	}
	m, err := d.s.load(ctx, "params", name)
	if err != nil {
		return nil, err
	}
	var p *backend.Param
	if m != nil {
		p = m.(*backend.Param)
	}
	d.defs[name] = p
	return p, nil
}

// prepareParams checks the keys of m's Params, encrypts values of secure
// params and validates changed values against their param's Schema. Values
// equal to the stored ones are not re-checked, so tightening a schema does
// not block unrelated updates. A changed value that is one of this server's
// sealed envelopes must have been sealed for this very object and param,
// whatever the param's definition: a sealed value cannot be carried to
// another object and opened there.
func (s *Params) prepareParams(ctx context.Context, m, old backend.Model, c *check) error {
	pp := paramsOf(m)
	if pp == nil {
		return nil
	}
	var oldParams map[string]any
	if old != nil {
		if op := paramsOf(old); op != nil {
			oldParams = *op
		}
	}
	params := *pp
	defs := s.newParamDefs()
	for _, name := range slices.Sorted(maps.Keys(params)) {
		v := params[name]
		// DRP checks Params keys against the param name rule only on
		// plugins (§7.1); machines and profiles observably hold short keys
		// such as "a". Control characters are refused everywhere: no
		// param rule admits them, and PostgreSQL cannot store a NUL.
		if name == "" || strings.IndexFunc(name, unicode.IsControl) >= 0 ||
			(m.Prefix() == "plugins" && !backend.ValidParamName(name)) {
			c.bad("Invalid Param Name `%s`", name)
			continue
		}
		if ov, ok := oldParams[name]; ok && reflect.DeepEqual(ov, v) {
			continue
		}
		at := binding{m.Prefix(), m.Key(), name}
		plain, sealed, refused := s.ownEnvelope(at, v)
		if refused {
			c.bad("Invalid secure value for param %s: it was not sealed for this object; send the clear value", name)
			continue
		}
		if !sealed {
			plain = v
		}
		def, err := defs.get(ctx, name)
		if err != nil {
			return err
		}
		if def == nil {
			continue
		}
		if def.Secure && !sealed {
			if s.sec == nil {
				return backend.NewError(backend.EUNAVAILABLE, "ValidationError", "params", name,
					"Secure params are not configured on this server")
			}
			if bv, ok := asBoxed(v); ok {
				// Sealed by a DRP client with this object's public key.
				opened, err := s.sec.openBoxed(m.Prefix(), m.Key(), bv)
				if err != nil {
					c.bad("Invalid secure value for param %s: it was not sealed with this object's public key (GET .../pubkey)", name)
					continue
				}
				v, plain = opened, opened
			} else if _, ok := asSecureData(v); ok {
				c.bad("Invalid secure value for param %s: encrypted with another key; send the clear value", name)
				continue
			}
			stored, err := s.sec.seal(at, v)
			if err != nil {
				return err
			}
			params[name] = stored
		}
		if err := s.schemas.validateValue(def.Schema, plain); err != nil {
			if m.Prefix() == "plugins" {
				// A plugin's params are its provider's configuration: an
				// invalid one is saved and reported in Errors, leaving the
				// plugin unavailable (docs/design.md §12.1).
				c.warn("Invalid value for param %s: %s", name, schemaError(err))
				continue
			}
			c.bad("Invalid value for param %s: %s", name, schemaError(err))
		}
	}
	return nil
}

// paramsKind is prefix's kind for operation op on key's params: an
// unknown kind, or one without params, is not found.
func (s *Params) paramsKind(prefix string, op backend.Operation, key string) (*backend.Kind, error) {
	k, err := s.kinds.Lookup(prefix)
	if err != nil {
		return nil, err
	}
	if !k.HasParams {
		return nil, backend.OpError(backend.ENOTFOUND, op, k.Prefix, key, k.Prefix+" have no params")
	}
	return k, nil
}

// readWithParams reads prefix/key, an object of a kind with params.
func (s *Params) readWithParams(ctx context.Context, prefix, key string) (backend.Model, error) {
	k, err := s.paramsKind(prefix, backend.ReadOp, key)
	if err != nil {
		return nil, err
	}
	_, m, err := s.read(ctx, k, key, backend.ReadOp)
	return m, err
}

// Params returns the params of prefix/key (machines, profiles, stages,
// plugins) as JSON values. aggregate merges in profiles, stage, global
// profile and schema defaults; decode decrypts secure values (the caller
// checks getSecure).
func (s *Params) Params(ctx context.Context, prefix, key string, aggregate, decode bool) (map[string]json.RawMessage, error) {
	p, err := s.params(ctx, prefix, key, aggregate, decode)
	if err != nil {
		return nil, err
	}
	return backend.EncodeParams(p)
}

func (s *Params) params(ctx context.Context, prefix, key string, aggregate, decode bool) (map[string]any, error) {
	m, err := s.readWithParams(ctx, prefix, key)
	if err != nil {
		return nil, err
	}
	return s.paramsView(ctx, m, aggregate, decode)
}

func (s *Params) paramsView(ctx context.Context, m backend.Model, aggregate, decode bool) (map[string]any, error) {
	if aggregate {
		return s.aggregate(ctx, m, decode)
	}
	out := map[string]any{}
	for k, v := range *paramsOf(m) {
		if decode {
			v = s.openValue(binding{m.Prefix(), m.Key(), k}, v)
		}
		out[k] = v
	}
	return out, nil
}

// GetParam returns one param value of prefix/key, JSON null when it is not
// set (docs/design.md §3.9).
func (s *Params) GetParam(ctx context.Context, prefix, key, name string, aggregate, decode bool) (json.RawMessage, error) {
	params, err := s.params(ctx, prefix, key, aggregate, decode)
	if err != nil {
		return nil, err
	}
	return encodeValue(params[name])
}

// SetParam sets one param to the JSON value and returns its stored value
// (the encrypted envelope for a secure param).
func (s *Params) SetParam(ctx context.Context, prefix, key, name string, value json.RawMessage) (json.RawMessage, error) {
	var v any
	if err := json.Unmarshal(value, &v); err != nil {
		return nil, bodyError(backend.ActionOp, prefix, key, err)
	}
	stored, err := s.setParam(ctx, prefix, key, name, v)
	if err != nil {
		return nil, err
	}
	return encodeValue(stored)
}

func (s *Params) setParam(ctx context.Context, prefix, key, name string, value any) (any, error) {
	if name == "" {
		return nil, backend.NewError(backend.EINVALID, "ValidationError", prefix, key, "Invalid Param Name ``")
	}
	m, err := s.mutateParams(ctx, prefix, key, backend.ActionOp, func(p map[string]any) (map[string]any, error) {
		p[name] = value
		return p, nil
	})
	if err != nil {
		return nil, err
	}
	return (*paramsOf(m))[name], nil
}

// SetParams replaces all params of prefix/key with the JSON object params
// (null for none) and returns the stored map.
func (s *Params) SetParams(ctx context.Context, prefix, key string, params json.RawMessage) (map[string]json.RawMessage, error) {
	var next map[string]any
	if err := json.Unmarshal(params, &next); err != nil {
		return nil, bodyError(backend.ActionOp, prefix, key, err)
	}
	m, err := s.mutateParams(ctx, prefix, key, backend.ActionOp, func(map[string]any) (map[string]any, error) {
		if next == nil {
			return map[string]any{}, nil
		}
		return next, nil
	})
	if err != nil {
		return nil, err
	}
	return backend.EncodeParams(*paramsOf(m))
}

// PatchParams applies a JSON Patch to the params map of prefix/key (drpcli's
// "add param" sends a whole-map test plus an add) and returns the new map.
func (s *Params) PatchParams(ctx context.Context, prefix, key string, patch []byte) (map[string]json.RawMessage, error) {
	p, _, err := parsePatch(patch, prefix, key)
	if err != nil {
		return nil, err
	}
	m, err := s.mutateParams(ctx, prefix, key, backend.PatchOp, func(cur map[string]any) (map[string]any, error) {
		if len(p) == 0 {
			return cur, nil
		}
		doc, err := json.Marshal(cur)
		if err != nil {
			return nil, err
		}
		out, err := applyPatch(p, doc, prefix, key)
		if err != nil {
			return nil, err
		}
		var next map[string]any
		if err := json.Unmarshal(out, &next); err != nil || next == nil {
			return nil, backend.NewError(backend.EINVALID, "ValidationError", prefix, key, "Params must be an object")
		}
		return next, nil
	})
	if err != nil {
		return nil, err
	}
	return backend.EncodeParams(*paramsOf(m))
}

// DeleteParam removes one param and returns its old (stored) value; not
// found (a delete of Model params, Key name) when it is not set.
func (s *Params) DeleteParam(ctx context.Context, prefix, key, name string) (json.RawMessage, error) {
	old, err := s.deleteParam(ctx, prefix, key, name)
	if err != nil {
		return nil, err
	}
	return encodeValue(old)
}

func (s *Params) deleteParam(ctx context.Context, prefix, key, name string) (any, error) {
	var old any
	_, err := s.mutateParams(ctx, prefix, key, backend.DeleteOp, func(p map[string]any) (map[string]any, error) {
		v, ok := p[name]
		if !ok {
			return nil, backend.NotFound(backend.DeleteOp, "params", name)
		}
		old = v
		delete(p, name)
		return p, nil
	})
	if err != nil {
		return nil, err
	}
	return old, nil
}

// encodeValue is one param value as JSON.
func encodeValue(v any) (json.RawMessage, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("objects: encode param value: %w", err)
	}
	return b, nil
}

func (s *Params) mutateParams(ctx context.Context, prefix, key string, op backend.Operation, fn func(map[string]any) (map[string]any, error)) (backend.Model, error) {
	k, err := s.paramsKind(prefix, op, key)
	if err != nil {
		return nil, err
	}
	return s.mutate(ctx, k, key, op, "update", false, func(_ context.Context, old backend.Model) (backend.Model, error) {
		m := clone(old)
		pp := paramsOf(m)
		cur := map[string]any{}
		for k, v := range *pp {
			cur[k] = v
		}
		next, err := fn(cur)
		if err != nil {
			return nil, err
		}
		*pp = next
		return m, nil
	})
}

// Aggregate returns a machine's effective params (DRP order, first wins):
// the machine's own, its profiles in order (each followed by its nested
// profiles), its stage's params and profiles, the global profile, then the
// defaults of param Schemas. decode decrypts secure values.
func (s *Params) Aggregate(ctx context.Context, m *backend.Machine, decode bool) (map[string]json.RawMessage, error) {
	p, err := s.aggregate(ctx, m, decode)
	if err != nil {
		return nil, err
	}
	return backend.EncodeParams(p)
}

func (s *Params) aggregate(ctx context.Context, m backend.Model, decode bool) (map[string]any, error) {
	out := map[string]any{}
	// from records where each value came from: a secure value opens only
	// with the binding of the object that holds it.
	from := map[string]binding{}
	merge := func(src backend.Model) {
		for k, v := range *paramsOf(src) {
			if _, ok := out[k]; !ok {
				out[k] = v
				from[k] = binding{src.Prefix(), src.Key(), k}
			}
		}
	}
	seen := map[string]bool{}
	var profiles func(names []string) error
	profiles = func(names []string) error {
		for _, n := range names {
			if seen[n] {
				continue
			}
			seen[n] = true
			pm, err := s.loadShared(ctx, "profiles", n)
			if err != nil {
				return err
			}
			if pm == nil {
				continue
			}
			p := pm.(*backend.Profile)
			merge(p)
			if err := profiles(p.Profiles); err != nil {
				return err
			}
		}
		return nil
	}
	merge(m)
	switch v := m.(type) {
	case *backend.Machine:
		if err := profiles(v.Profiles); err != nil {
			return nil, err
		}
		if v.Stage != "" {
			st, err := s.loadShared(ctx, "stages", v.Stage)
			if err != nil {
				return nil, err
			}
			if st != nil {
				merge(st)
				if err := profiles(st.(*backend.Stage).Profiles); err != nil {
					return nil, err
				}
			}
		}
		if err := profiles([]string{"global"}); err != nil {
			return nil, err
		}
	case *backend.Profile:
		seen[v.Name] = true
		if err := profiles(v.Profiles); err != nil {
			return nil, err
		}
	case *backend.Stage:
		if err := profiles(v.Profiles); err != nil {
			return nil, err
		}
	}
	defs, err := s.schemaDefaults(ctx)
	if err != nil {
		return nil, err
	}
	for name, dv := range defs {
		if _, ok := out[name]; !ok {
			// A schema default is a clear value, never opened.
			out[name] = dv
		}
	}
	if decode {
		for k, v := range out {
			if at, ok := from[k]; ok {
				out[k] = s.openValue(at, v)
			}
		}
	}
	return out, nil
}
