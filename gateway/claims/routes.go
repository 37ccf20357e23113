package claims

import (
	"net/url"
	"sort"
	"strings"

	"github.com/provgate/provgate/backend"
)

// RouteInfo is one route form Derive handles. Pattern uses {key} for one
// path segment and {name...} for the rest of the path (param names hold '/').
type RouteInfo struct {
	Method  string
	Pattern string
}

// FiberPath is Pattern in Fiber's syntax (":key", "*").
func (ri RouteInfo) FiberPath() string {
	segs := strings.Split(ri.Pattern, "/")
	for i, s := range segs {
		switch {
		case strings.HasSuffix(s, "...}"):
			segs[i] = "*"
		case strings.HasPrefix(s, "{"):
			segs[i] = ":" + strings.Trim(s, "{}")
		}
	}
	return strings.Join(segs, "/")
}

// Routes lists every route form Derive handles, sorted by pattern then
// method. GET routes come with HEAD, as Fiber registers both for app.Get.
func Routes() []RouteInfo {
	out := make([]RouteInfo, len(table.all))
	for i, rt := range table.all {
		out[i] = RouteInfo{Method: rt.method, Pattern: rt.pattern}
	}
	return out
}

type handler uint8

const (
	hFixed        handler = iota // one fixed claim
	hList                        // P list "" (+ getSecure with decode)
	hCreate                      // P create <key of the body>
	hImport                      // P create <key of each item of the body>
	hJobCreate                   // jobs create <Machine of body>
	hSystemAction                // system action:<cmd> global
	hObject                      // one claim on the addressed object
	hPatch                       // update:<pointer> per patch op
	hPut                         // update:<pointer> per changed leaf
	hBodyUser                    // users get <the body's User> ("" asks about oneself)
	hQueryRoles                  // roles get <a>, roles get <b> (the query's a and b)
)

// actionFrom says where an object claim's action comes from.
type actionFrom uint8

const (
	fromRoute actionFrom = iota
	fromCmd              // action:<cmd>
	fromParam            // update:/Params/<name>
)

type segKind uint8

const (
	segLit  segKind = iota
	segKey          // {key}: one segment
	segCmd          // {cmd}: one segment
	segRest         // {key...} or {name...}: one or more segments
)

type seg struct {
	kind segKind
	lit  string
	// name is the capture a segRest fills: "key" or "name".
	name string
}

type route struct {
	method    string
	pattern   string
	segs      []seg // after /api/v3
	h         handler
	scope     string
	action    string
	specific  string
	op        string
	list      bool
	secure    bool // decode=true also needs getSecure
	resolve   bool // {key} is an object key (Index:value allowed)
	from      actionFrom
	ptrPrefix string
}

type captures struct{ key, name, cmd string }

type routeHead struct{ method, first string }

type routeTable struct {
	all []*route
	// byFirst indexes routes by method and first literal segment after
	// /api/v3, leaving a handful to try per request.
	byFirst map[routeHead][]*route
}

const apiBase = "/api/v3"

var table = buildTable()

// kinds is the catalog the route table and the patch field names are
// built from, once, when the package loads: derivation is a pure function
// of the request (docs/design.md §1.2), and the table is the same for
// every server. It is never modified.
var kinds = backend.NewCatalog()

func buildTable() *routeTable {
	var all []*route
	add := func(methods, pattern string, rt route) {
		for _, m := range strings.Split(methods, "|") {
			r := rt
			r.method, r.pattern, r.segs = m, apiBase+pattern, parsePattern(pattern)
			all = append(all, &r)
			if m == "GET" {
				h := r
				h.method = "HEAD"
				all = append(all, &h)
			}
		}
	}
	for _, p := range kinds.Prefixes() {
		kind := kinds.Kind(p)
		secure := kinds.ValidAction(p, "getSecure")
		key := "/{key}"
		if p == "params" {
			// Param names hold '/' and appear unescaped (docs/design.md §3.4),
			// so a param's key is the rest of the path and params have no
			// sub-resources that could be confused with a name.
			key = "/{key...}"
		}
		obj := "/" + p + key
		add("GET", "/"+p, route{h: hList, scope: p, op: "list", list: true, secure: secure})
		if p == "jobs" {
			add("POST", "/jobs", route{h: hJobCreate, scope: p, op: "create"})
		} else {
			add("POST", "/"+p, route{h: hCreate, scope: p, op: "create"})
		}
		add("GET", obj, route{h: hObject, scope: p, action: "get", op: "get", secure: secure, resolve: true})
		add("PATCH", obj, route{h: hPatch, scope: p, op: "patch", resolve: true})
		add("PUT", obj, route{h: hPut, scope: p, op: "update", resolve: true})
		add("DELETE", obj, route{h: hObject, scope: p, action: "delete", op: "delete", resolve: true})
		add("GET", "/indexes/"+p, route{h: hFixed, scope: p, action: "list", op: "list"})
		add("GET", "/meta"+obj, route{h: hObject, scope: p, action: "get", op: "get", resolve: true})
		add("PATCH", "/meta"+obj, route{h: hPatch, scope: p, op: "patch", resolve: true, ptrPrefix: "/Meta"})
		if p == "params" {
			continue
		}
		add("GET", obj+"/actions", route{h: hObject, scope: p, action: "actions", op: "actions", resolve: true})
		add("GET|POST", obj+"/actions/{cmd}", route{h: hObject, scope: p, from: fromCmd, resolve: true})
		if kind.HasParams {
			// docs/design.md §5.4: params mutations are update:/Params patches
			// of the parent object.
			add("GET", obj+"/params", route{h: hObject, scope: p, action: "get", op: "get", secure: secure, resolve: true})
			add("POST", obj+"/params", route{h: hObject, scope: p, action: "update:/Params", op: "update", resolve: true})
			add("PATCH", obj+"/params", route{h: hPatch, scope: p, op: "patch", resolve: true, ptrPrefix: "/Params"})
			add("GET", obj+"/params/{name...}", route{h: hObject, scope: p, action: "get", op: "get", secure: secure, resolve: true})
			add("POST|PUT|DELETE", obj+"/params/{name...}", route{h: hObject, scope: p, from: fromParam, op: "update", resolve: true})
		}
		if kinds.ValidAction(p, "updateSecure") {
			add("GET", obj+"/pubkey", route{h: hObject, scope: p, action: "updateSecure", op: "pubkey", resolve: true})
		}
		if backend.Importable(p) {
			add("POST", "/"+p+"/import", route{h: hImport, scope: p, op: "create"})
		}
		switch p {
		case "users":
			add("GET", obj+"/token", route{h: hObject, scope: p, action: "token", op: "token", resolve: true})
			add("PUT", obj+"/password", route{h: hObject, scope: p, action: "password", op: "password", resolve: true})
			// Rotating a user's Secret revokes its tokens: the same claim
			// as patching /Secret.
			add("POST", obj+"/secret", route{h: hObject, scope: p, action: "update:/Secret", op: "update", resolve: true})
		case "pools":
			add("GET", obj+"/status", route{h: hObject, scope: p, action: "get", op: "get", resolve: true})
			for _, v := range backend.PoolVerbs {
				verb := string(v)
				add("POST", obj+"/"+verb, route{h: hObject, scope: p, action: "action:" + verb, op: "action:" + verb, resolve: true})
			}
		case "machines":
			add("POST", obj+"/releaseToPool", route{h: hObject, scope: p, action: "action:releaseToPool", op: "action:releaseToPool", resolve: true})
		case "jobs":
			add("GET|PUT", obj+"/log", route{h: hObject, scope: p, action: "log", op: "log", resolve: true})
		case "plugins":
			add("GET", obj+"/attempts", route{h: hObject, scope: p, action: "get", op: "get", resolve: true})
		}
	}
	// Authentication alone grants info get (docs/design.md §5.5), so the index
	// list of every kind asks for nothing more.
	add("GET", "/indexes", route{h: hFixed, scope: "info", action: "get", op: "get"})
	add("GET", "/info", route{h: hFixed, scope: "info", action: "get", op: "get"})
	add("GET", "/objects", route{h: hFixed, scope: "objects", action: "list", op: "list"})
	add("GET", "/prefs", route{h: hFixed, scope: "preferences", action: "list", op: "list"})
	add("POST", "/prefs", route{h: hFixed, scope: "preferences", action: "post", op: "post"})
	add("GET", "/license", route{h: hFixed, scope: "license", action: "get", op: "get"})
	add("PUT|POST", "/license", route{h: hFixed, scope: "license", action: "update", op: "update"})
	add("GET", "/plugin_providers", route{h: hFixed, scope: "plugin_providers", action: "list", op: "list", list: true})
	// Plugin providers are not stored objects: the name is used as given.
	add("GET", "/plugin_providers/{key}", route{h: hObject, scope: "plugin_providers", action: "get", op: "get"})
	add("GET", "/pools-active", route{h: hFixed, scope: "pools", action: "list", op: "list", list: true})
	add("POST", "/events", route{h: hFixed, scope: "events", action: "post", op: "post"})
	// The event stream needs authentication only, like /info: each event
	// is authorized when it is sent (docs/design.md §13.2).
	add("GET", "/ws", route{h: hFixed, scope: "info", action: "get", op: "get"})
	add("POST", "/system/actions/{cmd}", route{h: hSystemAction, scope: "system"})
	// The access explorer (docs/design.md §9.8). Questions about a user
	// need get on that user, which every user holds on itself; the
	// answers then list only what the caller may see.
	add("POST", "/access/explain", route{h: hBodyUser, scope: "users", op: "get"})
	add("GET", "/access/users/{key}", route{h: hObject, scope: "users", action: "get", op: "get", resolve: true})
	add("GET", "/access/tenants/{key}", route{h: hObject, scope: "tenants", action: "get", op: "get", resolve: true})
	add("GET", "/access/roles/diff", route{h: hQueryRoles, scope: "roles", op: "get"})
	add("GET", "/access/who", route{h: hFixed, scope: "info", action: "get", op: "get"})
	add("GET", "/access/denials", route{h: hFixed, scope: "info", action: "get", op: "get"})
	add("GET", "/access/escalation", route{h: hFixed, scope: "info", action: "get", op: "get"})
	// A candidate policy is compiled and run in the server, and its diff
	// replays other users' logged requests: a system act.
	add("POST", "/access/policy/diff", route{h: hFixed, scope: "system", action: "action:policyDiff", specific: "global", op: "action:policyDiff"})

	sort.SliceStable(all, func(i, j int) bool {
		if all[i].pattern != all[j].pattern {
			return all[i].pattern < all[j].pattern
		}
		return all[i].method < all[j].method
	})
	t := &routeTable{all: all, byFirst: map[routeHead][]*route{}}
	for _, rt := range all {
		h := routeHead{rt.method, rt.segs[0].lit}
		t.byFirst[h] = append(t.byFirst[h], rt)
	}
	return t
}

func parsePattern(p string) []seg {
	parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
	out := make([]seg, len(parts))
	for i, s := range parts {
		switch {
		case strings.HasSuffix(s, "...}"):
			out[i] = seg{kind: segRest, name: strings.TrimSuffix(strings.TrimPrefix(s, "{"), "...}")}
		case s == "{cmd}":
			out[i] = seg{kind: segCmd}
		case strings.HasPrefix(s, "{"):
			out[i] = seg{kind: segKey}
		default:
			out[i] = seg{kind: segLit, lit: s}
		}
	}
	return out
}

// match finds the route of method and raw path. Segments are split on the
// raw '/' and then percent-decoded one by one, so "%2F" in a key decodes to
// '/' for lookup but never adds a segment. Empty, "." and ".." segments
// never match: a key may not step out of its segment, whatever a proxy in
// front would make of it.
func match(method, raw string) (*route, captures, error) {
	rest, ok := strings.CutPrefix(raw, apiBase+"/")
	if !ok {
		return nil, captures{}, noRoute(method, raw)
	}
	// Fiber's default (non-strict) routing treats a trailing slash as absent.
	rest = strings.TrimSuffix(rest, "/")
	var buf [8]string
	segs := buf[:0]
	for {
		s, tail, more := strings.Cut(rest, "/")
		if strings.IndexByte(s, '%') >= 0 {
			dec, err := url.PathUnescape(s)
			if err != nil {
				return nil, captures{}, backend.NewError(backend.EBADREQUEST, method, "", raw, "invalid escape in path")
			}
			s = dec
		}
		if s == "" || s == "." || s == ".." {
			return nil, captures{}, noRoute(method, raw)
		}
		segs = append(segs, s)
		if !more {
			break
		}
		rest = tail
	}
	for _, rt := range table.byFirst[routeHead{method, segs[0]}] {
		if c, ok := rt.match(segs); ok {
			return rt, c, nil
		}
	}
	return nil, captures{}, noRoute(method, raw)
}

func (rt *route) match(segs []string) (captures, bool) {
	var c captures
	for i, ps := range rt.segs {
		if i >= len(segs) {
			return c, false
		}
		switch ps.kind {
		case segLit:
			if segs[i] != ps.lit {
				return c, false
			}
		case segKey:
			c.key = segs[i]
		case segCmd:
			c.cmd = segs[i]
		case segRest:
			v := strings.Join(segs[i:], "/")
			if ps.name == "key" {
				c.key = v
			} else {
				c.name = v
			}
			return c, true
		}
	}
	return c, len(segs) == len(rt.segs)
}
