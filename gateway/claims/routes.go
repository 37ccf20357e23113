package claims

import (
	"net/url"
	"sort"
	"strings"

	"github.com/provgate/provgate/backend"
)

// FiberPath is the route's pattern in Fiber's syntax (":key", "*"): the
// gateway registers each route under it.
func (rt *Route) FiberPath() string {
	segs := strings.Split(rt.Pattern, "/")
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

// Routes is the route table, every /api/v3 route exactly once, sorted by
// pattern then method: the order in which Match tries them, and in which
// the gateway registers them. GET routes come with HEAD. The routes are
// shared: callers must not change them.
func Routes() []*Route { return table.all }

// Serve names the gateway handler of a route.
type Serve string

// The gateway's handlers, by the routes they serve.
const (
	ServeList           Serve = "list"
	ServeCreate         Serve = "create"
	ServeGet            Serve = "get"
	ServePut            Serve = "put"
	ServePatch          Serve = "patch"
	ServeDelete         Serve = "delete"
	ServeImport         Serve = "import"
	ServeObjects        Serve = "objects"
	ServeIndexes        Serve = "indexes"
	ServeAllIndexes     Serve = "allIndexes"
	ServeGetMeta        Serve = "getMeta"
	ServePatchMeta      Serve = "patchMeta"
	ServeListActions    Serve = "listActions"
	ServeGetAction      Serve = "getAction"
	ServeRunAction      Serve = "runAction"
	ServeSystemAction   Serve = "systemAction"
	ServePubkey         Serve = "pubkey"
	ServeGetParams      Serve = "getParams"
	ServeSetParams      Serve = "setParams"
	ServePatchParams    Serve = "patchParams"
	ServeGetParam       Serve = "getParam"
	ServeSetParam       Serve = "setParam"
	ServeDeleteParam    Serve = "deleteParam"
	ServeUserToken      Serve = "userToken"
	ServeUserPassword   Serve = "userPassword"
	ServeUserSecret     Serve = "userSecret"
	ServePoolsActive    Serve = "poolsActive"
	ServePoolStatus     Serve = "poolStatus"
	ServePoolOp         Serve = "poolOp"
	ServeReleaseToPool  Serve = "releaseToPool"
	ServeCreateJob      Serve = "createJob"
	ServeGetJobLog      Serve = "getJobLog"
	ServePutJobLog      Serve = "putJobLog"
	ServeJobActions     Serve = "jobActions"
	ServeListProviders  Serve = "listProviders"
	ServeGetProvider    Serve = "getProvider"
	ServePluginAttempts Serve = "pluginAttempts"
	ServeInfo           Serve = "info"
	ServeGetPrefs       Serve = "getPrefs"
	ServeSetPrefs       Serve = "setPrefs"
	ServeGetLicense     Serve = "getLicense"
	ServeSetLicense     Serve = "setLicense"
	ServePostEvent      Serve = "postEvent"
	ServeWS             Serve = "ws"
	ServeExplain        Serve = "explain"
	ServeUserMatrix     Serve = "userMatrix"
	ServeTenantView     Serve = "tenantView"
	ServeRoleDiff       Serve = "roleDiff"
	ServeWho            Serve = "who"
	ServeDenials        Serve = "denials"
	ServeEscalation     Serve = "escalation"
	ServePolicyDiff     Serve = "policyDiff"
)

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

// Route is one row of the route table: the method and path of an /api/v3
// route, the handler serving it (Serve) and how its claims are derived
// (scope, action form). The gateway builds its router from these rows and
// gives each matched request its row, so that the claims derived and the
// handler run are those of one row.
type Route struct {
	Method string
	// Pattern is the path: {key} for one segment, {name...} for the rest
	// of the path (param names hold '/').
	Pattern string
	// Serve names the gateway handler that serves the route.
	Serve Serve

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
	all []*Route
	// byFirst indexes routes by method and first literal segment after
	// /api/v3, leaving a handful to try per request.
	byFirst map[routeHead][]*Route
}

const apiBase = "/api/v3"

var table = buildTable()

// kinds is the catalog the route table and the patch field names are
// built from, once, when the package loads: derivation is a pure function
// of the request (docs/design.md §1.2), and the table is the same for
// every server. It is never modified.
var kinds = backend.NewCatalog()

func buildTable() *routeTable {
	var all []*Route
	add := func(methods, pattern string, serve Serve, rt Route) {
		for _, m := range strings.Split(methods, "|") {
			r := rt
			r.Method, r.Pattern, r.Serve, r.segs = m, apiBase+pattern, serve, parsePattern(pattern)
			all = append(all, &r)
			if m == "GET" {
				h := r
				h.Method = "HEAD"
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
		add("GET", "/"+p, ServeList, Route{h: hList, scope: p, op: "list", list: true, secure: secure})
		if p == "jobs" {
			add("POST", "/jobs", ServeCreateJob, Route{h: hJobCreate, scope: p, op: "create"})
		} else {
			add("POST", "/"+p, ServeCreate, Route{h: hCreate, scope: p, op: "create"})
		}
		add("GET", obj, ServeGet, Route{h: hObject, scope: p, action: "get", op: "get", secure: secure, resolve: true})
		add("PATCH", obj, ServePatch, Route{h: hPatch, scope: p, op: "patch", resolve: true})
		add("PUT", obj, ServePut, Route{h: hPut, scope: p, op: "update", resolve: true})
		add("DELETE", obj, ServeDelete, Route{h: hObject, scope: p, action: "delete", op: "delete", resolve: true})
		add("GET", "/indexes/"+p, ServeIndexes, Route{h: hFixed, scope: p, action: "list", op: "list"})
		add("GET", "/meta"+obj, ServeGetMeta, Route{h: hObject, scope: p, action: "get", op: "get", resolve: true})
		add("PATCH", "/meta"+obj, ServePatchMeta, Route{h: hPatch, scope: p, op: "patch", resolve: true, ptrPrefix: "/Meta"})
		if p == "params" {
			continue
		}
		actions := ServeListActions
		if p == "jobs" {
			// A job's actions are its rendered task templates.
			actions = ServeJobActions
		}
		add("GET", obj+"/actions", actions, Route{h: hObject, scope: p, action: "actions", op: "actions", resolve: true})
		add("GET", obj+"/actions/{cmd}", ServeGetAction, Route{h: hObject, scope: p, from: fromCmd, resolve: true})
		add("POST", obj+"/actions/{cmd}", ServeRunAction, Route{h: hObject, scope: p, from: fromCmd, resolve: true})
		if kind.HasParams {
			// docs/design.md §5.4: params mutations are update:/Params patches
			// of the parent object.
			add("GET", obj+"/params", ServeGetParams, Route{h: hObject, scope: p, action: "get", op: "get", secure: secure, resolve: true})
			add("POST", obj+"/params", ServeSetParams, Route{h: hObject, scope: p, action: "update:/Params", op: "update", resolve: true})
			add("PATCH", obj+"/params", ServePatchParams, Route{h: hPatch, scope: p, op: "patch", resolve: true, ptrPrefix: "/Params"})
			add("GET", obj+"/params/{name...}", ServeGetParam, Route{h: hObject, scope: p, action: "get", op: "get", secure: secure, resolve: true})
			add("POST|PUT", obj+"/params/{name...}", ServeSetParam, Route{h: hObject, scope: p, from: fromParam, op: "update", resolve: true})
			add("DELETE", obj+"/params/{name...}", ServeDeleteParam, Route{h: hObject, scope: p, from: fromParam, op: "update", resolve: true})
		}
		if kinds.ValidAction(p, "updateSecure") {
			add("GET", obj+"/pubkey", ServePubkey, Route{h: hObject, scope: p, action: "updateSecure", op: "pubkey", resolve: true})
		}
		if backend.Importable(p) {
			add("POST", "/"+p+"/import", ServeImport, Route{h: hImport, scope: p, op: "create"})
		}
		switch p {
		case "users":
			add("GET", obj+"/token", ServeUserToken, Route{h: hObject, scope: p, action: "token", op: "token", resolve: true})
			add("PUT", obj+"/password", ServeUserPassword, Route{h: hObject, scope: p, action: "password", op: "password", resolve: true})
			// Rotating a user's Secret revokes its tokens: the same claim
			// as patching /Secret.
			add("POST", obj+"/secret", ServeUserSecret, Route{h: hObject, scope: p, action: "update:/Secret", op: "update", resolve: true})
		case "pools":
			add("GET", obj+"/status", ServePoolStatus, Route{h: hObject, scope: p, action: "get", op: "get", resolve: true})
			for _, v := range backend.PoolVerbs {
				verb := string(v)
				add("POST", obj+"/"+verb, ServePoolOp, Route{h: hObject, scope: p, action: "action:" + verb, op: "action:" + verb, resolve: true})
			}
		case "machines":
			add("POST", obj+"/releaseToPool", ServeReleaseToPool, Route{h: hObject, scope: p, action: "action:releaseToPool", op: "action:releaseToPool", resolve: true})
		case "jobs":
			add("GET", obj+"/log", ServeGetJobLog, Route{h: hObject, scope: p, action: "log", op: "log", resolve: true})
			add("PUT", obj+"/log", ServePutJobLog, Route{h: hObject, scope: p, action: "log", op: "log", resolve: true})
		case "plugins":
			add("GET", obj+"/attempts", ServePluginAttempts, Route{h: hObject, scope: p, action: "get", op: "get", resolve: true})
		}
	}
	// Authentication alone grants info get (docs/design.md §5.5), so the index
	// list of every kind asks for nothing more.
	add("GET", "/indexes", ServeAllIndexes, Route{h: hFixed, scope: "info", action: "get", op: "get"})
	add("GET", "/info", ServeInfo, Route{h: hFixed, scope: "info", action: "get", op: "get"})
	add("GET", "/objects", ServeObjects, Route{h: hFixed, scope: "objects", action: "list", op: "list"})
	add("GET", "/prefs", ServeGetPrefs, Route{h: hFixed, scope: "preferences", action: "list", op: "list"})
	add("POST", "/prefs", ServeSetPrefs, Route{h: hFixed, scope: "preferences", action: "post", op: "post"})
	add("GET", "/license", ServeGetLicense, Route{h: hFixed, scope: "license", action: "get", op: "get"})
	add("PUT|POST", "/license", ServeSetLicense, Route{h: hFixed, scope: "license", action: "update", op: "update"})
	add("GET", "/plugin_providers", ServeListProviders, Route{h: hFixed, scope: "plugin_providers", action: "list", op: "list", list: true})
	// Plugin providers are not stored objects: the name is used as given.
	add("GET", "/plugin_providers/{key}", ServeGetProvider, Route{h: hObject, scope: "plugin_providers", action: "get", op: "get"})
	add("GET", "/pools-active", ServePoolsActive, Route{h: hFixed, scope: "pools", action: "list", op: "list", list: true})
	add("POST", "/events", ServePostEvent, Route{h: hFixed, scope: "events", action: "post", op: "post"})
	// The event stream needs authentication only, like /info: each event
	// is authorized when it is sent (docs/design.md §13.2).
	add("GET", "/ws", ServeWS, Route{h: hFixed, scope: "info", action: "get", op: "get"})
	add("POST", "/system/actions/{cmd}", ServeSystemAction, Route{h: hSystemAction, scope: "system"})
	// The access explorer (docs/design.md §9.8). Questions about a user
	// need get on that user, which every user holds on itself; the
	// answers then list only what the caller may see.
	add("POST", "/access/explain", ServeExplain, Route{h: hBodyUser, scope: "users", op: "get"})
	add("GET", "/access/users/{key}", ServeUserMatrix, Route{h: hObject, scope: "users", action: "get", op: "get", resolve: true})
	add("GET", "/access/tenants/{key}", ServeTenantView, Route{h: hObject, scope: "tenants", action: "get", op: "get", resolve: true})
	add("GET", "/access/roles/diff", ServeRoleDiff, Route{h: hQueryRoles, scope: "roles", op: "get"})
	add("GET", "/access/who", ServeWho, Route{h: hFixed, scope: "info", action: "get", op: "get"})
	add("GET", "/access/denials", ServeDenials, Route{h: hFixed, scope: "info", action: "get", op: "get"})
	add("GET", "/access/escalation", ServeEscalation, Route{h: hFixed, scope: "info", action: "get", op: "get"})
	// A candidate policy is compiled and run in the server, and its diff
	// replays other users' logged requests: a system act.
	add("POST", "/access/policy/diff", ServePolicyDiff, Route{h: hFixed, scope: "system", action: "action:policyDiff", specific: "global", op: "action:policyDiff"})

	sort.SliceStable(all, func(i, j int) bool {
		if all[i].Pattern != all[j].Pattern {
			return all[i].Pattern < all[j].Pattern
		}
		return all[i].Method < all[j].Method
	})
	t := &routeTable{all: all, byFirst: map[routeHead][]*Route{}}
	for _, rt := range all {
		h := routeHead{rt.Method, rt.segs[0].lit}
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

// Match finds the route of method and raw path, as the gateway's router
// does: for requests that do not come through it (an explained request,
// a UI view's).
func Match(method, raw string) (*Route, error) {
	rt, _, err := match(method, raw)
	return rt, err
}

// match finds the route of method and raw path and its captures.
func match(method, raw string) (*Route, captures, error) {
	var buf [8]string
	segs, enc, err := segments(method, raw, buf[:0])
	if err != nil {
		return nil, captures{}, err
	}
	for _, rt := range table.byFirst[routeHead{method, segs[0]}] {
		if c, ok := rt.match(segs); ok && rt.literalsPlain(enc) {
			return rt, c, nil
		}
	}
	return nil, captures{}, noRoute(method, raw)
}

// segments splits a raw /api/v3 path into its segments after /api/v3,
// appended to buf. Segments are split on the raw '/' and then
// percent-decoded one by one, so "%2F" in a key decodes to '/' for lookup
// but never adds a segment. Empty, "." and ".." segments never match: a
// key may not step out of its segment, whatever a proxy in front would
// make of it.
//
// encoded has bit i set when segment i (of the first 64) was
// percent-encoded: the router compares a route's literal segments with the
// path as sent, so an encoded segment never stands for a literal one
// (literalsPlain).
func segments(method, raw string, buf []string) (segs []string, encoded uint64, err error) {
	rest, ok := strings.CutPrefix(raw, apiBase+"/")
	if !ok {
		return nil, 0, noRoute(method, raw)
	}
	// Fiber's default (non-strict) routing treats a trailing slash as absent.
	rest = strings.TrimSuffix(rest, "/")
	segs = buf
	for {
		s, tail, more := strings.Cut(rest, "/")
		if strings.IndexByte(s, '%') >= 0 {
			dec, err := url.PathUnescape(s)
			if err != nil {
				return nil, 0, backend.NewError(backend.EBADREQUEST, method, "", raw, "invalid escape in path")
			}
			s = dec
			if len(segs) < 64 {
				encoded |= 1 << len(segs)
			}
		}
		if s == "" || s == "." || s == ".." {
			return nil, 0, noRoute(method, raw)
		}
		segs = append(segs, s)
		if !more {
			break
		}
		rest = tail
	}
	return segs, encoded, nil
}

// literalsPlain reports whether none of the route's literal segments was
// matched by a percent-encoded segment (segments' encoded).
func (rt *Route) literalsPlain(encoded uint64) bool {
	for i, ps := range rt.segs {
		if i >= 64 {
			break
		}
		if ps.kind == segLit && encoded&(1<<i) != 0 {
			return false
		}
	}
	return true
}

// Unrouted is the error of a request no route takes: 400 for a path that
// does not decode, else 404 "No route".
func Unrouted(method, raw string) error {
	var buf [8]string
	if _, _, err := segments(method, raw, buf[:0]); err != nil {
		return err
	}
	return noRoute(method, raw)
}

// captures reads the route's {key}, {cmd} and {name...} from a raw path
// the router matched to it. A path the route does not take, once decoded
// segment by segment (an empty or dot segment), is no route.
func (rt *Route) captures(method, raw string) (captures, error) {
	var buf [8]string
	segs, enc, err := segments(method, raw, buf[:0])
	if err != nil {
		return captures{}, err
	}
	c, ok := rt.match(segs)
	if !ok || !rt.literalsPlain(enc) {
		return captures{}, noRoute(method, raw)
	}
	return c, nil
}

func (rt *Route) match(segs []string) (captures, bool) {
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
