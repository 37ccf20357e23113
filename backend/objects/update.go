package objects

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"

	"github.com/provgate/provgate/backend"
)

// Op is one parsed JSON Patch operation.
type Op struct {
	Op    string          `json:"op"`
	Path  string          `json:"path"`
	From  string          `json:"from,omitempty"`
	Value json.RawMessage `json:"value,omitempty"`
}

var patchOps = map[string]bool{"add": true, "remove": true, "replace": true, "move": true, "copy": true, "test": true}

// PatchOps parses an RFC 6902 patch the way Patch does (tolerating drpcli's
// "from":"" on every op), for callers that derive claims from it.
func PatchOps(patch []byte) ([]Op, error) {
	_, ops, err := parsePatch(patch, "", "")
	return ops, err
}

// parsePatch validates a patch document and returns it ready to apply. The
// "from" member is dropped from ops that do not use it: drpcli sends
// "from":"" on every op.
func parsePatch(patch []byte, prefix, key string) (jsonpatch.Patch, []Op, error) {
	bad := func(msg string) error {
		return backend.OpError(backend.EBADREQUEST, backend.PatchOp, prefix, key, msg)
	}
	if len(bytes.TrimSpace(patch)) == 0 {
		return nil, nil, nil
	}
	var raw []map[string]json.RawMessage
	if err := json.Unmarshal(patch, &raw); err != nil {
		return nil, nil, bodyError(backend.PatchOp, prefix, key, err)
	}
	ops := make([]Op, 0, len(raw))
	clean := make([]map[string]json.RawMessage, 0, len(raw))
	for i, r := range raw {
		var o Op
		if err := json.Unmarshal(r["op"], &o.Op); err != nil || !patchOps[o.Op] {
			return nil, nil, bad(fmt.Sprintf("Patch line %d: invalid op %s", i, string(r["op"])))
		}
		if err := json.Unmarshal(r["path"], &o.Path); err != nil {
			return nil, nil, bad(fmt.Sprintf("Patch line %d: path must be a string", i))
		}
		if !backend.ValidPointer(o.Path) {
			return nil, nil, bad(fmt.Sprintf("Patch line %d: invalid path %q", i, o.Path))
		}
		if o.Op == "move" || o.Op == "copy" {
			if err := json.Unmarshal(r["from"], &o.From); err != nil || !backend.ValidPointer(o.From) {
				return nil, nil, bad(fmt.Sprintf("Patch line %d: %s needs a valid from", i, o.Op))
			}
		} else {
			delete(r, "from")
		}
		if v, ok := r["value"]; ok {
			o.Value = v
		} else if o.Op == "add" || o.Op == "replace" || o.Op == "test" {
			return nil, nil, bad(fmt.Sprintf("Patch line %d: %s needs a value", i, o.Op))
		}
		ops = append(ops, o)
		clean = append(clean, r)
	}
	b, err := json.Marshal(clean)
	if err != nil {
		return nil, nil, err
	}
	p, err := jsonpatch.DecodePatch(b)
	if err != nil {
		return nil, nil, bad(err.Error())
	}
	return p, ops, nil
}

// applyPatch applies p, and names the line and path of a failure: a failed
// test is a conflict of PatchOp like DRP's "Patch failed to apply at line
// N". The whole patch is applied in one pass (the document parsed and
// written once); only a patch that fails is applied again op by op, to
// find the op that failed. Op by op, each op parses and writes the whole
// document: quadratic in the patch's size (1000 ops at most).
func applyPatch(p jsonpatch.Patch, doc []byte, prefix, key string) ([]byte, error) {
	opts := jsonpatch.NewApplyOptions()
	opts.EscapeHTML = false
	if out, err := p.ApplyWithOptions(doc, opts); err == nil {
		return out, nil
	}
	for i, op := range p {
		out, err := jsonpatch.Patch{op}.ApplyWithOptions(doc, opts)
		if err != nil {
			path, _ := op.Path()
			line := fmt.Sprintf("Patch failed to apply at line %d", i)
			var msg string
			switch {
			case errors.Is(err, jsonpatch.ErrTestFailed):
				msg = fmt.Sprintf("Test op failed at %q", path)
			case errors.Is(err, jsonpatch.ErrMissing), errors.Is(err, jsonpatch.ErrInvalidIndex):
				msg = fmt.Sprintf("%s op failed: path %q does not exist", op.Kind(), path)
			default:
				msg = fmt.Sprintf("%s op at %q failed: %s", op.Kind(), path, err.Error())
			}
			return nil, &backend.Error{Code: backend.ECONFLICT, Op: backend.PatchOp, Model: prefix, Key: key,
				Messages: []string{line, msg}, Err: err}
		}
		doc = out
	}
	return doc, nil
}

// secretEdits are patch ops on fields Get never shows (Secret, PasswordHash).
// They are taken out of the patch: writing Secret rotates it to a fresh
// random value, writing PasswordHash sets it (and rotates Secret).
type secretEdits struct {
	rotate   bool
	password []byte
}

func splitSecretOps(k *backend.Kind, p jsonpatch.Patch, prefix, key string) (jsonpatch.Patch, secretEdits, error) {
	var se secretEdits
	if k.Prefix != "users" && k.Prefix != "machines" {
		return p, se, nil
	}
	out := make(jsonpatch.Patch, 0, len(p))
	for i, op := range p {
		path, _ := op.Path()
		field := strings.SplitN(strings.TrimPrefix(path, "/"), "/", 2)[0]
		hidden := field == "Secret" || (k.Prefix == "users" && field == "PasswordHash")
		if path == "" && op.Kind() == "test" {
			op = dropBlankSecret(op)
		}
		if !hidden || path == "" {
			out = append(out, op)
			continue
		}
		switch op.Kind() {
		case "test":
			return nil, se, backend.OpError(backend.ECONFLICT, backend.PatchOp, prefix, key,
				fmt.Sprintf("Patch failed to apply at line %d", i), fmt.Sprintf("Test op failed at %q", path))
		case "add", "replace":
			if field == "PasswordHash" {
				var b []byte
				v, _ := op.ValueInterface()
				if sv, ok := v.(string); ok {
					b, _ = base64.StdEncoding.DecodeString(sv)
				}
				if path != "/PasswordHash" || len(b) == 0 {
					return nil, se, backend.NewError(backend.EINVALID, "ValidationError", prefix, key,
						"PasswordHash must be the base64 of a scrypt hash")
				}
				se.password = b
			}
			se.rotate = true
		case "remove":
			if field == "PasswordHash" {
				return nil, se, backend.NewError(backend.EINVALID, "ValidationError", prefix, key,
					"PasswordHash cannot be removed")
			}
			se.rotate = true
		default:
			return nil, se, backend.OpError(backend.ECONFLICT, backend.PatchOp, prefix, key,
				fmt.Sprintf("Patch failed to apply at line %d", i), fmt.Sprintf("%s op failed: path %q does not exist", op.Kind(), path))
		}
	}
	return out, se, nil
}

// dropBlankSecret removes a blank "Secret" from the value of a
// whole-document test. DRP's client models always carry that member, so
// drpcli's -r/--ref test (a reference object decoded into its model) holds
// "Secret":"" where Get shows no Secret; the blank value claims nothing.
// Any other Secret value is left, and the test fails.
func dropBlankSecret(op jsonpatch.Operation) jsonpatch.Operation {
	raw := op["value"]
	if raw == nil {
		return op
	}
	var doc map[string]json.RawMessage
	if json.Unmarshal(*raw, &doc) != nil || string(doc["Secret"]) != `""` {
		return op
	}
	delete(doc, "Secret")
	b, err := json.Marshal(doc)
	if err != nil {
		return op
	}
	v := json.RawMessage(b)
	out := jsonpatch.Operation{}
	for k, val := range op {
		out[k] = val
	}
	out["value"] = &v
	return out
}

// keepSecrets carries the hidden fields of old into m (which came from a
// sanitized document), applying requested rotations: the kind's secrets
// rule (rules.go).
func (s *core) keepSecrets(old, m backend.Model, se secretEdits) {
	if r := s.rulesOf(m.Prefix()); r.secrets != nil {
		r.secrets.keep(old, m, se)
	}
}

// Patch applies an RFC 6902 patch to prefix/key (native or "<Index>:<value>")
// and returns the sanitized result. test ops are honoured (a conflict naming
// the path when one fails); an empty patch returns the object unchanged. The
// patch sees the object as Get shows it, so Secret and PasswordHash can be
// neither read nor tested; writing Secret rotates it. The write is optimistic
// on the revision read and retried (patch re-applied to the fresh object) a
// few times. force is accepted for drpcli's ?force=true and currently
// relaxes nothing.
func (s *CRUD) Patch(ctx context.Context, prefix, key string, patch []byte, force bool) (backend.Model, error) {
	_ = force
	k, err := s.kinds.Lookup(prefix)
	if err != nil {
		return nil, err
	}
	p, _, err := parsePatch(patch, prefix, key)
	if err != nil {
		return nil, err
	}
	p, se, err := splitSecretOps(k, p, prefix, key)
	if err != nil {
		return nil, err
	}
	if len(p) == 0 && !se.rotate {
		m, _, err := s.getTyped(ctx, k, key, backend.PatchOp)
		return m, err
	}
	return sanitized(s.mutate(ctx, k, key, backend.PatchOp, "update", false, func(_ context.Context, old backend.Model) (backend.Model, error) {
		view := clone(old)
		backend.Sanitize(view)
		doc, err := encode(view)
		if err != nil {
			return nil, err
		}
		out, err := applyPatch(p, doc, prefix, old.Key())
		if err != nil {
			return nil, err
		}
		m := k.New()
		if err := json.Unmarshal(out, m); err != nil {
			return nil, resultError(prefix, old.Key(), err)
		}
		s.keepSecrets(old, m, se)
		return m, nil
	}))
}

func resultError(prefix, key string, err error) error {
	msg := err.Error()
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		msg = fmt.Sprintf("%s cannot hold a JSON %s", te.Field, te.Value)
	}
	return &backend.Error{Code: backend.EINVALID, Type: "ValidationError", Model: prefix, Key: key, Messages: []string{msg}, Err: err}
}

// Put replaces prefix/key with body (a full object) under the same rules as
// Patch: the key cannot change (an empty key in the body means the URL's),
// Secret and PasswordHash are kept unless the body sets them (a new Secret
// value rotates it to a fresh random one; a PasswordHash is taken as is).
func (s *CRUD) Put(ctx context.Context, prefix, key string, body []byte) (backend.Model, error) {
	k, err := s.kinds.Lookup(prefix)
	if err != nil {
		return nil, err
	}
	nm := k.New()
	if err := json.Unmarshal(body, nm); err != nil {
		return nil, bodyError(backend.ReplaceOp, prefix, key, err)
	}
	return sanitized(s.mutate(ctx, k, key, backend.ReplaceOp, "save", false, func(_ context.Context, old backend.Model) (backend.Model, error) {
		m := clone(nm)
		if m.Key() == "" {
			m.SetKey(old.Key())
		}
		var se secretEdits
		if r := s.rulesOf(prefix); r.secrets != nil {
			se = r.secrets.replaced(old, m)
		}
		s.keepSecrets(old, m, se)
		return m, nil
	}))
}

// mutate is the read-modify-write core of every update: in one transaction
// it reads prefix/key, lets fn build the new object, enforces immutable keys
// and machine locks, validates, writes with the revision read, runs the
// kind's side effects and queues the event. A write that lost a race
// (stale revision) is retried from the read. internal skips the lock check
// (job bookkeeping on a locked machine still happens).
func (s *core) mutate(ctx context.Context, k *backend.Kind, key string, op backend.Operation, action string, internal bool,
	fn func(ctx context.Context, old backend.Model) (backend.Model, error)) (backend.Model, error) {
	var out backend.Model
	for attempt := 0; ; attempt++ {
		stale := false
		err := s.inTx(ctx, func(ctx context.Context) error {
			rec, old, err := s.read(ctx, k, key, op)
			if err != nil {
				return err
			}
			m, err := fn(ctx, old)
			if err != nil {
				return err
			}
			m.Fill()
			if m.Key() != old.Key() {
				return backend.OpError(backend.EBADREQUEST, op, k.Prefix, old.Key(),
					fmt.Sprintf("Key change from %s to %s not allowed", old.Key(), m.Key()))
			}
			if old.Env().ReadOnly {
				return readOnly(op, k.Prefix, old.Key())
			}
			r := s.rulesOf(k.Prefix)
			if r.beforeWrite != nil {
				if err := r.beforeWrite(op, old, m, internal); err != nil {
					return err
				}
			}
			// ReadOnly marks built-in objects; a client's value is advisory.
			m.Env().ReadOnly = false
			if err := s.prepare(ctx, m, old); err != nil {
				return err
			}
			data, err := encode(m)
			if err != nil {
				return err
			}
			if _, err := s.st.Update(ctx, k.Prefix, rec.Key, rec.Rev, data); err != nil {
				if backend.IsCode(err, backend.ECONFLICT) {
					if cur, gerr := s.st.Get(ctx, k.Prefix, rec.Key); gerr == nil && cur.Rev != rec.Rev {
						stale = true
					}
					return backend.OpError(backend.ECONFLICT, op, k.Prefix, rec.Key,
						"Object changed while being updated; try again")
				}
				return err
			}
			// Side effects come after the object's own write, so a stale
			// retry never leaves other objects written twice.
			if r.afterWrite != nil {
				if err := r.afterWrite(ctx, old, m); err != nil {
					return err
				}
			}
			emit(ctx, s.event(ctx, action, m, old))
			out = m
			return nil
		})
		if err != nil && stale && attempt < s.retries {
			continue
		}
		return out, err
	}
}

// readOnly refuses a change to a built-in object (ReadOnly true), with the
// words DRP uses for writes to its read-only content ("readonly: local").
// DRP refuses PUT and PATCH as a bad request; provgate refuses a DELETE the
// same way rather than as not found, as DRP does, which would tell a client that an object it
// can still read has gone.
func readOnly(op backend.Operation, prefix, key string) error {
	return backend.OpError(backend.EBADREQUEST, op, prefix, key, "readonly: "+key)
}
