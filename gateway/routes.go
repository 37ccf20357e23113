package gateway

import "github.com/gofiber/fiber/v2"

// routes registers the whole API. Specific routes come before the generic
// per-kind ones, which Fiber matches in registration order. Every route
// under /api/v3 passes the guard (authentication, claims, policies); the
// claims each one needs are derived in gateway/claims, whose route table
// must list exactly these routes (checked by TestRoutesMatchClaims), and
// each handler serves only the requests whose claims were derived for its
// route (serves).
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

	api := apiGroup{s: s, r: s.app.Group(apiBase, s.guard)}
	api.Get("/info", s.handleInfo)
	api.Get("/prefs", s.handleGetPrefs)
	api.Post("/prefs", s.handleSetPrefs)
	api.Get("/license", s.handleGetLicense)
	api.Put("/license", s.handleSetLicense)
	api.Post("/license", s.handleSetLicense)
	api.Get("/objects", s.handleObjects)
	api.Get("/indexes", s.handleAllIndexes)
	api.Get("/indexes/:prefix", s.handleIndexes)
	// Param names hold '/': their meta key is the rest of the path.
	api.Get("/meta/params/*", s.handleGetMeta)
	api.Patch("/meta/params/*", s.handlePatchMeta)
	api.Get("/meta/:prefix/:key", s.handleGetMeta)
	api.Patch("/meta/:prefix/:key", s.handlePatchMeta)
	api.Post("/events", s.handlePostEvent)
	api.Get("/ws", s.handleWS)
	api.Post("/system/actions/:cmd", s.handleSystemAction)

	// The access explorer (docs/design.md §9.8), before the generic
	// per-kind routes.
	api.Post("/access/explain", s.handleExplain)
	api.Get("/access/users/:key", s.handleUserMatrix)
	api.Get("/access/who", s.handleWho)
	api.Get("/access/tenants/:key", s.handleTenantView)
	api.Get("/access/roles/diff", s.handleRoleDiff)
	api.Get("/access/denials", s.handleDenials)
	api.Post("/access/policy/diff", s.handlePolicyDiff)

	api.Post("/users/import", s.handleImport)
	api.Post("/roles/import", s.handleImport)

	api.Get("/users/:key/token", s.handleUserToken)
	api.Put("/users/:key/password", s.handleUserPassword)
	api.Post("/users/:key/secret", s.handleUserSecret)

	api.Get("/plugin_providers", s.handleListProviders)
	api.Get("/plugin_providers/:name", s.handleGetProvider)
	api.Head("/plugin_providers/:name", s.handleGetProvider)
	api.Get("/plugins/:key/attempts", s.handlePluginAttempts)

	api.Get("/pools-active", s.handlePoolsActive)
	api.Get("/pools/:key/status", s.handlePoolStatus)
	api.Post("/pools/:key/:verb<regex(^(add|remove|allocate|release)Machines$)>", s.handlePoolOp)
	api.Post("/machines/:key/releaseToPool", s.handleReleaseToPool)

	api.Post("/jobs", s.handleCreateJob)
	api.Get("/jobs/:key/log", s.handleGetJobLog)
	api.Put("/jobs/:key/log", s.handlePutJobLog)
	api.Get("/jobs/:key/actions", s.handleJobActions)

	// Param definitions have slashes in their names: the key is the rest
	// of the path. "/params/*" also takes "/params", the collection, which
	// serves() passes on to the generic /:prefix routes.
	api.Get("/params/*", s.handleGet)
	api.Head("/params/*", s.handleGet)
	api.Put("/params/*", s.handlePut)
	api.Patch("/params/*", s.handlePatch)
	api.Delete("/params/*", s.handleDelete)

	api.Get("/:prefix/:key/actions", s.handleListActions)
	api.Get("/:prefix/:key/actions/:cmd", s.handleGetAction)
	api.Post("/:prefix/:key/actions/:cmd", s.handleRunAction)
	api.Get("/:prefix/:key/pubkey", s.handlePubkey)

	api.Get("/:prefix/:key/params", s.handleGetParams)
	api.Post("/:prefix/:key/params", s.handleSetParams)
	api.Patch("/:prefix/:key/params", s.handlePatchParams)
	api.Get("/:prefix/:key/params/*", s.handleGetParam)
	api.Post("/:prefix/:key/params/*", s.handleSetParam)
	api.Put("/:prefix/:key/params/*", s.handleSetParam)
	api.Delete("/:prefix/:key/params/*", s.handleDeleteParam)

	api.Get("/:prefix", s.handleList)
	api.Head("/:prefix", s.handleList)
	api.Post("/:prefix", s.handleCreate)
	api.Get("/:prefix/:key", s.handleGet)
	api.Head("/:prefix/:key", s.handleGet)
	api.Put("/:prefix/:key", s.handlePut)
	api.Patch("/:prefix/:key", s.handlePatch)
	api.Delete("/:prefix/:key", s.handleDelete)
}

const apiBase = "/api/v3"

// apiGroup registers /api/v3 routes, each wrapped by serves.
type apiGroup struct {
	s *Server
	r fiber.Router
}

func (g apiGroup) Get(path string, h fiber.Handler) { g.r.Get(path, g.s.serves(apiBase+path, h)) }
func (g apiGroup) Head(path string, h fiber.Handler) {
	g.r.Head(path, g.s.serves(apiBase+path, h))
}
func (g apiGroup) Post(path string, h fiber.Handler) { g.r.Post(path, g.s.serves(apiBase+path, h)) }
func (g apiGroup) Put(path string, h fiber.Handler)  { g.r.Put(path, g.s.serves(apiBase+path, h)) }
func (g apiGroup) Patch(path string, h fiber.Handler) {
	g.r.Patch(path, g.s.serves(apiBase+path, h))
}
func (g apiGroup) Delete(path string, h fiber.Handler) {
	g.r.Delete(path, g.s.serves(apiBase+path, h))
}
