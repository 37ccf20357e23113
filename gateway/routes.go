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
func (s *Server) routes() {
	s.app.Get("/healthz", func(c *fiber.Ctx) error { return c.JSON(fiber.Map{"status": "ok"}) })
	s.app.Get("/readyz", s.handleReadyz)
	s.app.Get("/metrics", s.metricsHandler())
	if s.BenchRoute {
		// Unauthenticated read of one pool: the baseline of the gateway benchmark.
		s.app.Get("/bench/pools/:key", s.handleBenchPool)
	}

	s.authzenRoutes()
	s.uiRoutes()

	s.served = map[*claims.Route]bool{}
	handlers := s.handlers()
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

// handlers are the handlers of the table's rows, by claims.Serve. A nil
// handler leaves its rows out of the router.
func (s *Server) handlers() map[claims.Serve]fiber.Handler {
	return map[claims.Serve]fiber.Handler{
		claims.ServeInfo:           s.handleInfo,
		claims.ServeGetPrefs:       s.handleGetPrefs,
		claims.ServeSetPrefs:       s.handleSetPrefs,
		claims.ServeGetLicense:     s.handleGetLicense,
		claims.ServeSetLicense:     s.handleSetLicense,
		claims.ServeObjects:        s.handleObjects,
		claims.ServeAllIndexes:     s.handleAllIndexes,
		claims.ServeIndexes:        s.handleIndexes,
		claims.ServeGetMeta:        s.handleGetMeta,
		claims.ServePatchMeta:      s.handlePatchMeta,
		claims.ServePostEvent:      s.handlePostEvent,
		claims.ServeWS:             s.handleWS,
		claims.ServeSystemAction:   s.handleSystemAction,
		claims.ServeExplain:        s.handleExplain,
		claims.ServeUserMatrix:     s.handleUserMatrix,
		claims.ServeWho:            s.handleWho,
		claims.ServeTenantView:     s.handleTenantView,
		claims.ServeRoleDiff:       s.handleRoleDiff,
		claims.ServeDenials:        s.handleDenials,
		claims.ServeEscalation:     s.handleEscalation,
		claims.ServePolicyDiff:     s.handlePolicyDiff,
		claims.ServeImport:         s.handleImport,
		claims.ServeUserToken:      s.handleUserToken,
		claims.ServeUserPassword:   s.handleUserPassword,
		claims.ServeUserSecret:     s.handleUserSecret,
		claims.ServeListProviders:  s.handleListProviders,
		claims.ServeGetProvider:    s.handleGetProvider,
		claims.ServePluginAttempts: s.handlePluginAttempts,
		claims.ServePoolsActive:    s.handlePoolsActive,
		claims.ServePoolStatus:     s.handlePoolStatus,
		claims.ServePoolOp:         s.handlePoolOp,
		claims.ServeReleaseToPool:  s.handleReleaseToPool,
		claims.ServeCreateJob:      s.handleCreateJob,
		claims.ServeGetJobLog:      s.handleGetJobLog,
		claims.ServePutJobLog:      s.handlePutJobLog,
		claims.ServeJobActions:     s.handleJobActions,
		claims.ServeListActions:    s.handleListActions,
		claims.ServeGetAction:      s.handleGetAction,
		claims.ServeRunAction:      s.handleRunAction,
		claims.ServePubkey:         s.handlePubkey,
		claims.ServeGetParams:      s.handleGetParams,
		claims.ServeSetParams:      s.handleSetParams,
		claims.ServePatchParams:    s.handlePatchParams,
		claims.ServeGetParam:       s.handleGetParam,
		claims.ServeSetParam:       s.handleSetParam,
		claims.ServeDeleteParam:    s.handleDeleteParam,
		claims.ServeList:           s.handleList,
		claims.ServeCreate:         s.handleCreate,
		claims.ServeGet:            s.handleGet,
		claims.ServePut:            s.handlePut,
		claims.ServePatch:          s.handlePatch,
		claims.ServeDelete:         s.handleDelete,
	}
}

const apiBase = "/api/v3"
