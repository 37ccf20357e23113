package gateway

import (
	"encoding/json"
	"net/url"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/provgate/provgate/backend"
)

func unavailable(what string) error {
	return backend.Errorf(backend.EUNAVAILABLE, "%s is not configured", what)
}

// decodeJSON decodes a request body with a DRP-style 400 on failure.
func decodeJSON(c *fiber.Ctx, v any) error {
	if err := json.Unmarshal(c.Body(), v); err != nil {
		return backend.NewError(backend.EBADREQUEST, c.Method(), "", "", "invalid JSON body: "+err.Error())
	}
	return nil
}

// handleBenchPool reads one pool without authentication: the baseline the
// gateway benchmark divides by. Enabled only with --bench-routes.
func (s *Server) handleBenchPool(c *fiber.Ctx) error {
	key := strings.Clone(c.Params("key"))
	if d, err := url.PathUnescape(key); err == nil {
		key = d
	}
	// The same read as an authorized GET of the pool (the read cache), so
	// that the benchmark's ratio is the guard's cost alone.
	v, err := s.bench.View(userContext(c), "pools", key)
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	return c.Send(v.JSON)
}
