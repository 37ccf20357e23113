package gateway

import (
	"encoding/json"
	"reflect"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/provgate/provgate/backend"
)

// replyView returns v, the reply of a write, as the caller may see it: all
// of it when the caller may get the object; otherwise only the object's key
// and the values the caller wrote (the request's Written values that the
// result holds as they were sent), so that update:<field> never reads more
// than the field it wrote. v is the object itself (base ""), or the part of
// it at pointer base: the Params or Meta map, or one param's value.
func replyView(kinds *backend.Catalog, c *fiber.Ctx, v any, base string) (any, error) {
	a := accessOf(c)
	ctx := userContext(c)
	if a.Scope == "" {
		return v, nil
	}
	ok, err := backend.Can(ctx, backend.Claim{Scope: a.Scope, Action: "get", Specific: a.Specific})
	if err != nil || ok {
		return v, err
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, err
	}
	var out any
	switch {
	case base == "":
		obj := map[string]any{}
		if k := kinds.Kind(a.Scope); k != nil {
			if m, ok := doc.(map[string]any); ok {
				if kv, ok := m[k.KeyField]; ok {
					obj[k.KeyField] = kv
				}
			}
		}
		out = obj
	case base == "/Params" || base == "/Meta":
		out = map[string]any{}
	}
	for _, w := range a.Written {
		rel, ok := relPointer(w.Pointer, base)
		if !ok {
			continue
		}
		var want any
		if json.Unmarshal(w.Value, &want) != nil {
			continue
		}
		if got, ok := backend.LookupPointer(doc, rel); ok {
			out = reveal(out, rel, got, want)
		}
	}
	return out, nil
}

// relPointer is p relative to base, when p is base or under it.
func relPointer(p, base string) (string, bool) {
	switch {
	case base == "":
		return p, true
	case p == base:
		return "", true
	case strings.HasPrefix(p, base+"/"):
		return p[len(base):], true
	}
	return "", false
}

// reveal sets got at rel in out when it is what the caller sent (want); when
// both are objects that differ (a value the server transformed, such as a
// sealed secure param), their members are compared one by one.
func reveal(out any, rel string, got, want any) any {
	if reflect.DeepEqual(got, want) {
		return setPointer(out, rel, got)
	}
	gm, ok1 := got.(map[string]any)
	wm, ok2 := want.(map[string]any)
	if !ok1 || !ok2 {
		return out
	}
	for k, wv := range wm {
		if gv, ok := gm[k]; ok {
			out = reveal(out, rel+"/"+backend.EscapePointer(k), gv, wv)
		}
	}
	return out
}

// setPointer sets v at pointer p of out, making the objects on the way.
func setPointer(out any, p string, v any) any {
	if p == "" {
		return v
	}
	root, ok := out.(map[string]any)
	if !ok {
		return out
	}
	toks := strings.Split(p, "/")[1:]
	m := root
	for _, tok := range toks[:len(toks)-1] {
		name := backend.UnescapePointer(tok)
		next, ok := m[name].(map[string]any)
		if !ok {
			if _, taken := m[name]; taken {
				return out
			}
			next = map[string]any{}
			m[name] = next
		}
		m = next
	}
	m[backend.UnescapePointer(toks[len(toks)-1])] = v
	return root
}
