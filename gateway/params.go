package gateway

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/provgate/provgate/backend"
	"github.com/provgate/provgate/gateway/claims"
)

// Params is the params service behind the params sub-resources of objects
// that have params (docs/design.md §3.9).
type Params interface {
	Params(ctx context.Context, prefix, key string, aggregate, decode bool) (map[string]json.RawMessage, error)
	GetParam(ctx context.Context, prefix, key, name string, aggregate, decode bool) (json.RawMessage, error)
	SetParam(ctx context.Context, prefix, key, name string, value json.RawMessage) (json.RawMessage, error)
	// SetParams replaces every param with the JSON object params.
	SetParams(ctx context.Context, prefix, key string, params json.RawMessage) (map[string]json.RawMessage, error)
	PatchParams(ctx context.Context, prefix, key string, patch []byte) (map[string]json.RawMessage, error)
	DeleteParam(ctx context.Context, prefix, key, name string) (json.RawMessage, error)
}

// PublicKeys is implemented by a params service that accepts secure param
// values sealed by DRP clients (docs/design.md §3.9).
type PublicKeys interface {
	PublicKey(ctx context.Context, prefix, key string) ([]byte, error)
}

// paramRoutes serves the params sub-resources of objects (docs/design.md
// §3.9) and their public keys. The table has params rows only for kinds
// with params.
type paramRoutes struct {
	kinds  *backend.Catalog
	params Params
}

func (p paramRoutes) serves() serves {
	out := serves{claims.ServeGetParams: p.getAll, claims.ServeSetParams: p.setAll, claims.ServePatchParams: p.patchAll,
		claims.ServeGetParam: p.get, claims.ServeSetParam: p.set, claims.ServeDeleteParam: p.delete}.unless(p.params == nil)
	_, sealed := p.params.(PublicKeys)
	out[claims.ServePubkey] = nilUnless(sealed, p.pubkey)
	return out
}

// paramName is the param name the request was authorized for.
func paramName(c *fiber.Ctx) string { return accessOf(c).Name }

func (p paramRoutes) getAll(c *fiber.Ctx) error {
	out, err := p.params.Params(userContext(c), routePrefix(c), routeKey(c), c.QueryBool("aggregate"), isDecode(c))
	if err != nil {
		return err
	}
	if keep := c.Query("params"); keep != "" {
		sel := map[string]json.RawMessage{}
		for _, n := range strings.Split(keep, ",") {
			if v, ok := out[strings.TrimSpace(n)]; ok {
				sel[strings.TrimSpace(n)] = v
			}
		}
		out = sel
	}
	return c.JSON(out)
}

func (p paramRoutes) get(c *fiber.Ctx) error {
	v, err := p.params.GetParam(userContext(c), routePrefix(c), routeKey(c), paramName(c), c.QueryBool("aggregate"), isDecode(c))
	if err != nil {
		return err
	}
	return writeJSONValue(c, v)
}

func (p paramRoutes) set(c *fiber.Ctx) error {
	var value json.RawMessage
	if err := decodeJSON(c, &value); err != nil {
		return err
	}
	v, err := p.params.SetParam(userContext(c), routePrefix(c), routeKey(c), paramName(c), value)
	return p.reply(c, v, err, "/Params/"+backend.EscapePointer(paramName(c)))
}

func (p paramRoutes) setAll(c *fiber.Ctx) error {
	// The body must be a JSON object (or null): decoding it here keeps the
	// answer to any other body DRP's 400.
	params := map[string]any{}
	if err := decodeJSON(c, &params); err != nil {
		return err
	}
	out, err := p.params.SetParams(userContext(c), routePrefix(c), routeKey(c), c.Body())
	return p.reply(c, out, err, "/Params")
}

func (p paramRoutes) patchAll(c *fiber.Ctx) error {
	out, err := p.params.PatchParams(userContext(c), routePrefix(c), routeKey(c), c.Body())
	return p.reply(c, out, err, "/Params")
}

func (p paramRoutes) delete(c *fiber.Ctx) error {
	v, err := p.params.DeleteParam(userContext(c), routePrefix(c), routeKey(c), paramName(c))
	// The old value is a read: the caller wrote nothing it could be shown.
	return p.reply(c, v, err, "/Params/"+backend.EscapePointer(paramName(c)))
}

// reply answers a params write that returned v and err: v as the caller
// may see it (replyView under base).
func (p paramRoutes) reply(c *fiber.Ctx, v any, err error, base string) error {
	if err != nil {
		return err
	}
	view, err := replyView(p.kinds, c, v, base)
	if err != nil {
		return err
	}
	return writeJSONValue(c, view)
}

// pubkey answers the object's public key as a JSON string (base64), as
// drpcli reads it before setting a secure param.
func (p paramRoutes) pubkey(c *fiber.Ctx) error {
	key, err := p.params.(PublicKeys).PublicKey(userContext(c), routePrefix(c), routeKey(c))
	if err != nil {
		return err
	}
	return c.JSON(key)
}
