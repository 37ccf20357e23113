// Package backend holds provgate's domain: object models, validation, the
// error vocabulary and list queries. It imports nothing else in the module.
package backend

import (
	"errors"
	"fmt"
)

// Error codes: the one vocabulary every layer speaks. Adapters translate their
// own failures into these at their boundary; the gateway maps them to HTTP
// statuses in one place.
const (
	EINVALID       = "invalid"        // 422: the object fails validation
	EBADREQUEST    = "bad_request"    // 400: malformed request (JSON, parameters)
	EUNAUTHORIZED  = "unauthorized"   // 401: missing or malformed credentials
	EFORBIDDEN     = "forbidden"      // 403: bad credentials, claim or license missing
	ENOTFOUND      = "not_found"      // 404
	ECONFLICT      = "conflict"       // 409: duplicates, failed patch tests, in-use objects
	ENOTACCEPTABLE = "not_acceptable" // 406: bad list filters
	ETOOLARGE      = "too_large"      // 413
	EUNSUPPORTED   = "unsupported"    // 415: wrong content type
	ETOOMANY       = "too_many"       // 429: rate limited
	EINTERNAL      = "internal"       // 500
	EUNAVAILABLE   = "unavailable"    // 503
)

// Operation is what was being done when an error happened. The gateway
// spells it as the DRP error Type, as DRP names it after the request
// (docs/design.md §3.2); backend code never names HTTP methods.
type Operation int

const (
	// RequestOp is the operation of the request itself: the gateway
	// reports the request's method.
	RequestOp Operation = iota
	// ReadOp reads an object, a list, a setting or a record.
	ReadOp
	// CreateOp stores a new object or record.
	CreateOp
	// ReplaceOp replaces a whole object or rewrites a stored record.
	ReplaceOp
	// PatchOp applies a JSON Patch.
	PatchOp
	// DeleteOp deletes an object or record.
	DeleteOp
	// ActionOp acts on a collection or beneath an object: a posted object
	// body, a job request, a pool operation, a params write, a secret
	// rotation, a recorded notice.
	ActionOp
	// CommitOp commits a store transaction.
	CommitOp
)

var operationNames = [...]string{"request", "read", "create", "replace", "patch", "delete", "action", "commit"}

// String names o for logs.
func (o Operation) String() string {
	if o < 0 || int(o) >= len(operationNames) {
		return fmt.Sprintf("operation(%d)", int(o))
	}
	return operationNames[o]
}

// Error is a domain error. Code is its kind (not found, conflict, invalid,
// unavailable, ...), Op what was being done; Type, when set, is a DRP error
// Type of the domain (ValidationError, StillInUseError, Conflict, AUTH,
// INVOKE ...) that names the error better than Op. Model and Key name the
// object. The gateway alone turns Code into an HTTP status and Op into the
// DRP Type of the error object ({Model,Key,Type,Messages,Code}).
type Error struct {
	Code     string
	Op       Operation
	Type     string
	Model    string
	Key      string
	Messages []string
	Err      error // underlying cause, never shown to clients
}

func (e *Error) Error() string {
	msg := ""
	for i, m := range e.Messages {
		if i > 0 {
			msg += "; "
		}
		msg += m
	}
	if msg == "" && e.Err != nil {
		msg = e.Err.Error()
	}
	label := e.Type
	if label == "" && e.Op != RequestOp {
		label = e.Op.String()
	}
	switch {
	case e.Model != "" && e.Key != "":
		return fmt.Sprintf("%s: %s/%s: %s", label, e.Model, e.Key, msg)
	case e.Model != "":
		return fmt.Sprintf("%s: %s: %s", label, e.Model, msg)
	case label != "":
		return fmt.Sprintf("%s: %s", label, msg)
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf builds an Error with one formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Messages: []string{fmt.Sprintf(format, args...)}}
}

// NewError builds an Error with model, key and a DRP domain type set.
func NewError(code, typ, model, key string, messages ...string) *Error {
	return &Error{Code: code, Type: typ, Model: model, Key: key, Messages: messages}
}

// OpError builds an Error of operation op on model/key.
func OpError(code string, op Operation, model, key string, messages ...string) *Error {
	return &Error{Code: code, Op: op, Model: model, Key: key, Messages: messages}
}

// NotFound is DRP's "Not Found" error for operation op on model/key.
func NotFound(op Operation, model, key string) *Error {
	return OpError(ENOTFOUND, op, model, key, "Not Found")
}

// ErrorCode returns the code of the first *Error in err's chain, EINTERNAL for
// any other non-nil error, and "" for nil.
func ErrorCode(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return EINTERNAL
}

// AsError returns the *Error in err's chain, or wraps err as EINTERNAL.
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Code: EINTERNAL, Messages: []string{"internal error"}, Err: err}
}

// IsCode reports whether err carries code.
func IsCode(err error, code string) bool { return ErrorCode(err) == code }

// ValidationErrors collects validation messages and becomes a 422.
type ValidationErrors struct{ Messages []string }

func (v *ValidationErrors) Add(format string, args ...any) {
	v.Messages = append(v.Messages, fmt.Sprintf(format, args...))
}

func (v *ValidationErrors) Empty() bool { return len(v.Messages) == 0 }

// Err returns nil when there are no messages, else an EINVALID ValidationError.
func (v *ValidationErrors) Err(model, key string) error {
	if v.Empty() {
		return nil
	}
	return &Error{Code: EINVALID, Type: "ValidationError", Model: model, Key: key, Messages: append([]string(nil), v.Messages...)}
}
