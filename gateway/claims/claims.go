// Package claims turns an API request into the claims it requires (docs/design.md
// §5.4 "Wanted claims per route", §2.1)
// and the facts the gateway needs around them: the object addressed, whether
// it is a collection read, and DRP's operation name for licence messages.
//
// It is a pure function of the request plus three lookups (Resolver): no
// Fiber, no database. It runs on every request, so the route table is built
// once and matching walks path segments without regular expressions.
package claims

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
	// their machine (docs/design.md §5.5, authKey).
	JobMachine(ctx context.Context, jobKey string) (string, error)
	// Current returns the stored JSON of an object, for PUT diffs.
	Current(ctx context.Context, prefix, key string) ([]byte, error)
}

// Result is what a request requires and addresses. It is also what the
// handler acts on: the gateway reads the object's scope, key, param name and
// command from here rather than from the path again, so that what was
// authorized and what is served are one value.
type Result struct {
	// Claims are the required claims, deduplicated, in a stable order.
	Claims []backend.Claim
	// Scope is the object scope (prefix) the request addresses.
	Scope string
	// Key is the native key of the addressed object; "" for collections and
	// non-object routes.
	Key string
	// Ref is the object as the caller named it (the path's key, decoded):
	// "Name:m2" or a UUID. Answers about an object the caller may not see
	// name Ref, exactly as for a missing object, never Key.
	Ref string
	// Specific is the claim specific of the addressed object: Key, or the
	// machine's UUID for a job (jobs are authorized by their machine).
	Specific string
	// Name is the param name of a params sub-resource
	// (/<prefix>/<key>/params/<name...>), decoded segment by segment.
	Name string
	// Cmd is the command of an action route (/actions/<cmd>,
	// /system/actions/<cmd>), decoded.
	Cmd string
	// Written are the values the request writes into the addressed object
	// (PATCH add and replace ops, a PUT's changed fields, a param set), by
	// pointer into the object's JSON, as the caller sent them. Write
	// replies to a caller without get on the object show only these.
	Written []Write
	// List is set for collection reads, whose tenant visibility the gateway
	// pushes into the store query.
	List bool
	// Operation is DRP's operation name, used in licence refusals
	// (docs/design.md §7): list, get, create, patch, update, delete, actions,
	// action:<cmd>, token, password, log, pubkey, post.
	Operation string
	// Public is set when the route needs no authentication. No /api/v3
	// route is public today; the field keeps the decision in this table.
	Public bool
	// Pattern is the pattern of the route the request took (one of
	// Routes()).
	Pattern string
	// Proposal says how the request's body shapes the addressed object
	// after the write (policies.Input.Proposed); PatchRoot is the pointer a
	// PATCH applies under ("" for the object, "/Meta", "/Params").
	Proposal  Proposal
	PatchRoot string
	// Items are the objects of an import (POST /<prefix>/import) with the
	// create claim each needs alone, in body order.
	Items []ImportItem
}

// Proposal is how a write forms the object it leaves behind.
type Proposal int

// Proposals.
const (
	// ProposeNone: the request writes no object, or none the gateway models.
	ProposeNone Proposal = iota
	// ProposeBody: the body is the whole object (create, PUT).
	ProposeBody
	// ProposePatch: the body is a JSON Patch of the stored object, applied
	// under PatchRoot.
	ProposePatch
	// ProposeParams: the body replaces the object's Params.
	ProposeParams
	// ProposeParam: the body sets the param Name (a DELETE removes it).
	ProposeParam
)

// Write is one value a request writes: Value (JSON, as sent) at Pointer, an
// RFC 6901 pointer into the addressed object's JSON.
type Write struct {
	Pointer string
	Value   json.RawMessage
}

// MaxPatchOps bounds the operations of one JSON Patch. Each op can need a
// claim of its own; a larger patch is refused (413) before any is derived.
const MaxPatchOps = 1000

// maxPutPointers bounds the claims a PUT derives: a PUT that changes more
// leaves is authorized by its changed top-level fields instead (update:/F
// covers every pointer under /F, so this only ever asks for more).
const maxPutPointers = MaxPatchOps

// Derive returns the claims r requires. Errors are *backend.Error: an
// unknown route is ENOTFOUND "No route", a malformed body EBADREQUEST, a
// patch of more than MaxPatchOps ops ETOOLARGE, and Resolver errors pass
// through. When the request addresses an object and only its body is at
// fault, the Result still names the object (Scope, Key, Ref, Specific), so
// that the gateway can decide visibility before reporting the body error.
//
// Derive finds r's route by its method and path (Match); the gateway's
// guard, whose router already found it, calls the route's Derive.
func Derive(ctx context.Context, r Request, res Resolver) (Result, error) {
	rt, caps, err := match(r.Method, r.Path)
	if err != nil {
		return Result{}, err
	}
	d := deriver{ctx: ctx, r: &r, res: res, rt: rt, caps: caps}
	return d.derive()
}

// Derive returns the claims r requires on route rt, the route the router
// took for r: r's path only gives the route's key, command and param name.
// Errors are those of the package's Derive.
func (rt *Route) Derive(ctx context.Context, r Request, res Resolver) (Result, error) {
	caps, err := rt.captures(r.Method, r.Path)
	if err != nil {
		return Result{}, err
	}
	d := deriver{ctx: ctx, r: &r, res: res, rt: rt, caps: caps}
	return d.derive()
}

type deriver struct {
	ctx     context.Context
	r       *Request
	res     Resolver
	rt      *Route
	caps    captures
	claims  []backend.Claim
	seen    map[backend.Claim]struct{}
	written []Write
}

// add appends a claim once. A map keeps it linear in the number of claims
// (a patch may hold MaxPatchOps of them).
func (d *deriver) add(action, specific string) {
	c := backend.Claim{Scope: d.rt.scope, Action: action, Specific: specific}
	if d.seen == nil {
		d.seen = map[backend.Claim]struct{}{}
	}
	if _, ok := d.seen[c]; ok {
		return
	}
	d.seen[c] = struct{}{}
	d.claims = append(d.claims, c)
}

func (d *deriver) derive() (Result, error) {
	rt := d.rt
	out := Result{Scope: rt.scope, Operation: rt.op, List: rt.list, Pattern: rt.Pattern, Name: d.caps.name, Cmd: d.caps.cmd}
	switch rt.h {
	case hFixed:
		d.add(rt.action, rt.specific)
	case hList:
		d.add("list", "")
		if rt.secure && decodeRequested(d.r.Query) {
			d.add("getSecure", "")
		}
	case hCreate:
		d.add("create", createSpecific(rt.scope, d.r.Body))
		out.Proposal = ProposeBody
	case hImport:
		items, err := ImportItems(rt.scope, d.r.Body)
		if err != nil {
			return Result{}, err
		}
		// Each item needs what creating it alone needs (docs/design.md
		// §4.9).
		for _, item := range items {
			spec := createSpecific(rt.scope, item)
			d.add("create", spec)
			out.Items = append(out.Items, ImportItem{Body: item,
				Claim: backend.Claim{Scope: rt.scope, Action: "create", Specific: spec}})
		}
	case hJobCreate:
		m, err := d.jobMachine()
		if err != nil {
			return Result{}, err
		}
		d.add("create", m)
		out.Proposal = ProposeBody
	case hBodyUser:
		user, err := bodyUser(d.r.Body)
		if err != nil {
			return Result{}, err
		}
		out.Key, out.Ref, out.Specific = user, user, user
		d.add("get", user)
	case hQueryRoles:
		for _, k := range []string{"a", "b"} {
			name := d.r.Query.Get(k)
			if name == "" {
				return Result{}, backend.NewError(backend.EBADREQUEST, d.r.Method, "roles", "", "query parameter "+k+" (a role name) is required")
			}
			d.add("get", name)
		}
	case hSystemAction:
		// docs/design.md §5.4: system actions are claimed on specific "global".
		out.Operation = "action:" + d.caps.cmd
		d.add(out.Operation, "global")
	case hObject, hPatch, hPut:
		key, specific, err := d.object()
		if err != nil {
			return Result{}, err
		}
		out.Key, out.Ref, out.Specific = key, d.caps.key, specific
		if err := d.objectClaims(&out, key, specific); err != nil {
			return out, err
		}
	}
	out.Claims = d.claims
	out.Written = d.written
	return out, nil
}

func (d *deriver) objectClaims(out *Result, key, specific string) error {
	rt := d.rt
	switch rt.h {
	case hPatch:
		out.Proposal, out.PatchRoot = ProposePatch, rt.ptrPrefix
		p, err := parsePatch(d.r.Body)
		if err != nil {
			return patchError(rt.scope, key, err)
		}
		d.updates(p.changed, specific)
		if p.reads {
			// A test op reads the value it compares, and copy reads its
			// from: both reveal what get would (a failed test is an
			// oracle), so they need get as well.
			d.add("get", specific)
		}
		for _, w := range p.written {
			d.written = append(d.written, Write{Pointer: rt.ptrPrefix + w.Pointer, Value: w.Value})
		}
	case hPut:
		out.Proposal = ProposeBody
		cur, err := d.res.Current(d.ctx, rt.scope, key)
		if err != nil {
			return err
		}
		ptrs, written, err := putPointers(rt.scope, key, cur, d.r.Body)
		if err != nil {
			return err
		}
		if len(ptrs) > maxPutPointers {
			ptrs = topLevel(ptrs)
		}
		d.updates(ptrs, specific)
		d.written = written
	default:
		action := rt.action
		switch rt.from {
		case fromCmd:
			action = "action:" + d.caps.cmd
			out.Operation = action
		case fromParam:
			out.Proposal = ProposeParam
			ptr := "/Params/" + backend.EscapePointer(d.caps.name)
			action = "update:" + ptr
			if d.r.Method != "DELETE" && len(d.r.Body) > 0 {
				d.written = append(d.written, Write{Pointer: ptr, Value: json.RawMessage(d.r.Body)})
			}
		}
		if rt.action == "update:/Params" {
			out.Proposal = ProposeParams
		}
		if rt.action == "update:/Params" && len(d.r.Body) > 0 {
			// POST /<prefix>/<key>/params replaces the whole map.
			d.written = append(d.written, Write{Pointer: "/Params", Value: json.RawMessage(d.r.Body)})
		}
		d.add(action, specific)
		if rt.secure && decodeRequested(d.r.Query) {
			d.add("getSecure", specific)
		}
	}
	return nil
}

func patchError(scope, key string, err error) error {
	if errors.Is(err, errTooManyOps) {
		return backend.NewError(backend.ETOOLARGE, "PATCH", scope, key, err.Error())
	}
	return backend.NewError(backend.EBADREQUEST, "PATCH", scope, key, err.Error())
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
		// sends [] when nothing changed (docs/design.md §3.8). Requiring get
		// keeps it harmless for readers and still hides the object from
		// callers who may not see it.
		d.add("get", specific)
	}
}

// ImportItem is one object of an import and the claim creating it needs.
type ImportItem struct {
	Body  json.RawMessage
	Claim backend.Claim
}

// MaxImportItems bounds the objects of one import request; each needs its
// own create claim.
const MaxImportItems = MaxPatchOps

// ImportItems splits an import body, a JSON array of objects, into its
// items: 400 when it is not a non-empty array, 413 above MaxImportItems.
func ImportItems(scope string, body []byte) ([]json.RawMessage, error) {
	var items []json.RawMessage
	if err := json.Unmarshal(body, &items); err != nil {
		return nil, backend.NewError(backend.EBADREQUEST, "POST", scope, "", "import body must be a JSON array of objects: "+err.Error())
	}
	if len(items) == 0 {
		return nil, backend.NewError(backend.EBADREQUEST, "POST", scope, "", "import body holds no objects")
	}
	if len(items) > MaxImportItems {
		return nil, backend.NewError(backend.ETOOLARGE, "POST", scope, "",
			fmt.Sprintf("import body holds %d objects, at most %d are allowed per request", len(items), MaxImportItems))
	}
	return items, nil
}

// bodyUser reads the User an access question is about ("" for the caller
// itself).
func bodyUser(body []byte) (string, error) {
	var q struct {
		User string `json:"User"`
	}
	if len(body) == 0 {
		return "", nil
	}
	if err := json.Unmarshal(body, &q); err != nil {
		return "", backend.NewError(backend.EBADREQUEST, "POST", "access", "", "body must be a JSON object: "+err.Error())
	}
	return q.User, nil
}

// createSpecific is the claim specific of a create: the key the object
// service will give the new object, read from the body the way it reads it
// (decoded into the kind's model, so field names match case-insensitively
// and the last of two spellings wins). A claim naming one key thus creates
// exactly that object. A body that names no key (a machine without Uuid,
// whose key the server generates), that does not decode (the object service
// answers it), or whose key no claim can name on its own (a list, "*",
// surrounding space) gives "*": only a claim on every object covers it.
func createSpecific(scope string, body []byte) string {
	k := kinds.Kind(scope)
	if k == nil {
		return "*"
	}
	m := k.New()
	if err := json.Unmarshal(body, m); err != nil {
		return "*"
	}
	m.Fill()
	key := m.Key()
	if key == "" || key == "*" || strings.ContainsRune(key, ',') || strings.TrimSpace(key) != key {
		return "*"
	}
	return key
}

// object resolves the addressed key. It returns the native key and the
// claim specific, which for jobs is the job's machine (docs/design.md §5.5).
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
// (docs/design.md §10.2), resolved like the job service resolves it. An index key
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
	k := kinds.Kind(prefix)
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
