package gateway

import (
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/provgate/provgate/backend"
	"github.com/provgate/provgate/gateway/auth"
)

// apiError is DRP's error object; all five fields are always present.
type apiError struct {
	Model    string   `json:"Model"`
	Key      string   `json:"Key"`
	Type     string   `json:"Type"`
	Messages []string `json:"Messages"`
	Code     int      `json:"Code"`
}

// statuses map domain codes to HTTP statuses: the one place that does
// (statusOf).
var statuses = map[string]int{
	backend.EINVALID:       http.StatusUnprocessableEntity,
	backend.EBADREQUEST:    http.StatusBadRequest,
	backend.EUNAUTHORIZED:  http.StatusUnauthorized,
	backend.EFORBIDDEN:     http.StatusForbidden,
	backend.ENOTFOUND:      http.StatusNotFound,
	backend.ECONFLICT:      http.StatusConflict,
	backend.ENOTACCEPTABLE: http.StatusNotAcceptable,
	backend.ETOOLARGE:      http.StatusRequestEntityTooLarge,
	backend.EUNSUPPORTED:   http.StatusUnsupportedMediaType,
	backend.ETOOMANY:       http.StatusTooManyRequests,
	backend.EUNAVAILABLE:   http.StatusServiceUnavailable,
}

// statusOf is the HTTP status of a domain code; an unknown one is 500.
func statusOf(code string) int {
	if status, ok := statuses[code]; ok {
		return status
	}
	return http.StatusInternalServerError
}

// drpTypes spells each backend operation as DRP's error Type: the method
// of the request DRP would have been serving, CREATE for a store-level
// create, TX for a failed commit (docs/design.md §3.2).
var drpTypes = map[backend.Operation]string{
	backend.ReadOp:    fiber.MethodGet,
	backend.CreateOp:  "CREATE",
	backend.ReplaceOp: fiber.MethodPut,
	backend.PatchOp:   fiber.MethodPatch,
	backend.DeleteOp:  fiber.MethodDelete,
	backend.ActionOp:  fiber.MethodPost,
	backend.CommitOp:  "TX",
}

// drpType is the DRP error Type of be answering a request with method: its
// domain Type when it has one, else its operation's, else the method.
func drpType(be *backend.Error, method string) string {
	if be.Type != "" {
		return be.Type
	}
	if t, ok := drpTypes[be.Op]; ok {
		return t
	}
	return method
}

// notFound is DRP's "Not Found" answer to a request with method.
func notFound(method, model, key string) error {
	return backend.NewError(backend.ENOTFOUND, method, model, key, "Not Found")
}

// errorHandler turns every error a handler returns (domain errors, Fiber's
// own routing and size errors, panics recovered upstream) into a DRP error
// object with Content-Type application/json. Internal causes are logged once
// here and never sent to the client.
func (s *Server) errorHandler(c *fiber.Ctx, err error) error {
	out := apiError{Type: c.Method(), Messages: []string{}}
	var fe *fiber.Error
	var be *backend.Error
	switch {
	case errors.As(err, &be):
		out.Code = statusOf(be.Code)
		out.Type = drpType(be, out.Type)
		out.Model, out.Key = be.Model, be.Key
		out.Messages = append(out.Messages, be.Messages...)
		if out.Code >= 500 {
			s.log.ErrorContext(c.UserContext(), "request failed", "request_id", requestID(c),
				"method", c.Method(), "path", c.Path(), "error", err.Error())
			// EUNAVAILABLE messages are written for clients (retry
			// shortly, the callback's remote status) with causes kept in
			// Err; only other server errors are reduced to the request id.
			if be.Code != backend.EUNAVAILABLE {
				out.Messages = []string{"internal error (request " + requestID(c) + ")"}
			}
		}
	case errors.As(err, &fe):
		out.Code = fe.Code
		switch fe.Code {
		case fiber.StatusNotFound:
			out.Key = c.OriginalURL()
			out.Messages = []string{"No route"}
		case fiber.StatusMethodNotAllowed:
			out.Key = c.OriginalURL()
			out.Messages = []string{"Method not allowed"}
		case fiber.StatusRequestEntityTooLarge:
			out.Messages = []string{"request body too large"}
		case fiber.StatusRequestHeaderFieldsTooLarge:
			out.Messages = []string{"request headers too large"}
		default:
			out.Messages = []string{fe.Message}
		}
	default:
		out.Code = http.StatusInternalServerError
		s.log.ErrorContext(c.UserContext(), "request failed", "request_id", requestID(c),
			"method", c.Method(), "path", c.Path(), "error", err.Error())
		out.Messages = []string{"internal error (request " + requestID(c) + ")"}
	}
	if len(out.Messages) == 0 {
		out.Messages = []string{strings.ToLower(http.StatusText(out.Code))}
	}
	if out.Code == http.StatusUnauthorized {
		c.Set(fiber.HeaderWWWAuthenticate, "dr-provision")
	}
	if out.Code == http.StatusTooManyRequests || out.Code == http.StatusServiceUnavailable {
		if d, ok := auth.RetryAfter(err); ok {
			c.Set(fiber.HeaderRetryAfter, strconv.Itoa(int(math.Ceil(d.Seconds()))))
		}
	}
	if c.Method() == fiber.MethodHead {
		return c.SendStatus(out.Code)
	}
	if isAuthzen(c) {
		// The AuthZEN API's errors are a status with a message string
		// (docs/design.md §9.9).
		c.Set(fiber.HeaderContentType, fiber.MIMETextPlainCharsetUTF8)
		return c.Status(out.Code).SendString(strings.Join(out.Messages, "; "))
	}
	return c.Status(out.Code).JSON(out)
}
