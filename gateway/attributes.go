package gateway

import (
	"bytes"
	"context"
	"encoding/json"

	jsonpatch "github.com/evanphx/json-patch/v5"

	"github.com/provgate/provgate/backend"
	"github.com/provgate/provgate/gateway/claims"
	"github.com/provgate/provgate/policies"
)

// needer is implemented by deciders that say which costly parts of the
// input their policy reads (policies/opa Engine.Needs). A decider that
// does not is given neither.
type needer interface {
	Needs() policies.Needs
}

// objectAttributes fills in.Stored and in.Proposed (docs/design.md §9.2)
// when the policy reads them: the addressed object as stored and as the
// request would leave it. Both come from the object service's reading,
// without PasswordHash and Secret, with every secure param value masked.
// A missing object leaves Stored out; the handler answers 404 as before.
// A store failure is returned: the request then fails closed.
func (s *authorizer) objectAttributes(ctx context.Context, r claims.Resolver, res claims.Result, body []byte, in *policies.Input) error {
	n, ok := s.policy.(needer)
	if !ok {
		return nil
	}
	needs := n.Needs()
	if !needs.Stored && !needs.Proposed {
		return nil
	}
	var stored map[string]any
	if res.Key != "" && res.Scope != "" {
		raw, err := r.Current(ctx, res.Scope, res.Key)
		switch {
		case backend.IsCode(err, backend.ENOTFOUND):
		case err != nil:
			return err
		default:
			if stored, err = decodeObject(raw); err != nil {
				return err
			}
		}
	}
	var proposed map[string]any
	if needs.Proposed {
		var err error
		if proposed, err = propose(res, stored, body); err != nil {
			return err
		}
	}
	if needs.Stored && stored != nil {
		in.Stored = maskSecure(ctx, r, stored, nil)
	}
	if proposed != nil {
		in.Proposed = maskSecure(ctx, r, proposed, stored)
	}
	return nil
}

// propose is the object after the write res describes, or nil when the
// request writes none or its body does not apply (the handler then answers
// the error, whatever the policy decides).
func propose(res claims.Result, stored map[string]any, body []byte) (map[string]any, error) {
	switch res.Proposal {
	case claims.ProposeBody:
		m, err := decodeObject(body)
		if err != nil {
			return nil, nil
		}
		return m, nil
	case claims.ProposePatch, claims.ProposeParams, claims.ProposeParam:
	default:
		return nil, nil
	}
	if stored == nil {
		return nil, nil
	}
	doc, err := json.Marshal(stored)
	if err != nil {
		return nil, err
	}
	if res.Proposal != claims.ProposePatch && len(bytes.TrimSpace(body)) > 0 && !json.Valid(body) {
		return nil, nil
	}
	var patch []byte
	switch res.Proposal {
	case claims.ProposePatch:
		ops, err := jsonpatch.DecodePatch(body)
		if err != nil {
			return nil, nil
		}
		// A patch of /meta or /params applies to that part of the object:
		// its pointers are moved under the root, as the handler does.
		if res.PatchRoot != "" {
			for _, op := range ops {
				for _, k := range []string{"path", "from"} {
					if p, ok := op[k]; ok && p != nil {
						var ptr string
						if json.Unmarshal(*p, &ptr) == nil {
							moved, _ := json.Marshal(res.PatchRoot + ptr)
							raw := json.RawMessage(moved)
							op[k] = &raw
						}
					}
				}
			}
		}
		out, err := ops.ApplyWithOptions(doc, &jsonpatch.ApplyOptions{EnsurePathExistsOnAdd: true})
		if err != nil {
			return nil, nil
		}
		return decodeObject(out)
	case claims.ProposeParams:
		patch, _ = json.Marshal([]map[string]any{{"op": "add", "path": "/Params", "value": json.RawMessage(body)}})
	case claims.ProposeParam:
		ptr := "/Params/" + backend.EscapePointer(res.Name)
		if len(bytes.TrimSpace(body)) == 0 {
			patch, _ = json.Marshal([]map[string]any{{"op": "remove", "path": ptr}})
		} else {
			patch, _ = json.Marshal([]map[string]any{{"op": "add", "path": ptr, "value": json.RawMessage(body)}})
		}
	}
	ops, err := jsonpatch.DecodePatch(patch)
	if err != nil {
		return nil, nil
	}
	out, err := ops.ApplyWithOptions(doc, &jsonpatch.ApplyOptions{EnsurePathExistsOnAdd: true})
	if err != nil {
		return nil, nil
	}
	return decodeObject(out)
}

// decodeObject decodes a JSON object, keeping numbers exact.
func decodeObject(raw []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	return m, nil
}

// maskSecure replaces credentials and the value of every secure param of
// obj with policies.MaskedValue: sealed values as stored ({Key, Nonce, Payload}),
// values of params stored sealed in was, and values of params whose
// definition is Secure. The policy sees that such a param is set, never
// its value.
func maskSecure(ctx context.Context, r claims.Resolver, obj, was map[string]any) map[string]any {
	// Credentials a body may carry (a user's create or PUT): the policy
	// sees that one is set, never its value (docs/design.md §4.4).
	for _, k := range credentialFields {
		if _, ok := obj[k]; ok {
			obj[k] = policies.MaskedValue()
		}
	}
	params, ok := obj["Params"].(map[string]any)
	if !ok {
		return obj
	}
	wasParams, _ := was["Params"].(map[string]any)
	for name, v := range params {
		if sealed(v) || sealed(wasParams[name]) || secureParam(ctx, r, name) {
			params[name] = policies.MaskedValue()
		}
	}
	return obj
}

// credentialFields are the top-level fields of objects that hold
// credentials: a user's Password (the provgate extension of a create),
// PasswordHash and Secret, a machine's Secret.
var credentialFields = []string{"Password", "PasswordHash", "Secret"}

// sealed reports whether v has the stored form of a secure value
// (docs/design.md §3.9).
func sealed(v any) bool {
	m, ok := v.(map[string]any)
	if !ok || len(m) != 3 {
		return false
	}
	for _, k := range []string{"Key", "Nonce", "Payload"} {
		if _, ok := m[k]; !ok {
			return false
		}
	}
	return true
}

// secureParam reports whether the param definition name is Secure. An
// unreadable definition counts as secure: masking too much is safe.
func secureParam(ctx context.Context, r claims.Resolver, name string) bool {
	raw, err := r.Current(ctx, backend.PrefixParams, name)
	if backend.IsCode(err, backend.ENOTFOUND) {
		return false
	}
	if err != nil {
		return true
	}
	var p struct{ Secure bool }
	if json.Unmarshal(raw, &p) != nil {
		return true
	}
	return p.Secure
}
