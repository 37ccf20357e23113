// Package claims turns an API request into the claims it requires (reference
// §4.3 "Wanted claims", spec "Authentication: request authorization steps")
// and the facts the gateway needs around them: the object addressed, whether
// it is a collection read, and DRP's operation name for licence messages.
//
// It is a pure function of the request plus three lookups (Resolver): no
// Fiber, no database. It runs on every request, so the route table is built
// once and matching walks path segments without regular expressions.
package claims

import (
	"context"
	"net/url"
	"strconv"
	"strings"

	"github.com/provgate/provgate/backend"
)

// Request is what Derive reads from an HTTP request.
type Request struct {
	Method string
	// Path is the request path as received, still percent-encoded and
	// without the query (fasthttp's URI().PathOriginal()). Derive splits it
	// on '/' before decoding, so an encoded slash stays inside its segment.
	Path  string
	Query url.Values
	Body  []byte
}

// Resolver gives Derive the stored facts some claims depend on.
type Resolver interface {
	// NativeKey turns an "Index:value" key (unique indexes only) into the
	// object's native key. Derive calls it only for such keys. A missing
	// object is an ENOTFOUND error, which Derive returns unchanged.
	NativeKey(ctx context.Context, prefix, key string) (string, error)
	// JobMachine returns the UUID of a job's machine: jobs are authorized by
	// their machine (reference §4.3, authKey).
	JobMachine(ctx context.Context, jobKey string) (string, error)
	// Current returns the stored JSON of an object, for PUT diffs.
	Current(ctx context.Context, prefix, key string) ([]byte, error)
}

// Result is what a request requires and addresses.
type Result struct {
	// Claims are the required claims, deduplicated, in a stable order.
	Claims []backend.Claim
	// Scope is the object scope (prefix) the request addresses.
	Scope string
	// Key is the native key of the addressed object; "" for collections and
	// non-object routes.
	Key string
	// List is set for collection reads, whose tenant visibility the gateway
	// pushes into the store query.
	List bool
	// Operation is DRP's operation name, used in licence refusals
	// (reference §4.7): list, get, create, patch, update, delete, actions,
	// action:<cmd>, token, password, log, pubkey, post.
	Operation string
	// Public is set when the route needs no authentication. No /api/v3
	// route is public today; the field keeps the decision in this table.
	Public bool
	// Pattern is the route pattern that matched (one of Routes()), so the
	// gateway can check that it serves the route Derive authorized.
	Pattern string
}

// Derive returns the claims r requires. Errors are *backend.Error: an
// unknown route is ENOTFOUND "No route", a malformed body EBADREQUEST, and
// Resolver errors pass through.
func Derive(ctx context.Context, r Request, res Resolver) (Result, error) {
	rt, caps, err := match(r.Method, r.Path)
	if err != nil {
		return Result{}, err
	}
	d := deriver{ctx: ctx, r: &r, res: res, rt: rt, caps: caps}
	return d.derive()
}

type deriver struct {
	ctx    context.Context
	r      *Request
	res    Resolver
	rt     *route
	caps   captures
	claims []backend.Claim
}

func (d *deriver) add(action, specific string) {
	c := backend.Claim{Scope: d.rt.scope, Action: action, Specific: specific}
	for _, have := range d.claims {
		if have == c {
			return
		}
	}
	d.claims = append(d.claims, c)
}

func (d *deriver) derive() (Result, error) {
	rt := d.rt
	out := Result{Scope: rt.scope, Operation: rt.op, List: rt.list, Pattern: rt.pattern}
	switch rt.h {
	case hFixed:
		d.add(rt.action, rt.specific)
	case hList:
		d.add("list", "")
		if rt.secure && decodeRequested(d.r.Query) {
			d.add("getSecure", "")
		}
	case hJobCreate:
		m, err := d.jobMachine()
		if err != nil {
			return Result{}, err
		}
		d.add("create", m)
	case hSystemAction:
		// Reference §6.4: system actions are claimed on specific "global".
		out.Operation = "action:" + d.caps.cmd
		d.add(out.Operation, "global")
	case hObject, hPatch, hPut:
		key, specific, err := d.object()
		if err != nil {
			return Result{}, err
		}
		out.Key = key
		if err := d.objectClaims(&out, key, specific); err != nil {
			return Result{}, err
		}
	}
	out.Claims = d.claims
	return out, nil
}

func (d *deriver) objectClaims(out *Result, key, specific string) error {
	rt := d.rt
	switch rt.h {
	case hPatch:
		ptrs, err := patchPointers(d.r.Body)
		if err != nil {
			return backend.NewError(backend.EBADREQUEST, "PATCH", rt.scope, key, err.Error())
		}
		d.updates(ptrs, specific)
	case hPut:
		cur, err := d.res.Current(d.ctx, rt.scope, key)
		if err != nil {
			return err
		}
		ptrs, err := putPointers(rt.scope, key, cur, d.r.Body)
		if err != nil {
			return err
		}
		d.updates(ptrs, specific)
	default:
		action := rt.action
		switch rt.from {
		case fromCmd:
			action = "action:" + d.caps.cmd
			out.Operation = action
		case fromParam:
			action = "update:/Params/" + escapePointer(d.caps.name)
		}
		d.add(action, specific)
		if rt.secure && decodeRequested(d.r.Query) {
			d.add("getSecure", specific)
		}
	}
	return nil
}

// updates adds one update claim per changed pointer, under the route's
// pointer prefix (/Params for params patches, /Meta for meta patches).
func (d *deriver) updates(ptrs []string, specific string) {
	for _, p := range ptrs {
		if p == "" && d.rt.ptrPrefix == "" {
			// The whole document: only the bare update claim covers it.
			d.add("update", specific)
			continue
		}
		d.add("update:"+d.rt.ptrPrefix+p, specific)
	}
	if len(d.claims) == 0 {
		// An empty patch (or one of only tests) changes nothing: drpcli
		// sends [] when nothing changed (reference §3.7). Requiring get
		// keeps it harmless for readers and still hides the object from
		// callers who may not see it.
		d.add("get", specific)
	}
}

// object resolves the addressed key. It returns the native key and the
// claim specific, which for jobs is the job's machine (reference §4.3).
func (d *deriver) object() (key, specific string, err error) {
	key = d.caps.key
	if d.rt.resolve && isIndexKey(d.rt.scope, key) {
		if key, err = d.res.NativeKey(d.ctx, d.rt.scope, key); err != nil {
			return "", "", err
		}
	}
	specific = key
	if d.rt.scope == "jobs" {
		if specific, err = d.res.JobMachine(d.ctx, key); err != nil {
			return "", "", err
		}
	}
	return key, specific, nil
}

// jobMachine is the claim specific of a job create: the Machine of the body
// (reference §8.3), resolved like the job service resolves it. An index key
// naming no machine stays as given, so that the service answers its 422
// "Machine ... does not exist" rather than a 404 here.
func (d *deriver) jobMachine() (string, error) {
	m, err := jobMachine(d.r.Body)
	if err != nil || !isIndexKey("machines", m) {
		return m, err
	}
	native, err := d.res.NativeKey(d.ctx, "machines", m)
	switch {
	case err == nil:
		return native, nil
	case backend.IsCode(err, backend.ENOTFOUND):
		return m, nil
	}
	return "", err
}

// isIndexKey reports whether key has the "Index:value" form for a unique
// index of the kind. Other keys containing ':' (IPv6 reservation addresses)
// are native keys.
func isIndexKey(prefix, key string) bool {
	i := strings.IndexByte(key, ':')
	if i <= 0 {
		return false
	}
	k := backend.KindOf(prefix)
	if k == nil {
		return false
	}
	idx, ok := k.Indexes[key[:i]]
	return ok && idx.Unique
}

// decodeRequested fails closed: any decode value other than a clean false
// asks for decoded secure params, so getSecure is required.
func decodeRequested(q url.Values) bool {
	vs, ok := q["decode"]
	if !ok {
		return false
	}
	for _, v := range vs {
		if b, err := strconv.ParseBool(v); err != nil || b {
			return true
		}
	}
	return false
}

func noRoute(method, path string) error {
	return &backend.Error{Code: backend.ENOTFOUND, Type: method, Key: path, Messages: []string{"No route"}}
}
