package gateway

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/provgate/provgate/backend"
)

// Health (docs/design.md §15.4): /healthz is liveness, the process answers;
// /readyz is readiness, this replica should get traffic: the store answers,
// a policy is loaded, and the server is not draining.

// Pinger reports whether the store answers (backend/store Store.Ping).
type Pinger interface {
	Ping(ctx context.Context) error
}

// policyLoaded is implemented by deciders that can say whether they hold a
// compiled policy (policies/opa Engine.Loaded).
type policyLoaded interface {
	Loaded() bool
}

// readyTimeout bounds the store check of one readiness probe, below the
// default timeout of Kubernetes' probes (1s would be too tight for a busy
// PostgreSQL; probes usually allow several).
const readyTimeout = 2 * time.Second

// drainState is closed once, when the server starts draining (Drain).
type drainState struct {
	on   atomic.Bool
	once sync.Once
	ch   chan struct{}
}

// Drain starts a graceful shutdown (docs/design.md §15.7): /readyz answers
// 503 from now on, open event streams are closed ("going away") and new
// ones refused, and long polls and pool waits end now, answering as if
// their wait had timed out. Requests go on being served until the listener
// closes. It is safe to call more than once.
func (s *Server) Drain() {
	s.drain.once.Do(func() {
		s.drain.on.Store(true)
		close(s.drain.ch)
		if c, ok := s.streams.(interface{ Close() }); ok {
			c.Close()
		}
	})
}

// Draining reports whether Drain was called.
func (s *Server) Draining() bool { return s.drain.on.Load() }

// waitContext is ctx with the drain channel as its wait stop, for requests
// that may wait (backend.WithWaitStop).
func (s *Server) waitContext(ctx context.Context) context.Context {
	return backend.WithWaitStop(ctx, s.drain.ch)
}

// handleReadyz answers 200 {"status":"ready"} or 503 with the failed
// checks. The reply names which check failed, never why: it needs no
// credentials, and a store error can name hosts; the cause is logged.
func (s *Server) handleReadyz(c *fiber.Ctx) error {
	checks := fiber.Map{"store": "ok", "policy": "ok", "draining": false}
	ready := true
	if s.Draining() {
		checks["draining"] = true
		ready = false
	}
	if pl, ok := s.policy.(policyLoaded); s.policy == nil || (ok && !pl.Loaded()) {
		checks["policy"] = "not loaded"
		ready = false
	}
	if s.store == nil {
		checks["store"] = "not configured"
		ready = false
	} else {
		ctx, cancel := context.WithTimeout(c.UserContext(), readyTimeout)
		err := s.store.Ping(ctx)
		cancel()
		if err != nil {
			s.log.WarnContext(c.UserContext(), "readiness: store unavailable", "err", err.Error())
			checks["store"] = "unavailable"
			ready = false
		}
	}
	if !ready {
		return c.Status(fiber.StatusServiceUnavailable).JSON(fiber.Map{"status": "unavailable", "checks": checks})
	}
	return c.JSON(fiber.Map{"status": "ready", "checks": checks})
}
