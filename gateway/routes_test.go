package gateway

import (
	"strings"
	"testing"

	"github.com/gofiber/fiber/v2"

	"github.com/provgate/provgate/gateway/claims"
)

// TestRoutesMatchClaims checks that the gateway serves exactly the routes
// whose claims gateway/claims derives: a served route without a claims
// route would answer "No route" from the guard (or worse, be reachable
// with claims derived for another form), and a claims route the gateway
// does not serve is dead policy surface.
func TestRoutesMatchClaims(t *testing.T) {
	app := New(Options{}).App()
	served, err := apiRoutes(app)
	if err != nil {
		t.Fatal(err)
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
		p := samplePath(ri.FiberPath())
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
