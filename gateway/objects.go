package gateway

import (
	"context"
	"encoding/json"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/provgate/provgate/backend"
	"github.com/provgate/provgate/gateway/claims"
)

// Objects is the object service behind the DRP CRUD routes.
type Objects interface {
	Create(ctx context.Context, prefix string, body []byte) (backend.Model, error)
	Get(ctx context.Context, prefix, key string) (backend.Model, int64, error)
	// View is Get encoded, served from a read cache validated by the
	// object's stored revision; its result is shared and never modified.
	View(ctx context.Context, prefix, key string) (backend.View, error)
	List(ctx context.Context, prefix string, q backend.Query) ([]backend.Model, int, int, error)
	// ListJSON is List encoded as a list reply's JSON array, each object
	// sanitized and shaped by q, from the read cache where it holds the
	// row's revision.
	ListJSON(ctx context.Context, prefix string, q backend.Query) ([]byte, int, int, error)
	// CreateMany creates every item in one transaction, or none.
	CreateMany(ctx context.Context, prefix string, items []json.RawMessage) ([]backend.Model, error)
	Patch(ctx context.Context, prefix, key string, patch []byte, force bool) (backend.Model, error)
	Put(ctx context.Context, prefix, key string, body []byte) (backend.Model, error)
	Delete(ctx context.Context, prefix, key string) (backend.Model, error)
	Wait(ctx context.Context, prefix, key, etag string, d time.Duration) (bool, error)
	Shape(ctx context.Context, m backend.Model, q backend.Query) error
}

// isParam reports whether a param definition exists (param-value filters).
func (s *Server) isParam(ctx context.Context, name string) bool {
	_, _, err := s.Objects.Get(ctx, "params", name)
	return err == nil
}

// etagOf is the object's ETag, the same on every replica; Wait compares
// against the same value.
func etagOf(m backend.Model, rev int64) string { return backend.ModelETag(m, rev) }

// routePrefix is the scope (kind prefix) the request was authorized for.
func routePrefix(c *fiber.Ctx) string { return accessOf(c).Scope }

// routeKey is the native key of the object the request was authorized for.
// Handlers use it, never the path: the path's key, percent-decoded, was
// turned into this key once (gateway/claims) and authorized as such.
func routeKey(c *fiber.Ctx) string { return accessOf(c).Key }

func (s *Server) objectsReady() error {
	if s.Objects == nil {
		return backend.Errorf(backend.EUNAVAILABLE, "object service is not configured")
	}
	return nil
}

func (s *Server) handleList(c *fiber.Ctx) error {
	if err := s.objectsReady(); err != nil {
		return err
	}
	k, err := s.Kinds.Lookup(routePrefix(c))
	if err != nil {
		return err
	}
	ctx := userContext(c)
	vals, _ := url.ParseQuery(string(c.Request().URI().QueryString()))
	q, err := backend.ParseQuery(k, vals, func(n string) bool { return s.isParam(ctx, n) })
	if err != nil {
		return err
	}
	q.Visible = accessOf(c).Visible
	if k.Prefix == "jobs" {
		if q.Visible, err = s.visibleJobs(c, q.Visible); err != nil {
			return err
		}
	}
	body, total, matched, err := s.Objects.ListJSON(ctx, k.Prefix, q)
	if err != nil {
		return err
	}
	c.Set("X-DRP-LIST-TOTAL-COUNT", strconv.Itoa(total))
	c.Set("X-DRP-LIST-COUNT", strconv.Itoa(matched))
	c.Set("X-DRP-LIST-FILTER-COUNT", strconv.Itoa(matched))
	if c.Method() == fiber.MethodHead {
		return c.SendStatus(fiber.StatusOK)
	}
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	return c.Send(body)
}

// visibleJobs narrows a job list to the jobs of machines the caller's
// tenant shows (docs/design.md §6: jobs follow their machine). It returns
// visible unchanged when machines are unrestricted. The keys are resolved
// first, so the list's counts, paging and filters see only visible jobs.
func (s *Server) visibleJobs(c *fiber.Ctx, visible []string) ([]string, error) {
	machines, err := s.machineVisibility(c)
	if err != nil || machines == nil {
		return visible, err
	}
	keys := []string{}
	if len(machines) == 0 {
		return keys, nil
	}
	k := s.Kinds.Kind("jobs")
	q := backend.Query{Limit: -1, Visible: visible, Filters: []backend.Filter{{
		Name: "Machine", Target: backend.TargetIndex, Index: k.Indexes["Machine"], Op: backend.OpIn, Values: machines}}}
	jobs, _, _, err := s.Objects.List(userContext(c), "jobs", q)
	if err != nil {
		return nil, err
	}
	for _, j := range jobs {
		keys = append(keys, j.Key())
	}
	return keys, nil
}

// write runs one object write for the route's kind: it answers status with
// the sanitized object and refreshes policy data the write may change.
func (s *Server) write(c *fiber.Ctx, status int, do func(ctx context.Context, prefix, key string) (backend.Model, error)) error {
	if err := s.objectsReady(); err != nil {
		return err
	}
	k, err := s.Kinds.Lookup(routePrefix(c))
	if err != nil {
		return err
	}
	m, err := do(userContext(c), k.Prefix, routeKey(c))
	if err != nil {
		return err
	}
	s.afterWrite(c, k.Prefix)
	if c.Method() == fiber.MethodPost {
		// The caller wrote the new object; it sees it as created.
		return c.Status(status).JSON(backend.Sanitize(m))
	}
	view, err := s.replyView(c, backend.Sanitize(m), "")
	if err != nil {
		return err
	}
	return c.Status(status).JSON(view)
}

func (s *Server) handleCreate(c *fiber.Ctx) error {
	return s.write(c, fiber.StatusCreated, func(ctx context.Context, prefix, _ string) (backend.Model, error) {
		return s.Objects.Create(ctx, prefix, c.Body())
	})
}

// handleImport creates the JSON array of objects in the body at once
// (POST /<prefix>/import): the guard required one create claim per item,
// and the object service validates each as a single create and writes all
// of them or none (docs/design.md §4.9).
func (s *Server) handleImport(c *fiber.Ctx) error {
	if err := s.objectsReady(); err != nil {
		return err
	}
	prefix := routePrefix(c)
	items, err := claims.ImportItems(prefix, c.Body())
	if err != nil {
		return err
	}
	ms, err := s.Objects.CreateMany(userContext(c), prefix, items)
	if err != nil {
		return err
	}
	s.afterWrite(c, prefix)
	for _, m := range ms {
		backend.Sanitize(m)
	}
	return c.Status(fiber.StatusCreated).JSON(ms)
}

// handleGet serves GET and HEAD of one object, with DRP's long poll:
// If-None-Match plus Prefer: wait=<dur> answers 304 when nothing changed.
// A long poll is authorized again when it wakes (reauthorize): a caller
// that lost access to the object while waiting gets the answer for a
// missing object, not the object or its ETag.
func (s *Server) handleGet(c *fiber.Ctx) error {
	if err := s.objectsReady(); err != nil {
		return err
	}
	k, err := s.Kinds.Lookup(routePrefix(c))
	if err != nil {
		return err
	}
	ctx := userContext(c)
	key := routeKey(c)
	v, err := s.Objects.View(ctx, k.Prefix, key)
	if err != nil {
		return err
	}
	etag := v.ETag
	if inm := c.Get(fiber.HeaderIfNoneMatch); inm != "" && inm == etag {
		wait := preferWait(c.Get("Prefer"))
		if wait <= 0 {
			c.Set(fiber.HeaderETag, etag)
			return c.SendStatus(fiber.StatusNotModified)
		}
		changed, err := s.Objects.Wait(s.waitContext(ctx), k.Prefix, v.Model.Key(), etag, wait)
		if err != nil {
			return err
		}
		if err := s.reauthorize(c); err != nil {
			return s.lostAccess(c, err)
		}
		if !changed {
			c.Set(fiber.HeaderETag, etag)
			return c.SendStatus(fiber.StatusNotModified)
		}
		if v, err = s.Objects.View(ctx, k.Prefix, v.Model.Key()); err != nil {
			return err
		}
		etag = v.ETag
	}
	c.Set(fiber.HeaderETag, etag)
	if c.Method() == fiber.MethodHead {
		return c.SendStatus(fiber.StatusOK)
	}
	vals, _ := url.ParseQuery(string(c.Request().URI().QueryString()))
	var q backend.Query
	q.Slim = backend.SplitList(vals.Get("slim"))
	q.Params = backend.SplitList(vals.Get("params"))
	q.Aggregate = vals.Get("aggregate") == "true"
	q.Decode = isDecode(c)
	if len(q.Slim) == 0 && len(q.Params) == 0 && !q.Aggregate && !q.Decode {
		// No view options: the encoded object as stored (and cached).
		c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
		return c.Send(v.JSON)
	}
	// View options change the object: shape a copy of its own, of the
	// revision the ETag names.
	m, rev, err := s.Objects.Get(ctx, k.Prefix, v.Model.Key())
	if err != nil {
		return err
	}
	if rev != v.Rev {
		c.Set(fiber.HeaderETag, etagOf(m, rev))
	}
	if err := s.Objects.Shape(ctx, m, q); err != nil {
		return err
	}
	return c.JSON(backend.Sanitize(m))
}

// lostAccess is the answer to a request whose access ended while it waited:
// a refusal of any kind answers as a missing object would; a failure to
// decide stays that failure.
func (s *Server) lostAccess(c *fiber.Ctx, err error) error {
	switch backend.ErrorCode(err) {
	case backend.EFORBIDDEN, backend.ENOTFOUND, backend.EUNAUTHORIZED, backend.EINVALID:
		a := accessOf(c)
		return backend.NotFound(backend.RequestOp, a.Scope, a.Ref)
	}
	return err
}

// preferWait parses "wait=<duration>" from a Prefer header (bounded).
func preferWait(h string) time.Duration {
	for _, part := range strings.Split(h, ",") {
		part = strings.TrimSpace(part)
		if v, ok := strings.CutPrefix(part, "wait="); ok {
			d, err := time.ParseDuration(v)
			if err != nil {
				if n, err2 := strconv.Atoi(v); err2 == nil {
					d = time.Duration(n) * time.Second
				} else {
					return 0
				}
			}
			if d > 5*time.Minute {
				d = 5 * time.Minute
			}
			return d
		}
	}
	return 0
}

func (s *Server) handlePatch(c *fiber.Ctx) error {
	return s.write(c, fiber.StatusOK, func(ctx context.Context, prefix, key string) (backend.Model, error) {
		return s.Objects.Patch(ctx, prefix, key, c.Body(), c.QueryBool("force"))
	})
}

func (s *Server) handlePut(c *fiber.Ctx) error {
	return s.write(c, fiber.StatusOK, func(ctx context.Context, prefix, key string) (backend.Model, error) {
		return s.Objects.Put(ctx, prefix, key, c.Body())
	})
}

func (s *Server) handleDelete(c *fiber.Ctx) error {
	return s.write(c, fiber.StatusOK, func(ctx context.Context, prefix, key string) (backend.Model, error) {
		return s.Objects.Delete(ctx, prefix, key)
	})
}

// handleIndexes lists a kind's indexes (DRP's /indexes/<prefix>).
func (s *Server) handleIndexes(c *fiber.Ctx) error {
	k, err := s.Kinds.Lookup(routePrefix(c))
	if err != nil {
		return err
	}
	return c.JSON(k.Indexes)
}

func (s *Server) handleAllIndexes(c *fiber.Ctx) error {
	out := map[string]map[string]backend.Index{}
	for _, p := range s.Kinds.Prefixes() {
		out[p] = s.Kinds.Kind(p).Indexes
	}
	return c.JSON(out)
}

// handleObjects lists the object prefixes this server serves, as DRP's
// GET /objects does: a JSON array of strings, sorted.
func (s *Server) handleObjects(c *fiber.Ctx) error {
	return c.JSON(s.Kinds.Prefixes())
}

// meta sub-resource.

func (s *Server) handleGetMeta(c *fiber.Ctx) error {
	if err := s.objectsReady(); err != nil {
		return err
	}
	k, err := s.Kinds.Lookup(routePrefix(c))
	if err != nil {
		return err
	}
	m, _, err := s.Objects.Get(userContext(c), k.Prefix, routeKey(c))
	if err != nil {
		return err
	}
	return c.JSON(m.Env().Meta)
}

func (s *Server) handlePatchMeta(c *fiber.Ctx) error {
	if err := s.objectsReady(); err != nil {
		return err
	}
	k, err := s.Kinds.Lookup(routePrefix(c))
	if err != nil {
		return err
	}
	// A meta patch is a patch of the object's /Meta member.
	var ops []map[string]any
	if err := json.Unmarshal(c.Body(), &ops); err != nil {
		return backend.NewError(backend.EBADREQUEST, "PATCH", k.Prefix, routeKey(c), "invalid JSON patch: "+err.Error())
	}
	for _, op := range ops {
		for _, f := range []string{"path", "from"} {
			if v, ok := op[f].(string); ok && (f == "path" || v != "") {
				op[f] = "/Meta" + v
			}
		}
	}
	body, err := json.Marshal(ops)
	if err != nil {
		return backend.NewError(backend.EBADREQUEST, "PATCH", k.Prefix, routeKey(c), "patch cannot be encoded: "+err.Error())
	}
	m, err := s.Objects.Patch(userContext(c), k.Prefix, routeKey(c), body, false)
	if err != nil {
		return err
	}
	view, err := s.replyView(c, m.Env().Meta, "/Meta")
	if err != nil {
		return err
	}
	return c.JSON(view)
}

// writeJSONValue writes any JSON value, including a bare null.
func writeJSONValue(c *fiber.Ctx, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	return c.Send(b)
}

// afterWrite refreshes the policy data when an object it depends on changed.
// Besides users, roles and tenants themselves, tenants' Members change when
// a tenant user creates an object (it joins the tenant) and when any object
// is deleted (its key leaves every tenant); waiting for the periodic refresh
// would hide a tenant user's new object from it, or briefly show a tenant a
// re-created object under a deleted key (docs/design.md §6).
func (s *Server) afterWrite(c *fiber.Ctx, prefix string) {
	refresh := false
	switch {
	case prefix == "users" || prefix == "roles" || prefix == "tenants":
		refresh = true
	case c.Method() == fiber.MethodDelete:
		refresh = true
	case c.Method() == fiber.MethodPost:
		p := principalOf(c)
		refresh = p != nil && p.IsUser() && s.TenantOf != nil && s.TenantOf(p.Name) != ""
	}
	if refresh && s.Sync != nil {
		if err := s.Sync.Refresh(userContext(c)); err != nil {
			s.log.ErrorContext(userContext(c), "policy data refresh failed", "error", err.Error())
		}
	}
}
