package gateway

import (
	"fmt"
	"slices"

	"github.com/gofiber/fiber/v2"

	"github.com/provgate/provgate/gateway/claims"
)

// routeLocal is the Locals key of the request's claims.Route.
const routeLocal = "route"

// routes builds the router from the route table, claims.Table(), alone:
// each row names its method, path, how its requests are authorized and
// the handler that serves it (docs/design.md §2.5, §5.4). Rows are
// registered in table order, each /api/v3 row under its own path with the
// guard of that row: the route stores its row in the request's Locals,
// and the guard derives the claims of that row and no other, so the claims
// authorized and the handler run cannot disagree.
func (s *Server) routes(d Deps) {
	pages := &uiPages{explorer: s.explorer, auth: s.auth, users: d.Users, fresh: s.fresh}
	s.served = map[*claims.Route]bool{}
	handlers := s.handlers(d, pages)
	for _, rt := range claims.Table() {
		var h fiber.Handler
		if rt.Serve != "" {
			var ok bool
			if h, ok = handlers[rt.Serve]; !ok {
				panic(fmt.Sprintf("gateway: route %s %s: no handler %q", rt.Method, rt.Pattern, rt.Serve))
			}
			if h == nil {
				continue
			}
		}
		s.served[rt] = true
		chain := slices.DeleteFunc([]fiber.Handler{s.check(rt, pages), h}, func(f fiber.Handler) bool { return f == nil })
		if rt.Method == claims.MethodUse {
			args := []any{rt.Pattern}
			for _, f := range chain {
				args = append(args, f)
			}
			s.app.Use(args...)
		} else {
			s.app.Add(rt.Method, rt.FiberPath(), chain...)
		}
	}
}

// check is the access check the router runs for row rt before its handler
// (rt.Access); nil where the row has none of its own.
func (s *Server) check(rt *claims.Route, pages *uiPages) fiber.Handler {
	use := rt.Method == claims.MethodUse
	switch {
	case rt.Access == claims.AccessClaims && use:
		// Every other /api/v3 request is authenticated and then answered
		// "No route" (the guard without a row).
		return s.guard
	case rt.Access == claims.AccessClaims:
		return s.routeGuard(rt)
	case rt.Access == claims.AccessCaller && use:
		return s.authzenGuard
	case rt.Access == claims.AccessSession:
		return pages.uiGuard
	}
	// Public, or a caller the USE row before it authenticated.
	return nil
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
func (s *Server) handlers(d Deps, pages *uiPages) map[claims.Serve]fiber.Handler {
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
		s.explorer.authzenServes(),
		pages.serves(),
		serves{
			claims.ServeWS:        nilUnless(s.streams != nil, s.handleWS),
			claims.ServeHealth:    func(c *fiber.Ctx) error { return c.JSON(fiber.Map{"status": "ok"}) },
			claims.ServeReady:     s.handleReadyz,
			claims.ServeMetrics:   s.metricsHandler(),
			claims.ServeBenchPool: nilUnless(s.bench != nil, s.handleBenchPool),
		},
	)
}

const apiBase = "/api/v3"
