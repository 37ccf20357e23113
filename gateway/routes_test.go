package gateway

import (
	"regexp"
	"strings"
	"testing"

	"github.com/gofiber/fiber/v2"

	"github.com/provgate/provgate/gateway/claims"
)

// fiberRoute is one route Fiber registered under /api/v3, split into
// segments for matching the way Fiber's router does.
type fiberRoute struct {
	method, path string
	segs         []fiberSeg
}

type fiberSeg struct {
	lit   string         // literal segment
	param bool           // ":name", optionally constrained
	re    *regexp.Regexp // the param's regex constraint, if any
	rest  bool           // "*": the rest of the path
}

var constraintRe = regexp.MustCompile(`^:[A-Za-z0-9_]+<regex\((.*)\)>$`)

func parseFiberPath(t *testing.T, p string) []fiberSeg {
	t.Helper()
	var out []fiberSeg
	for _, s := range strings.Split(strings.TrimPrefix(p, "/"), "/") {
		switch {
		case s == "*":
			out = append(out, fiberSeg{rest: true})
		case strings.HasPrefix(s, ":"):
			fs := fiberSeg{param: true}
			if m := constraintRe.FindStringSubmatch(s); m != nil {
				fs.re = regexp.MustCompile(m[1])
			} else if strings.ContainsAny(s, "<>?+") {
				t.Fatalf("route %s: parameter form %q not understood by this test", p, s)
			}
			out = append(out, fs)
		default:
			out = append(out, fiberSeg{lit: s})
		}
	}
	return out
}

// matches reports whether the route takes the concrete path.
func (r fiberRoute) matches(path string) bool {
	segs := strings.Split(strings.TrimPrefix(path, "/"), "/")
	for i, s := range r.segs {
		if s.rest {
			return i < len(segs)
		}
		if i >= len(segs) {
			return false
		}
		switch {
		case s.param:
			if s.re != nil && !s.re.MatchString(segs[i]) {
				return false
			}
		case s.lit != segs[i]:
			return false
		}
	}
	return len(segs) == len(r.segs)
}

// sample turns a claims route pattern (Fiber form) into a concrete path.
func sample(fiberPath string) string {
	segs := strings.Split(fiberPath, "/")
	for i, s := range segs {
		switch {
		case s == "*":
			segs[i] = "a/b"
		case s == ":cmd":
			segs[i] = "someCmd"
		case strings.HasPrefix(s, ":"):
			segs[i] = "k1"
		}
	}
	return strings.Join(segs, "/")
}

// TestRoutesMatchClaims checks that the gateway serves exactly the routes
// whose claims gateway/claims derives: a served route without a claims
// route would answer "No route" from the guard (or worse, be reachable
// with claims derived for another form), and a claims route the gateway
// does not serve is dead policy surface.
func TestRoutesMatchClaims(t *testing.T) {
	app := New(Options{}).App()
	var served []fiberRoute
	for _, r := range app.GetRoutes(true) {
		if !strings.HasPrefix(r.Path, "/api/v3/") {
			continue
		}
		served = append(served, fiberRoute{method: r.Method, path: r.Path, segs: parseFiberPath(t, r.Path)})
	}
	if len(served) == 0 {
		t.Fatal("no routes under /api/v3")
	}
	// first returns the route Fiber dispatches method+path to: the first
	// registered that matches.
	first := func(method, path string) (fiberRoute, bool) {
		for _, r := range served {
			if r.method == method && r.matches(path) {
				return r, true
			}
		}
		return fiberRoute{}, false
	}
	reached := map[string]bool{}
	for _, ri := range claims.Routes() {
		p := sample(ri.FiberPath())
		t.Run("claims "+ri.Method+" "+ri.Pattern, func(t *testing.T) {
			r, ok := first(ri.Method, p)
			if !ok {
				t.Fatalf("claims derives %s %s but the gateway serves no route for %s", ri.Method, ri.Pattern, p)
			}
			reached[r.method+" "+r.path] = true
		})
	}
	for _, r := range served {
		t.Run("served "+r.method+" "+r.path, func(t *testing.T) {
			if !reached[r.method+" "+r.path] {
				t.Fatalf("the gateway serves %s %s but no claims route reaches it", r.method, r.path)
			}
		})
	}
}

// TestRoutesHeadWithGet: every GET route also answers HEAD (DRP clients
// use HEAD for exists and counts), on both sides.
func TestRoutesHeadWithGet(t *testing.T) {
	heads := map[string]bool{}
	for _, r := range New(Options{}).App().GetRoutes(true) {
		if r.Method == fiber.MethodHead {
			heads[r.Path] = true
		}
	}
	for _, r := range New(Options{}).App().GetRoutes(true) {
		if r.Method == fiber.MethodGet && strings.HasPrefix(r.Path, "/api/v3/") && !heads[r.Path] {
			t.Errorf("GET %s has no HEAD", r.Path)
		}
	}
	cl := map[string]bool{}
	for _, ri := range claims.Routes() {
		if ri.Method == fiber.MethodHead {
			cl[ri.Pattern] = true
		}
	}
	for _, ri := range claims.Routes() {
		if ri.Method == fiber.MethodGet && !cl[ri.Pattern] {
			t.Errorf("claims: GET %s has no HEAD", ri.Pattern)
		}
	}
}
