package gateway

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/gofiber/contrib/websocket"
	"github.com/gofiber/fiber/v2"

	"github.com/provgate/provgate/backend"
	"github.com/provgate/provgate/gateway/auth"
	"github.com/provgate/provgate/gateway/stream"
	"github.com/provgate/provgate/policies"
)

// Streams serves websocket event streams (gateway/stream.Hub).
type Streams interface {
	Admit(principal string) (release func(), err error)
	Serve(ctx context.Context, c stream.Conn, id stream.Identity, v stream.Viewer, release func())
}

const wsPath = apiBase + "/ws"

// wsCredential is the Authorization of an event stream request: the header,
// or DRP's ?token=, a token or user:password (docs/design.md §13.2). Only
// the stream route reads the query: browsers cannot set headers on a
// websocket, and a credential in other URLs would end up in more logs.
func wsCredential(c *fiber.Ctx) string {
	if h := c.Get(fiber.HeaderAuthorization); h != "" || c.Path() != wsPath {
		return strings.Clone(h)
	}
	tok := strings.Clone(c.Query("token"))
	switch {
	case tok == "":
		return ""
	case strings.Contains(tok, ":"):
		return "Basic " + base64.StdEncoding.EncodeToString([]byte(tok))
	}
	return "Bearer " + tok
}

// handleWS upgrades GET /api/v3/ws to an event stream. The guard has
// authenticated the caller; what the stream shows it is decided per event
// (wsViewer).
func (s *Server) handleWS(c *fiber.Ctx) error {
	if !websocket.IsWebSocketUpgrade(c) {
		return backend.NewError(backend.EBADREQUEST, "GET", "ws", "", "websocket upgrade required")
	}
	p := principalOf(c)
	a := accessOf(c)
	id := stream.Identity{Principal: p.Subject(), Expires: p.ExpiresAt}
	if p.IsMachine() {
		id.Machine = p.Name
	}
	release, err := s.streams.Admit(id.Principal)
	if err != nil {
		return err
	}
	v := &wsViewer{s: s, authz: a.authz, ip: a.ip}
	ctx := context.WithoutCancel(userContext(c))
	// The socket is served after this handler returns, on the hijacked
	// connection; a failed upgrade never serves it.
	err = websocket.New(func(conn *websocket.Conn) {
		s.streams.Serve(ctx, conn.Conn, id, v, release)
	}, websocket.Config{HandshakeTimeout: 10 * time.Second})(c)
	if err != nil {
		release()
	}
	return err
}

// wsViewer decides for one event stream's caller, with the same
// authentication, policies and decision cache as requests.
type wsViewer struct {
	s     *Server
	authz string
	ip    string
}

// principal authenticates the stream's credential again (it may have
// expired, or its Secrets changed, or its user gone); the authenticator's
// caches keep this cheap.
func (v *wsViewer) principal(ctx context.Context) (*auth.Principal, error) {
	if err := v.s.streamFresh.check(ctx, v.s.freshener); err != nil {
		return nil, err
	}
	p, err := v.s.auth.Authenticate(ctx, v.authz, v.ip)
	if err != nil {
		switch backend.ErrorCode(err) {
		case backend.EUNAUTHORIZED, backend.EFORBIDDEN, backend.ETOOMANY:
			return nil, fmt.Errorf("%w: %s", stream.ErrCredentials, err.Error())
		}
		return nil, err
	}
	return p, nil
}

func (v *wsViewer) Check(ctx context.Context) error {
	_, err := v.principal(ctx)
	return err
}

// Decider authenticates the caller once for a batch of events. An event is
// allowed when the caller may get the event's object now: tenant
// visibility and the get claim, as a GET of the object would be decided
// (docs/design.md §13.2). A job event also needs its machine to be visible
// (jobs follow their machine). Events of other types (posted ones) need
// the events list claim. Every decision goes through the engine (its
// decision cache and decision log) when it is made, under the policy and
// data of that moment.
func (v *wsViewer) Decider(ctx context.Context) (stream.Decide, error) {
	p, err := v.principal(ctx)
	if err != nil {
		return nil, err
	}
	pp := policyPrincipal(p)
	decide := func(scope, key string, want backend.Claim) (bool, error) {
		in := policies.Input{Principal: pp, Required: []backend.Claim{want}, Operation: "get", Method: "GET",
			Path: wsPath}
		if scope != "" {
			in.Object = &policies.Object{Scope: scope, Key: key}
		}
		d, err := v.s.policy.Decide(ctx, in)
		if err != nil {
			return false, err
		}
		return d.Allow && !d.NotFound, nil
	}
	return func(e backend.Event) (bool, error) {
		if v.s.kinds.Kind(e.Type) == nil {
			return decide("", "", backend.Claim{Scope: "events", Action: "list", Specific: ""})
		}
		if e.Type != "jobs" {
			return decide(e.Type, e.Key, backend.Claim{Scope: e.Type, Action: "get", Specific: e.Key})
		}
		machine := e.Owner()
		if machine == "" {
			return false, nil
		}
		want := backend.Claim{Scope: "jobs", Action: "get", Specific: machine}
		if ok, err := decide("jobs", e.Key, want); !ok || err != nil {
			return ok, err
		}
		return decide("machines", machine, want)
	}, nil
}

// freshGate runs the freshness check (docs/design.md §14.4) for event
// streams at most every streamFreshEvery, shared by all of them: a change
// another replica made reaches this one by notification at once, and this
// bounds what is delivered in between without one store read per event and
// subscriber.
type freshGate struct {
	mu   sync.Mutex
	last time.Time
}

const streamFreshEvery = 100 * time.Millisecond

func (g *freshGate) check(ctx context.Context, f Freshener) error {
	if f == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if time.Since(g.last) < streamFreshEvery {
		return nil
	}
	if err := f.Check(ctx); err != nil {
		return errors.Join(errors.New("authorization data unavailable"), err)
	}
	g.last = time.Now()
	return nil
}
