// Package gateway is provgate's HTTP front: it authenticates each request,
// derives the claims it needs, asks the policies, and calls the backend.
package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/provgate/provgate/backend"
)

// Options configure a Server. The concrete services are built by cmd.
type Options struct {
	Logger    *slog.Logger
	Version   string
	BodyLimit int
	// Registry receives the gateway's metrics; nil makes a private one.
	Registry *prometheus.Registry
	Deps     Deps
}

// Server is the Fiber application and what it needs.
type Server struct {
	app     *fiber.App
	log     *slog.Logger
	version string
	started time.Time
	reg     *prometheus.Registry
	// refresh updates the policy data after writes.
	refresh refresher
	*authorizer
	// streamFresh paces event streams' freshness checks.
	streamFresh freshGate
	// drain is set when a graceful shutdown starts (Drain).
	drain drainState

	// What the guard, the access explorer, the UI, the event stream,
	// health and metrics call; the handler groups hold their own
	// (handlers). See Deps for each.
	auth        Authenticator
	freshener   Freshener
	tenantOf    func(user string) string
	loginTarpit time.Duration
	streams     Streams
	store       Pinger
	callbacks   CallbackCounter
	explorer    *explorer
	// bench serves the benchmark route (nil: none).
	bench Objects
}

const requestIDKey = "request_id"

// New builds the gateway with every route registered.
func New(opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.BodyLimit <= 0 {
		opts.BodyLimit = 4 << 20
	}
	reg := opts.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	d := opts.Deps
	s := &Server{log: opts.Logger, version: opts.Version, started: time.Now(), reg: reg,
		auth: d.Auth, freshener: d.Fresh, tenantOf: d.TenantOf,
		loginTarpit: d.LoginTarpit, streams: d.Streams, store: d.Store, callbacks: d.Callbacks}
	if d.BenchRoute {
		s.bench = d.Objects
	}
	s.refresh = refresher{sync: d.Sync, tenantOf: d.TenantOf, log: opts.Logger}
	if d.Kinds == nil {
		d.Kinds = backend.NewCatalog()
	}
	s.authorizer = &authorizer{policy: d.Policy, resolver: d.Resolver, machines: machineVisibility{policy: d.Policy}, kinds: d.Kinds}
	s.explorer = &explorer{authorizer: s.authorizer, objects: d.Objects, decisionLog: d.DecisionLog, candidates: d.Candidates}
	s.drain.ch = make(chan struct{})
	s.metrics = newMetrics(reg)
	if rc, ok := opts.Deps.Policy.(reloadCounter); ok {
		registerReloads(reg, rc)
	}
	s.app = fiber.New(fiber.Config{
		AppName:               "provgate",
		DisableStartupMessage: true,
		BodyLimit:             opts.BodyLimit,
		ReadBufferSize:        16 << 10, // headers above this answer 431
		ErrorHandler:          s.errorHandler,
		// DRP clients put unescaped slashes in param names and colons in keys.
		UnescapePath:  false,
		StrictRouting: false,
		CaseSensitive: true,
		// ReadTimeout bounds reading a request (headers and body), not the
		// handler: long polls and pool waits are unaffected, while a client
		// that never finishes its headers is dropped.
		ReadTimeout: 30 * time.Second,
		IdleTimeout: 2 * time.Minute,
	})
	s.app.Use(s.recoverer, s.requestMeta, s.collapseSlashes, s.jsonBodies)
	s.routes(d)
	s.registerSources(reg)
	return s
}

// App returns the Fiber application (for listeners and tests).
func (s *Server) App() *fiber.App { return s.app }

// recoverer turns a panic into a 500 error object, logged once with its stack.
func (s *Server) recoverer(c *fiber.Ctx) (err error) {
	defer func() {
		if r := recover(); r != nil {
			s.log.ErrorContext(c.UserContext(), "panic", "request_id", requestID(c), "method", c.Method(),
				"path", c.Path(), "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			err = fiber.NewError(fiber.StatusInternalServerError, "internal error (request "+requestID(c)+")")
		}
	}()
	return c.Next()
}

// requestMeta assigns the request id, sets the JSON content type every DRP
// client requires, logs the request and records metrics.
func (s *Server) requestMeta(c *fiber.Ctx) error {
	id := strings.Clone(c.Get("X-Request-Id"))
	if id == "" || len(id) > 64 || strings.ContainsAny(id, "\r\n") {
		var b [8]byte
		_, _ = rand.Read(b[:])
		id = hex.EncodeToString(b[:])
	}
	c.Locals(requestIDKey, id)
	c.Set("X-Request-Id", id)
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	start := time.Now()
	err := c.Next()
	if err != nil {
		// Let the error handler write the reply now so status and size are final.
		if herr := s.errorHandler(c, err); herr != nil {
			return herr
		}
	}
	status := c.Response().StatusCode()
	route := s.routeLabel(c)
	d := time.Since(start)
	s.metrics.observe(methodLabel(c.Method()), route, status, d)
	level := slog.LevelInfo
	if status >= 500 {
		level = slog.LevelError
	}
	user := ""
	if p := principalOf(c); p != nil {
		user = p.Subject()
	}
	s.log.Log(c.UserContext(), level, "request", "request_id", id, "method", c.Method(), "path", c.Path(),
		"route", route, "status", status, "duration_ms", float64(d.Microseconds())/1000,
		"principal", user, "remote", c.IP())
	return nil
}

// collapseSlashes tolerates a doubled leading slash (a DRP endpoint with a
// trailing slash produces //api/v3/...) without redirecting: a redirect
// would turn a POST into a GET.
func (s *Server) collapseSlashes(c *fiber.Ctx) error {
	p := c.Path()
	if strings.HasPrefix(p, "//") {
		c.Path("/" + strings.TrimLeft(p, "/"))
	}
	return c.Next()
}

// jsonBodies refuses request bodies that are not JSON, as DRP does (400
// "Invalid content type"). A body without a Content-Type is read as JSON;
// job log uploads are octet streams and checked by their handler.
func (s *Server) jsonBodies(c *fiber.Ctx) error {
	if len(c.Body()) == 0 {
		return c.Next()
	}
	ct := strings.ToLower(strings.TrimSpace(strings.SplitN(string(c.Request().Header.ContentType()), ";", 2)[0]))
	switch {
	case ct == "", ct == fiber.MIMEApplicationJSON, strings.HasSuffix(ct, "+json"):
		return c.Next()
	case ct == fiber.MIMEOctetStream && strings.HasSuffix(c.Path(), "/log"):
		return c.Next()
	}
	return backend.NewError(backend.EBADREQUEST, c.Method(), "", c.OriginalURL(),
		"Invalid content type: "+ct+" (send application/json)")
}

func requestID(c *fiber.Ctx) string {
	if v, ok := c.Locals(requestIDKey).(string); ok {
		return v
	}
	return ""
}

// userContext returns the request's context for backend calls.
func userContext(c *fiber.Ctx) context.Context { return c.UserContext() }
