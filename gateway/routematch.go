package gateway

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/provgate/provgate/gateway/claims"
)

// Fiber and gateway/claims each match a request path against their own
// route table. They agree on the paths a client normally sends; they need
// not agree on others (Fiber matches literal segments before decoding,
// claims after), and a handler reached through another route than the one
// whose claims were derived would act on what was not authorized. So each
// /api/v3 handler serves only the requests whose derived route maps to it
// (servedBy) and passes any other on to the next route, which ends in 404.

// fiberRoute is one route Fiber registered, split into segments for
// matching the way Fiber's router does.
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

func parseFiberPath(p string) ([]fiberSeg, error) {
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
				return nil, fmt.Errorf("route %s: parameter form %q not understood", p, s)
			}
			out = append(out, fs)
		default:
			out = append(out, fiberSeg{lit: s})
		}
	}
	return out, nil
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

// apiRoutes lists the routes registered under /api/v3, in Fiber's
// dispatch order.
func apiRoutes(app *fiber.App) ([]fiberRoute, error) {
	var out []fiberRoute
	for _, r := range app.GetRoutes(true) {
		if !strings.HasPrefix(r.Path, "/api/v3/") {
			continue
		}
		segs, err := parseFiberPath(r.Path)
		if err != nil {
			return nil, err
		}
		out = append(out, fiberRoute{method: r.Method, path: r.Path, segs: segs})
	}
	return out, nil
}

// samplePath turns a claims route pattern (Fiber form) into a concrete path.
func samplePath(fiberPath string) string {
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

// servedBy maps each claims route ("METHOD pattern") to the path of the
// Fiber route that serves it: the first registered one taking the route's
// sample path. A claims route no Fiber route takes is absent.
func servedBy(app *fiber.App) (map[string]string, error) {
	served, err := apiRoutes(app)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, ri := range claims.Routes() {
		p := samplePath(ri.FiberPath())
		for _, r := range served {
			if r.method == ri.Method && r.matches(p) {
				out[ri.Method+" "+ri.Pattern] = r.path
				break
			}
		}
	}
	return out, nil
}

// serves wraps the handler of the /api/v3 route path: it runs only for
// requests whose claims were derived for a route this one serves.
func (s *Server) serves(path string, h fiber.Handler) fiber.Handler {
	return func(c *fiber.Ctx) error {
		a := accessOf(c)
		if s.servedBy[c.Method()+" "+a.Pattern] != path {
			return c.Next()
		}
		return h(c)
	}
}
