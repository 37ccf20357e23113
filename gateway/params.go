package gateway

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/provgate/provgate/backend"
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

// params sub-resources (docs/design.md §3.9).

func (s *Server) paramsTarget(c *fiber.Ctx) (*backend.Kind, string, error) {
	if s.Params == nil {
		// Params are a part of the object service.
		return nil, "", unavailable("object service")
	}
	k, err := s.Kinds.Lookup(routePrefix(c))
	if err != nil {
		return nil, "", err
	}
	if !k.HasParams {
		return nil, "", backend.NewError(backend.ENOTFOUND, c.Method(), k.Prefix, "", "No route")
	}
	return k, routeKey(c), nil
}

// paramName is the param name the request was authorized for.
func paramName(c *fiber.Ctx) string { return accessOf(c).Name }

func (s *Server) handleGetParams(c *fiber.Ctx) error {
	k, key, err := s.paramsTarget(c)
	if err != nil {
		return err
	}
	p, err := s.Params.Params(userContext(c), k.Prefix, key, c.QueryBool("aggregate"), isDecode(c))
	if err != nil {
		return err
	}
	if keep := c.Query("params"); keep != "" {
		sel := map[string]json.RawMessage{}
		for _, n := range strings.Split(keep, ",") {
			if v, ok := p[strings.TrimSpace(n)]; ok {
				sel[strings.TrimSpace(n)] = v
			}
		}
		p = sel
	}
	return c.JSON(p)
}

func (s *Server) handleGetParam(c *fiber.Ctx) error {
	k, key, err := s.paramsTarget(c)
	if err != nil {
		return err
	}
	v, err := s.Params.GetParam(userContext(c), k.Prefix, key, paramName(c), c.QueryBool("aggregate"), isDecode(c))
	if err != nil {
		return err
	}
	return writeJSONValue(c, v)
}

func (s *Server) handleSetParam(c *fiber.Ctx) error {
	k, key, err := s.paramsTarget(c)
	if err != nil {
		return err
	}
	var value json.RawMessage
	if err := decodeJSON(c, &value); err != nil {
		return err
	}
	v, err := s.Params.SetParam(userContext(c), k.Prefix, key, paramName(c), value)
	if err != nil {
		return err
	}
	view, err := s.replyView(c, v, "/Params/"+backend.EscapePointer(paramName(c)))
	if err != nil {
		return err
	}
	return writeJSONValue(c, view)
}

func (s *Server) handleSetParams(c *fiber.Ctx) error {
	k, key, err := s.paramsTarget(c)
	if err != nil {
		return err
	}
	// The body must be a JSON object (or null): decoding it here keeps the
	// answer to any other body DRP's 400.
	params := map[string]any{}
	if err := decodeJSON(c, &params); err != nil {
		return err
	}
	p, err := s.Params.SetParams(userContext(c), k.Prefix, key, c.Body())
	if err != nil {
		return err
	}
	view, err := s.replyView(c, p, "/Params")
	if err != nil {
		return err
	}
	return c.JSON(view)
}

func (s *Server) handlePatchParams(c *fiber.Ctx) error {
	k, key, err := s.paramsTarget(c)
	if err != nil {
		return err
	}
	p, err := s.Params.PatchParams(userContext(c), k.Prefix, key, c.Body())
	if err != nil {
		return err
	}
	view, err := s.replyView(c, p, "/Params")
	if err != nil {
		return err
	}
	return c.JSON(view)
}

func (s *Server) handleDeleteParam(c *fiber.Ctx) error {
	k, key, err := s.paramsTarget(c)
	if err != nil {
		return err
	}
	v, err := s.Params.DeleteParam(userContext(c), k.Prefix, key, paramName(c))
	if err != nil {
		return err
	}
	// The old value is a read: the caller wrote nothing it could be shown.
	view, err := s.replyView(c, v, "/Params/"+backend.EscapePointer(paramName(c)))
	if err != nil {
		return err
	}
	return writeJSONValue(c, view)
}
