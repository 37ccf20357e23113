package access

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// The OpenID AuthZEN Authorization API 1.0 wire forms (docs/design.md
// §9.9). provgate maps them onto its own questions: a subject is
// {type: user|machine, id}, an action {name} a DRP claim action (get,
// delete, update:/Params/x, action:callbackDo), a resource {type: scope,
// id: key}.

// Entity is a Subject or a Resource.
type Entity struct {
	Type       string         `json:"type"`
	ID         string         `json:"id,omitempty"`
	Properties map[string]any `json:"properties,omitempty"`
}

// Action is an AuthZEN Action.
type Action struct {
	Name       string         `json:"name"`
	Properties map[string]any `json:"properties,omitempty"`
}

// Evaluation is one access evaluation request; in an evaluations request
// any of its fields may come from the top-level defaults.
type Evaluation struct {
	Subject  *Entity        `json:"subject,omitempty"`
	Action   *Action        `json:"action,omitempty"`
	Resource *Entity        `json:"resource,omitempty"`
	Context  map[string]any `json:"context,omitempty"`
}

// Decision is an AuthZEN decision.
type Decision struct {
	Decision bool           `json:"decision"`
	Context  map[string]any `json:"context,omitempty"`
}

// EvaluationsRequest is POST /access/v1/evaluations.
type EvaluationsRequest struct {
	Evaluation
	Evaluations []Evaluation   `json:"evaluations"`
	Options     map[string]any `json:"options,omitempty"`
}

// Evaluations semantics (options.evaluations_semantic).
const (
	ExecuteAll          = "execute_all"
	DenyOnFirstDeny     = "deny_on_first_deny"
	PermitOnFirstPermit = "permit_on_first_permit"
)

// ErrBadRequest marks a malformed AuthZEN request: 400 with its message.
var ErrBadRequest = errors.New("bad request")

func badRequest(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrBadRequest}, args...)...)
}

// decodeObject decodes a JSON object body strictly enough to tell a
// malformed request: the top level must be an object, the types right.
// Unknown fields are ignored, as the specification requires.
func decodeObject(body []byte, v any) error {
	if t := bytes.TrimSpace(body); len(t) == 0 || t[0] != '{' {
		return badRequest("the body must be a JSON object")
	}
	if err := json.Unmarshal(body, v); err != nil {
		return badRequest("%s", err.Error())
	}
	return nil
}

// ParseEvaluation reads POST /access/v1/evaluation.
func ParseEvaluation(body []byte) (Evaluation, error) {
	var e Evaluation
	if err := decodeObject(body, &e); err != nil {
		return e, err
	}
	return e, e.Check("")
}

// Check refuses an evaluation missing a required entity or field.
func (e Evaluation) Check(where string) error {
	switch {
	case e.Subject == nil:
		return badRequest("%ssubject is required", where)
	case e.Subject.Type == "" || e.Subject.ID == "":
		return badRequest("%ssubject needs type and id", where)
	case e.Action == nil || e.Action.Name == "":
		return badRequest("%saction with a name is required", where)
	case e.Resource == nil:
		return badRequest("%sresource is required", where)
	case e.Resource.Type == "" || e.Resource.ID == "":
		return badRequest("%sresource needs type and id", where)
	}
	return nil
}

// MaxEvaluations bounds one evaluations request (docs/design.md §9.9):
// each item is a decision, so a body of small items must not buy
// unbounded policy work and reply size.
const MaxEvaluations = 1000

// ParseEvaluations reads POST /access/v1/evaluations: each item with the
// top-level defaults filled in, and the semantic. An empty or absent
// evaluations array is a single evaluation (single true); more than
// MaxEvaluations items are refused before any is decided.
func ParseEvaluations(body []byte) (items []Evaluation, semantic string, single bool, err error) {
	var r EvaluationsRequest
	if err := decodeObject(body, &r); err != nil {
		return nil, "", false, err
	}
	semantic = ExecuteAll
	if v, ok := r.Options["evaluations_semantic"]; ok {
		s, _ := v.(string)
		switch s {
		case ExecuteAll, DenyOnFirstDeny, PermitOnFirstPermit:
			semantic = s
		default:
			return nil, "", false, badRequest("options.evaluations_semantic must be execute_all, deny_on_first_deny or permit_on_first_permit")
		}
	}
	if len(r.Evaluations) == 0 {
		return []Evaluation{r.Evaluation}, semantic, true, r.Evaluation.Check("")
	}
	if len(r.Evaluations) > MaxEvaluations {
		return nil, "", false, badRequest("at most %d evaluations in one request, not %d", MaxEvaluations, len(r.Evaluations))
	}
	for i, e := range r.Evaluations {
		if e.Subject == nil {
			e.Subject = r.Subject
		}
		if e.Action == nil {
			e.Action = r.Action
		}
		if e.Resource == nil {
			e.Resource = r.Resource
		}
		if e.Context == nil {
			e.Context = r.Context
		}
		if err := e.Check(fmt.Sprintf("evaluations[%d]: ", i)); err != nil {
			return nil, "", false, err
		}
		items = append(items, e)
	}
	return items, semantic, false, nil
}

// Page is a search request's page.
type Page struct {
	Token string `json:"token,omitempty"`
	Limit *int   `json:"limit,omitempty"`
}

// PageOut is a search response's page.
type PageOut struct {
	NextToken string `json:"next_token"`
	Count     int    `json:"count"`
}

// SearchRequest is POST /access/v1/search/{subject,resource,action}.
type SearchRequest struct {
	Subject  *Entity        `json:"subject,omitempty"`
	Action   *Action        `json:"action,omitempty"`
	Resource *Entity        `json:"resource,omitempty"`
	Context  map[string]any `json:"context,omitempty"`
	Page     *Page          `json:"page,omitempty"`
}

// SearchResponse is the answer of every search: page first.
type SearchResponse struct {
	Page    *PageOut `json:"page,omitempty"`
	Results []any    `json:"results"`
}

// Search kinds.
const (
	SearchSubject  = "subject"
	SearchResource = "resource"
	SearchAction   = "action"
)

// DefaultPageLimit and MaxPageLimit bound one search page.
const (
	DefaultPageLimit = 100
	MaxPageLimit     = 1000
)

// ParseSearch reads a search request of kind and returns where its page
// starts and how many results it may hold. A page token must come from the
// same request (every entity and the limit unchanged).
func ParseSearch(kind string, body []byte) (r SearchRequest, offset, limit int, err error) {
	if err := decodeObject(body, &r); err != nil {
		return r, 0, 0, err
	}
	switch {
	case r.Subject == nil || r.Subject.Type == "":
		return r, 0, 0, badRequest("subject with a type is required")
	case kind != SearchSubject && r.Subject.ID == "":
		return r, 0, 0, badRequest("subject needs an id")
	case kind != SearchAction && (r.Action == nil || r.Action.Name == ""):
		return r, 0, 0, badRequest("action with a name is required")
	case r.Resource == nil || r.Resource.Type == "":
		return r, 0, 0, badRequest("resource with a type is required")
	case kind != SearchResource && r.Resource.ID == "":
		return r, 0, 0, badRequest("resource needs an id")
	}
	limit = DefaultPageLimit
	if r.Page != nil && r.Page.Limit != nil {
		if *r.Page.Limit < 0 {
			return r, 0, 0, badRequest("page.limit must not be negative")
		}
		limit = min(*r.Page.Limit, MaxPageLimit)
	}
	if r.Page != nil && r.Page.Token != "" {
		off, sum, ok := readToken(r.Page.Token)
		if !ok || sum != requestSum(kind, r) {
			return r, 0, 0, badRequest("page.token does not belong to this request (its entities and limit must not change)")
		}
		offset = off
	}
	return r, offset, limit, nil
}

// NextToken is the token of the page after the one ending at offset.
func NextToken(kind string, r SearchRequest, offset int) string {
	raw := strconv.Itoa(offset) + "." + requestSum(kind, r)
	return base64.RawURLEncoding.EncodeToString([]byte(raw))
}

func readToken(tok string) (int, string, bool) {
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return 0, "", false
	}
	off, sum, ok := strings.Cut(string(raw), ".")
	n, err := strconv.Atoi(off)
	return n, sum, ok && err == nil && n >= 0
}

// requestSum names a search request without its page token.
func requestSum(kind string, r SearchRequest) string {
	c := r
	if c.Page != nil {
		p := *c.Page
		p.Token = ""
		c.Page = &p
	}
	b, _ := json.Marshal(struct {
		Kind string
		R    SearchRequest
	}{kind, c})
	sum := sha256.Sum256(b)
	return base64.RawURLEncoding.EncodeToString(sum[:12])
}
