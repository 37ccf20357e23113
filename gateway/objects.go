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

// objectRoutes serves the DRP CRUD routes of every kind, their meta
// sub-resources and imports.
type objectRoutes struct {
	kinds    *backend.Catalog
	objects  Objects
	refresh  refresher
	machines machineVisibility
	// wait is the request's context for a long poll (a graceful shutdown
	// ends the wait); reauthorize authorizes a request again after it.
	wait        func(context.Context) context.Context
	reauthorize func(*fiber.Ctx) error
}

func (o objectRoutes) serves() serves {
	return serves{claims.ServeList: o.list, claims.ServeCreate: o.create, claims.ServeImport: o.importMany,
		claims.ServeGet: o.get, claims.ServePut: o.put, claims.ServePatch: o.patch, claims.ServeDelete: o.delete,
		claims.ServeGetMeta: o.getMeta, claims.ServePatchMeta: o.patchMeta}.unless(o.objects == nil)
}

// catalogRoutes serves what the server knows of its kinds: their prefixes
// and indexes.
type catalogRoutes struct{ kinds *backend.Catalog }

func (r catalogRoutes) serves() serves {
	return serves{claims.ServeObjects: r.prefixes, claims.ServeIndexes: r.indexes, claims.ServeAllIndexes: r.allIndexes}
}

// isParam reports whether a param definition exists (param-value filters).
func (o objectRoutes) isParam(ctx context.Context, name string) bool {
	_, _, err := o.objects.Get(ctx, "params", name)
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

func (o objectRoutes) list(c *fiber.Ctx) error {
	k, err := o.kinds.Lookup(routePrefix(c))
	if err != nil {
		return err
	}
	ctx := userContext(c)
	vals, _ := url.ParseQuery(string(c.Request().URI().QueryString()))
	q, err := backend.ParseQuery(k, vals, func(n string) bool { return o.isParam(ctx, n) })
	if err != nil {
		return err
	}
	q.Visible = accessOf(c).Visible
	if k.Prefix == "jobs" {
		if q.Visible, err = o.visibleJobs(c, q.Visible); err != nil {
			return err
		}
	}
	body, total, matched, err := o.objects.ListJSON(ctx, k.Prefix, q)
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
func (o objectRoutes) visibleJobs(c *fiber.Ctx, visible []string) ([]string, error) {
	machines, err := o.machines.of(c)
	if err != nil || machines == nil {
		return visible, err
	}
	keys := []string{}
	if len(machines) == 0 {
		return keys, nil
	}
	k := o.kinds.Kind("jobs")
	q := backend.Query{Limit: -1, Visible: visible, Filters: []backend.Filter{{
		Name: "Machine", Target: backend.TargetIndex, Index: k.Indexes["Machine"], Op: backend.OpIn, Values: machines}}}
	jobs, _, _, err := o.objects.List(userContext(c), "jobs", q)
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
func (o objectRoutes) write(c *fiber.Ctx, status int, do func(ctx context.Context, prefix, key string) (backend.Model, error)) error {
	k, err := o.kinds.Lookup(routePrefix(c))
	if err != nil {
		return err
	}
	m, err := do(userContext(c), k.Prefix, routeKey(c))
	if err != nil {
		return err
	}
	o.refresh.afterWrite(c, k.Prefix)
	if c.Method() == fiber.MethodPost {
		// The caller wrote the new object; it sees it as created.
		return c.Status(status).JSON(backend.Sanitize(m))
	}
	view, err := replyView(o.kinds, c, backend.Sanitize(m), "")
	if err != nil {
		return err
	}
	return c.Status(status).JSON(view)
}

func (o objectRoutes) create(c *fiber.Ctx) error {
	return o.write(c, fiber.StatusCreated, func(ctx context.Context, prefix, _ string) (backend.Model, error) {
		return o.objects.Create(ctx, prefix, c.Body())
	})
}

// importMany creates the JSON array of objects in the body at once
// (POST /<prefix>/import): the guard required one create claim per item,
// and the object service validates each as a single create and writes all
// of them or none (docs/design.md §4.9).
func (o objectRoutes) importMany(c *fiber.Ctx) error {
	prefix := routePrefix(c)
	items, err := claims.ImportItems(prefix, c.Body())
	if err != nil {
		return err
	}
	ms, err := o.objects.CreateMany(userContext(c), prefix, items)
	if err != nil {
		return err
	}
	o.refresh.afterWrite(c, prefix)
	for _, m := range ms {
		backend.Sanitize(m)
	}
	return c.Status(fiber.StatusCreated).JSON(ms)
}

// get serves GET and HEAD of one object, with DRP's long poll:
// If-None-Match plus Prefer: wait=<dur> answers 304 when nothing changed.
// A long poll is authorized again when it wakes (reauthorize): a caller
// that lost access to the object while waiting gets the answer for a
// missing object, not the object or its ETag.
func (o objectRoutes) get(c *fiber.Ctx) error {
	k, err := o.kinds.Lookup(routePrefix(c))
	if err != nil {
		return err
	}
	ctx := userContext(c)
	key := routeKey(c)
	v, err := o.objects.View(ctx, k.Prefix, key)
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
		changed, err := o.objects.Wait(o.wait(ctx), k.Prefix, v.Model.Key(), etag, wait)
		if err != nil {
			return err
		}
		if err := o.reauthorize(c); err != nil {
			return o.lostAccess(c, err)
		}
		if !changed {
			c.Set(fiber.HeaderETag, etag)
			return c.SendStatus(fiber.StatusNotModified)
		}
		if v, err = o.objects.View(ctx, k.Prefix, v.Model.Key()); err != nil {
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
	m, rev, err := o.objects.Get(ctx, k.Prefix, v.Model.Key())
	if err != nil {
		return err
	}
	if rev != v.Rev {
		c.Set(fiber.HeaderETag, etagOf(m, rev))
	}
	if err := o.objects.Shape(ctx, m, q); err != nil {
		return err
	}
	return c.JSON(backend.Sanitize(m))
}

// lostAccess is the answer to a request whose access ended while it waited:
// a refusal of any kind answers as a missing object would; a failure to
// decide stays that failure.
func (o objectRoutes) lostAccess(c *fiber.Ctx, err error) error {
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

func (o objectRoutes) patch(c *fiber.Ctx) error {
	return o.write(c, fiber.StatusOK, func(ctx context.Context, prefix, key string) (backend.Model, error) {
		return o.objects.Patch(ctx, prefix, key, c.Body(), c.QueryBool("force"))
	})
}

func (o objectRoutes) put(c *fiber.Ctx) error {
	return o.write(c, fiber.StatusOK, func(ctx context.Context, prefix, key string) (backend.Model, error) {
		return o.objects.Put(ctx, prefix, key, c.Body())
	})
}

func (o objectRoutes) delete(c *fiber.Ctx) error {
	return o.write(c, fiber.StatusOK, func(ctx context.Context, prefix, key string) (backend.Model, error) {
		return o.objects.Delete(ctx, prefix, key)
	})
}

// indexes lists a kind's indexes (DRP's /indexes/<prefix>).
func (r catalogRoutes) indexes(c *fiber.Ctx) error {
	k, err := r.kinds.Lookup(routePrefix(c))
	if err != nil {
		return err
	}
	return c.JSON(k.Indexes)
}

func (r catalogRoutes) allIndexes(c *fiber.Ctx) error {
	out := map[string]map[string]backend.Index{}
	for _, p := range r.kinds.Prefixes() {
		out[p] = r.kinds.Kind(p).Indexes
	}
	return c.JSON(out)
}

// prefixes lists the object prefixes this server serves, as DRP's
// GET /objects does: a JSON array of strings, sorted.
func (r catalogRoutes) prefixes(c *fiber.Ctx) error {
	return c.JSON(r.kinds.Prefixes())
}

// meta sub-resource.

func (o objectRoutes) getMeta(c *fiber.Ctx) error {
	k, err := o.kinds.Lookup(routePrefix(c))
	if err != nil {
		return err
	}
	m, _, err := o.objects.Get(userContext(c), k.Prefix, routeKey(c))
	if err != nil {
		return err
	}
	return c.JSON(m.Env().Meta)
}

func (o objectRoutes) patchMeta(c *fiber.Ctx) error {
	k, err := o.kinds.Lookup(routePrefix(c))
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
	m, err := o.objects.Patch(userContext(c), k.Prefix, routeKey(c), body, false)
	if err != nil {
		return err
	}
	view, err := replyView(o.kinds, c, m.Env().Meta, "/Meta")
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
