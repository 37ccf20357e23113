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

// Table is the route table: every route the server serves, exactly once,
// in the order the gateway registers them (docs/design.md §2.5): the rows
// outside /api/v3, then the /api/v3 rows (Routes), then the USE row that
// takes every other /api/v3 request. GET rows come with HEAD. The rows are
// shared: callers must not change them.
func Table() []*Route { return table.rows }

// Routes are the table's /api/v3 rows, those with claims, sorted by pattern
// then method: the order in which Match tries them.
func Routes() []*Route { return table.api }

// Access says how a row's requests are authorized: every row says it.
type Access uint8

const (
	// AccessClaims: the guard authenticates the caller, derives the row's
	// claims and asks the policies (docs/design.md §5.4): every /api/v3 row.
	AccessClaims Access = iota
	// AccessPublic: no authentication (health, readiness, metrics, the
	// AuthZEN discovery document, the page's headers and static files, the
	// benchmark route).
	AccessPublic
	// AccessCaller: the caller authenticates as for /api/v3, once, by the
	// USE row of /access/v1 before its rows; the explorer then answers only
	// what that caller may see (docs/design.md §9.9).
	AccessCaller
	// AccessSession: the page authenticates the browser (Basic, Bearer or
	// its session cookie) and each view authorizes the API route it shows
	// (docs/design.md §9.10).
	AccessSession
)

// MethodUse is the Method of a row that takes every request under its
// Pattern, whatever its method, that reaches it in table order (Fiber's
// Use). Without Serve, such a row only applies its Access: it
// authenticates and lets the rows after it answer, or, last of the table,
// answers "No route" to the /api/v3 requests no row took.
const MethodUse = "USE"

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

	// Outside /api/v3.
	ServeHealth         Serve = "health"
	ServeReady          Serve = "ready"
	ServeMetrics        Serve = "metrics"
	ServeBenchPool      Serve = "benchPool"
	ServeAuthzenConfig  Serve = "authzenConfig"
	ServeEvaluation     Serve = "evaluation"
	ServeEvaluations    Serve = "evaluations"
	ServeSearchSubject  Serve = "searchSubject"
	ServeSearchResource Serve = "searchResource"
	ServeSearchAction   Serve = "searchAction"
	ServeUIHeaders      Serve = "uiHeaders"
	ServeUIStatic       Serve = "uiStatic"
	ServeUIHome         Serve = "uiHome"
	ServeUIExplain      Serve = "uiExplain"
	ServeUIUsers        Serve = "uiUsers"
	ServeUIWho          Serve = "uiWho"
	ServeUITenants      Serve = "uiTenants"
	ServeUIRoles        Serve = "uiRoles"
	ServeUIDenials      Serve = "uiDenials"
	ServeUIEscalation   Serve = "uiEscalation"
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

// Route is one row of the route table: the method and path of a route,
// the handler serving it (Serve), how its requests are authorized (Access)
// and, for an /api/v3 row, how its claims are derived (scope, action form).
// The gateway builds its router from these rows alone and gives each
// matched /api/v3 request its row, so that the claims derived and the
// handler run are those of one row.
type Route struct {
	// Method is an HTTP method, or MethodUse.
	Method string
	// Pattern is the path: {key} for one segment, {name...} for the rest
	// of the path (param names hold '/'); a USE row's prefix.
	Pattern string
	// Serve names the gateway handler that serves the route ("": none, a
	// USE row that only applies its Access).
	Serve Serve
	// Access is how the route's requests are authorized.
	Access Access

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
	// rows is the whole table, api its /api/v3 rows.
	rows, api []*Route
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
	rows := outsideRows()
	rows = append(rows, all...)
	rows = append(rows, &Route{Method: MethodUse, Pattern: apiBase, Access: AccessClaims})
	t := &routeTable{rows: rows, api: all, byFirst: map[routeHead][]*Route{}}
	for _, rt := range all {
		h := routeHead{rt.Method, rt.segs[0].lit}
		t.byFirst[h] = append(t.byFirst[h], rt)
	}
	return t
}

// outsideRows are the rows outside /api/v3, each with its own access, in
// the order the router tries them.
func outsideRows() []*Route {
	var rows []*Route
	add := func(method, pattern string, serve Serve, access Access) {
		rows = append(rows, &Route{Method: method, Pattern: pattern, Serve: serve, Access: access})
		if method == "GET" {
			rows = append(rows, &Route{Method: "HEAD", Pattern: pattern, Serve: serve, Access: access})
		}
	}
	// Health and metrics (docs/design.md §15.4) need no credentials.
	add("GET", "/healthz", ServeHealth, AccessPublic)
	add("GET", "/readyz", ServeReady, AccessPublic)
	add("GET", "/metrics", ServeMetrics, AccessPublic)
	// The gateway benchmark's baseline: one pool read without
	// authentication, served only when enabled.
	add("GET", "/bench/pools/{key}", ServeBenchPool, AccessPublic)
	// AuthZEN (docs/design.md §9.9): the discovery document is public; every
	// request under /access/v1 is authenticated by the USE row first.
	add("GET", "/.well-known/authzen-configuration", ServeAuthzenConfig, AccessPublic)
	add(MethodUse, "/access/v1", "", AccessCaller)
	add("POST", "/access/v1/evaluation", ServeEvaluation, AccessCaller)
	add("POST", "/access/v1/evaluations", ServeEvaluations, AccessCaller)
	add("POST", "/access/v1/search/subject", ServeSearchSubject, AccessCaller)
	add("POST", "/access/v1/search/resource", ServeSearchResource, AccessCaller)
	add("POST", "/access/v1/search/action", ServeSearchAction, AccessCaller)
	// The access explorer's page (docs/design.md §9.10): security headers on
	// every /ui reply, public static files, pages for a signed-in browser.
	add(MethodUse, "/ui", ServeUIHeaders, AccessPublic)
	add(MethodUse, "/ui/static", ServeUIStatic, AccessPublic)
	add("GET", "/ui/", ServeUIHome, AccessSession)
	add("GET", "/ui/explain", ServeUIExplain, AccessSession)
	add("GET", "/ui/users", ServeUIUsers, AccessSession)
	add("GET", "/ui/who", ServeUIWho, AccessSession)
	add("GET", "/ui/tenants", ServeUITenants, AccessSession)
	add("GET", "/ui/roles", ServeUIRoles, AccessSession)
	add("GET", "/ui/denials", ServeUIDenials, AccessSession)
	add("GET", "/ui/escalation", ServeUIEscalation, AccessSession)
	return rows
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
