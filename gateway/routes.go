package gateway

import (
	"fmt"

	"github.com/gofiber/fiber/v2"

	"github.com/provgate/provgate/gateway/claims"
)

// routeLocal is the Locals key of the request's claims.Route.
const routeLocal = "route"

// routes registers the whole API. The /api/v3 routes are the rows of the
// one route table, claims.Routes(): each row names its method, path, the
// claims it needs and the handler that serves it (docs/design.md §5.4).
// Each row is registered under its own path; the route stores its row in
// the request's Locals, and the guard derives the claims of that row and
// no other, so the claims authorized and the handler run cannot disagree.
func (s *Server) routes(d Deps) {
	s.app.Get("/healthz", func(c *fiber.Ctx) error { return c.JSON(fiber.Map{"status": "ok"}) })
	s.app.Get("/readyz", s.handleReadyz)
	s.app.Get("/metrics", s.metricsHandler())
	if s.bench != nil {
		// Unauthenticated read of one pool: the baseline of the gateway benchmark.
		s.app.Get("/bench/pools/:key", s.handleBenchPool)
	}

	s.authzenRoutes()
	s.uiRoutes(d.Users)

	s.served = map[*claims.Route]bool{}
	handlers := s.handlers(d)
	for _, rt := range claims.Routes() {
		h, ok := handlers[rt.Serve]
		if !ok {
			panic(fmt.Sprintf("gateway: route %s %s: no handler %q", rt.Method, rt.Pattern, rt.Serve))
		}
		if h == nil {
			continue
		}
		s.served[rt] = true
		s.app.Add(rt.Method, rt.FiberPath(), s.routeGuard(rt), h)
	}
	// Every other /api/v3 request is authenticated and then answered "No
	// route" (the guard without a row).
	s.app.Use(apiBase, s.guard)
}

// routeGuard gives the request its row and passes it to the guard.
func (s *Server) routeGuard(rt *claims.Route) fiber.Handler {
	return func(c *fiber.Ctx) error {
		c.Locals(routeLocal, rt)
		return s.guard(c)
	}
}

// routeOf is the row the request's route stored (nil when no row took it).
func routeOf(c *fiber.Ctx) *claims.Route {
	rt, _ := c.Locals(routeLocal).(*claims.Route)
	return rt
}

// handlers gives every row of the route table its handler, from the
// handler groups (groups.go).
func (s *Server) handlers(d Deps) map[claims.Serve]fiber.Handler {
	info := infoRoutes{kinds: s.kinds, license: d.License, policy: d.Policy, version: s.version}
	return handlers(
		info.serves(),
		userRoutes{kinds: s.kinds, users: d.Users, info: info.build, refresh: s.refresh}.serves(),
		poolRoutes{pools: d.Pools, machines: s.machines, wait: s.waitContext, metrics: s.metrics}.serves(),
		jobRoutes{jobs: d.Jobs, tokens: d.JobTokens, actions: d.JobActions}.serves(),
		pluginRoutes{actions: d.Actions}.serves(),
		paramRoutes{kinds: s.kinds, params: d.Params}.serves(),
		licenseRoutes{license: d.License, sync: d.Sync}.serves(),
		prefsRoutes{prefs: d.Prefs}.serves(),
		eventRoutes{kinds: s.kinds, events: d.Events}.serves(),
		objectRoutes{kinds: s.kinds, objects: d.Objects, refresh: s.refresh, machines: s.machines, wait: s.waitContext,
			reauthorize: s.reauthorize}.serves(),
		catalogRoutes{kinds: s.kinds}.serves(),
		s.explorer.serves(),
		serves{claims.ServeWS: nilUnless(s.streams != nil, s.handleWS)},
	)
}

const apiBase = "/api/v3"
