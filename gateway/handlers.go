package gateway

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/provgate/provgate/backend"
	"github.com/provgate/provgate/gateway/auth"
)

// Users covers the user routes beyond CRUD: tokens, passwords, Secrets.
type Users interface {
	// Token issues a token for user name, granted by the caller (token request
	// rules: docs/design.md §8.5, §5.6).
	Token(ctx context.Context, name string, grantor *auth.Principal, req auth.TokenRequest) (auth.IssuedToken, error)
	ChangePassword(ctx context.Context, name, password string) (backend.Model, error)
	RotateSecret(ctx context.Context, name string) error
	RotateSystemSecret(ctx context.Context) error
}

// Pools covers pool membership operations and reports.
type Pools interface {
	Active(ctx context.Context, visible []string) ([]string, error)
	Status(ctx context.Context, pool string, visible []string) (map[string][]backend.PoolResult, error)
	Op(ctx context.Context, verb backend.PoolVerb, pool string, body []byte, opts backend.PoolOptions) ([]backend.PoolResult, error)
	// ReleaseToPool releases the one machine the request addressed (and the
	// guard authorized).
	ReleaseToPool(ctx context.Context, machineKey string) ([]backend.PoolResult, error)
}

// Actions covers plugin providers and plugin actions.
type Actions interface {
	Providers() []backend.PluginProvider
	List(ctx context.Context, prefix, key, plugin string) ([]backend.AvailableAction, error)
	// Run runs action cmd with the action parameters the request body
	// gave, as JSON values by name.
	Run(ctx context.Context, prefix, key, cmd, plugin string, params map[string]json.RawMessage) (json.RawMessage, error)
	Attempts(ctx context.Context, plugin string, machine string, limit int) ([]backend.CallbackAttempt, error)
}

// Jobs covers job creation and logs beyond CRUD.
type Jobs interface {
	// CreateJob answers a job request: the machine's next job, if any, and
	// what the agent got.
	CreateJob(ctx context.Context, body []byte) (backend.JobOutcome, *backend.Job, error)
	JobLog(ctx context.Context, key string) ([]byte, error)
	AppendJobLog(ctx context.Context, key string, chunk []byte) error
}

// JobTokens mints the token the agent gives a job's task scripts
// (docs/design.md §8.7).
type JobTokens interface {
	// JobToken returns job's token for creator, "" when creator may not
	// have one. It also fills job.ExtraClaims from the task.
	JobToken(ctx context.Context, job *backend.Job, creator *auth.Principal) (string, error)
}

// JobActions renders a job's task templates for the agent.
type JobActions interface {
	JobActions(ctx context.Context, key, os string) ([]backend.JobAction, error)
}

// Prefs covers server preferences.
type Prefs interface {
	Prefs(ctx context.Context) (map[string]string, error)
	SetPrefs(ctx context.Context, p map[string]string) (map[string]string, error)
}

// Events publishes posted events.
type Events interface {
	PostEvent(ctx context.Context, e backend.Event) error
}

func unavailable(what string) error {
	return backend.Errorf(backend.EUNAVAILABLE, "%s is not configured", what)
}

// decodeJSON decodes a request body with a DRP-style 400 on failure.
func decodeJSON(c *fiber.Ctx, v any) error {
	if err := json.Unmarshal(c.Body(), v); err != nil {
		return backend.NewError(backend.EBADREQUEST, c.Method(), "", "", "invalid JSON body: "+err.Error())
	}
	return nil
}

// users

func (s *Server) handleUserToken(c *fiber.Ctx) error {
	if s.Users == nil {
		return unavailable("token service")
	}
	// Copied: the values become the token's restriction.
	req := auth.TokenRequest{TTL: strings.Clone(c.Query("ttl")), Scope: strings.Clone(c.Query("scope")),
		Action: strings.Clone(c.Query("action")), Specific: strings.Clone(c.Query("specific"))}
	if c.Request().URI().QueryArgs().Has("roles") {
		req.Roles = []string{}
		for _, r := range strings.Split(strings.Clone(c.Query("roles")), ",") {
			if r = strings.TrimSpace(r); r != "" {
				req.Roles = append(req.Roles, r)
			}
		}
	}
	tok, err := s.Users.Token(userContext(c), routeKey(c), principalOf(c), req)
	if err != nil {
		return err
	}
	// DRP's reply is {Token, Info}; a token restricted to roles also says
	// which it carries and which roles= asked for in vain, since those are
	// dropped without an error (docs/design.md §8.5). DRP clients ignore
	// the extra members.
	reply := fiber.Map{"Token": tok.Token, "Info": s.buildInfo(c)}
	if tok.Roles != nil {
		reply["Roles"] = tok.Roles
	}
	if tok.Dropped != nil {
		reply["DroppedRoles"] = tok.Dropped
	}
	return c.JSON(reply)
}

func (s *Server) handleUserPassword(c *fiber.Ctx) error {
	if s.Users == nil {
		return unavailable("user service")
	}
	var body struct {
		Password *string `json:"Password"`
	}
	if err := decodeJSON(c, &body); err != nil {
		return err
	}
	if body.Password == nil || *body.Password == "" {
		return backend.NewError(backend.EBADREQUEST, "PUT", "users", routeKey(c), "Password is required")
	}
	u, err := s.Users.ChangePassword(userContext(c), routeKey(c), *body.Password)
	if err != nil {
		return err
	}
	s.afterWrite(c, "users")
	// Like any write's reply: the user itself only for a caller that may
	// get it (its self claim does), else only its Name.
	view, err := s.replyView(c, backend.Sanitize(u), "")
	if err != nil {
		return err
	}
	return c.JSON(view)
}

func (s *Server) handleUserSecret(c *fiber.Ctx) error {
	if s.Users == nil {
		return unavailable("user service")
	}
	if err := s.Users.RotateSecret(userContext(c), routeKey(c)); err != nil {
		return err
	}
	return c.JSON(fiber.Map{"Rotated": "users/" + routeKey(c)})
}

// handleSystemAction runs system actions; rotateSecret replaces the system
// Secret, which invalidates every token.
func (s *Server) handleSystemAction(c *fiber.Ctx) error {
	switch cmd := accessOf(c).Cmd; cmd {
	case "rotateSecret":
		if s.Users == nil {
			return unavailable("user service")
		}
		if err := s.Users.RotateSystemSecret(userContext(c)); err != nil {
			return err
		}
		return c.JSON(fiber.Map{"Rotated": "system"})
	default:
		return backend.NewError(backend.ENOTFOUND, "INVOKE", "system", "global", "Action "+cmd+" on system: Not Found")
	}
}

// prefs, license, events

func (s *Server) handleGetPrefs(c *fiber.Ctx) error {
	if s.Prefs == nil {
		return unavailable("preferences")
	}
	p, err := s.Prefs.Prefs(userContext(c))
	if err != nil {
		return err
	}
	return c.JSON(p)
}

func (s *Server) handleSetPrefs(c *fiber.Ctx) error {
	if s.Prefs == nil {
		return unavailable("preferences")
	}
	in := map[string]string{}
	if err := decodeJSON(c, &in); err != nil {
		return err
	}
	p, err := s.Prefs.SetPrefs(userContext(c), in)
	if err != nil {
		return err
	}
	return c.JSON(p)
}

func (s *Server) handleGetLicense(c *fiber.Ctx) error {
	if s.License == nil {
		return unavailable("license")
	}
	return c.JSON(s.License.LicenseState(userContext(c)))
}

func (s *Server) handleSetLicense(c *fiber.Ctx) error {
	if s.License == nil {
		return unavailable("license")
	}
	var body struct {
		License string `json:"License"`
	}
	if err := decodeJSON(c, &body); err != nil {
		return err
	}
	st, err := s.License.LoadLicense(userContext(c), strings.TrimSpace(body.License))
	if err != nil {
		return err
	}
	if s.Sync != nil {
		if err := s.Sync.Refresh(userContext(c)); err != nil {
			return err
		}
	}
	return c.JSON(st)
}

func (s *Server) handlePostEvent(c *fiber.Ctx) error {
	if s.Events == nil {
		return unavailable("events")
	}
	var e backend.Event
	if err := decodeJSON(c, &e); err != nil {
		return err
	}
	// Store changes are the server's to report (docs/design.md §13.1).
	e, err := s.Kinds.CheckPosted(e)
	if err != nil {
		return err
	}
	if e.Time.IsZero() {
		e.Time = time.Now().UTC()
	}
	if p := principalOf(c); p != nil {
		e.Principal = p.Subject()
	}
	if err := s.Events.PostEvent(userContext(c), e); err != nil {
		return err
	}
	return c.JSON(e)
}

// pools

func (s *Server) handlePoolsActive(c *fiber.Ctx) error {
	if s.Pools == nil {
		return unavailable("pools")
	}
	vis, err := s.machineVisibility(c)
	if err != nil {
		return err
	}
	names, err := s.Pools.Active(userContext(c), vis)
	if err != nil {
		return err
	}
	return c.JSON(names)
}

// machineVisibility asks the policies which machines the caller may see,
// so pool reports and operations never reveal or move hidden machines.
func (s *Server) machineVisibility(c *fiber.Ctx) ([]string, error) {
	p := principalOf(c)
	if p == nil {
		return []string{}, nil
	}
	return s.machineVisibilityOf(userContext(c), p)
}

// machineVisibilityOf is machineVisibility for principal p: nil means
// every machine.
func (s *Server) machineVisibilityOf(ctx context.Context, p *auth.Principal) ([]string, error) {
	d, err := s.Policy.Decide(ctx, policyListInput(p, "machines"))
	if err != nil {
		return nil, &backend.Error{Code: backend.EINTERNAL, Type: "AUTH", Messages: []string{"authorization failed"}, Err: err}
	}
	if d.Visible == nil || !d.Visible.Restricted {
		return nil, nil
	}
	if d.Visible.Keys == nil {
		return []string{}, nil
	}
	return d.Visible.Keys, nil
}

func (s *Server) handlePoolStatus(c *fiber.Ctx) error {
	if s.Pools == nil {
		return unavailable("pools")
	}
	vis, err := s.machineVisibility(c)
	if err != nil {
		return err
	}
	st, err := s.Pools.Status(userContext(c), routeKey(c), vis)
	if err != nil {
		return err
	}
	return c.JSON(st)
}

func (s *Server) handlePoolOp(c *fiber.Ctx) error {
	if s.Pools == nil {
		return unavailable("pools")
	}
	vis, err := s.machineVisibility(c)
	if err != nil {
		return err
	}
	// The verb is the one the request was authorized for (action:<verb>).
	verb := backend.PoolVerb(strings.TrimPrefix(accessOf(c).Operation, "action:"))
	res, err := s.Pools.Op(s.waitContext(userContext(c)), verb, routeKey(c), c.Body(), backend.PoolOptions{
		SourcePool: strings.Clone(c.Query("source-pool")), Force: c.QueryBool("force"), Visible: vis})
	s.metrics.countPoolOp(string(verb), len(res), err)
	if err != nil {
		return err
	}
	return c.JSON(res)
}

func (s *Server) handleReleaseToPool(c *fiber.Ctx) error {
	if s.Pools == nil {
		return unavailable("pools")
	}
	res, err := s.Pools.ReleaseToPool(userContext(c), routeKey(c))
	s.metrics.countPoolOp("releaseToPool", len(res), err)
	if err != nil {
		return err
	}
	return c.JSON(res)
}

// plugins and actions

func (s *Server) handleListProviders(c *fiber.Ctx) error {
	if s.Actions == nil {
		return c.JSON([]backend.PluginProvider{})
	}
	return c.JSON(s.Actions.Providers())
}

func (s *Server) handleGetProvider(c *fiber.Ctx) error {
	name := routeKey(c)
	if s.Actions != nil {
		for _, p := range s.Actions.Providers() {
			if p.Name == name {
				if c.Method() == fiber.MethodHead {
					return c.SendStatus(fiber.StatusOK)
				}
				return c.JSON(p)
			}
		}
	}
	return backend.NotFound(backend.RequestOp, "plugin_providers", name)
}

func (s *Server) handleListActions(c *fiber.Ctx) error {
	if s.Actions == nil {
		return c.JSON([]backend.AvailableAction{})
	}
	acts, err := s.Actions.List(userContext(c), routePrefix(c), routeKey(c), strings.Clone(c.Query("plugin")))
	if err != nil {
		return err
	}
	return c.JSON(acts)
}

func (s *Server) handleGetAction(c *fiber.Ctx) error {
	if s.Actions == nil {
		return unavailable("plugin actions")
	}
	cmd := accessOf(c).Cmd
	acts, err := s.Actions.List(userContext(c), routePrefix(c), routeKey(c), strings.Clone(c.Query("plugin")))
	if err != nil {
		return err
	}
	for _, a := range acts {
		if a.Command == cmd {
			return c.JSON(a)
		}
	}
	return backend.NewError(backend.ENOTFOUND, "GET", routePrefix(c), routeKey(c), cmd+": Not Found")
}

func (s *Server) handleRunAction(c *fiber.Ctx) error {
	if s.Actions == nil {
		return unavailable("plugin actions")
	}
	params := map[string]any{}
	if len(c.Body()) > 0 {
		if err := json.Unmarshal(c.Body(), &params); err != nil {
			return backend.NewError(backend.EBADREQUEST, "INVOKE", routePrefix(c), routeKey(c),
				"action parameters must be a JSON object: "+err.Error())
		}
	}
	args, err := backend.EncodeParams(params)
	if err != nil {
		return err
	}
	out, err := s.Actions.Run(userContext(c), routePrefix(c), routeKey(c), accessOf(c).Cmd, strings.Clone(c.Query("plugin")), args)
	if err != nil {
		return err
	}
	return c.Send(out)
}

func (s *Server) handlePluginAttempts(c *fiber.Ctx) error {
	if s.Actions == nil {
		return unavailable("plugin actions")
	}
	out, err := s.Actions.Attempts(userContext(c), routeKey(c), strings.Clone(c.Query("machine")), c.QueryInt("limit", 100))
	if err != nil {
		return err
	}
	return c.JSON(out)
}

// PublicKeys is implemented by a params service that accepts secure param
// values sealed by DRP clients (docs/design.md §3.9).
type PublicKeys interface {
	PublicKey(ctx context.Context, prefix, key string) ([]byte, error)
}

// handlePubkey answers the object's public key as a JSON string (base64),
// as drpcli reads it before setting a secure param.
func (s *Server) handlePubkey(c *fiber.Ctx) error {
	pk, ok := s.Params.(PublicKeys)
	if !ok {
		return unavailable("secure param public keys")
	}
	key, err := pk.PublicKey(userContext(c), routePrefix(c), routeKey(c))
	if err != nil {
		return err
	}
	return c.JSON(key)
}

// jobs

func (s *Server) handleCreateJob(c *fiber.Ctx) error {
	if s.Jobs == nil {
		return unavailable("jobs")
	}
	outcome, job, err := s.Jobs.CreateJob(userContext(c), c.Body())
	if err != nil {
		return err
	}
	status := jobStatus(outcome)
	if job == nil {
		c.Status(status)
		return c.Send(nil)
	}
	// The token is in this reply only: never stored, never in events.
	if s.JobTokens != nil {
		tok, err := s.JobTokens.JobToken(userContext(c), job, principalOf(c))
		if err != nil {
			return err
		}
		job.Token = tok
	}
	return c.Status(status).JSON(job)
}

// jobStatus is DRP's status for a job request's outcome: 201 for a new
// job, 202 for an incomplete job handed back, 204 for nothing to run.
func jobStatus(o backend.JobOutcome) int {
	switch o {
	case backend.JobNew:
		return fiber.StatusCreated
	case backend.JobAgain:
		return fiber.StatusAccepted
	}
	return fiber.StatusNoContent
}

func (s *Server) handleGetJobLog(c *fiber.Ctx) error {
	if s.Jobs == nil {
		return unavailable("jobs")
	}
	b, err := s.Jobs.JobLog(userContext(c), routeKey(c))
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderContentType, fiber.MIMEOctetStream)
	return c.Send(b)
}

func (s *Server) handlePutJobLog(c *fiber.Ctx) error {
	if s.Jobs == nil {
		return unavailable("jobs")
	}
	if ct := string(c.Request().Header.ContentType()); !strings.HasPrefix(ct, fiber.MIMEOctetStream) {
		return backend.NewError(backend.EUNSUPPORTED, "PUT", "jobs", routeKey(c), "Invalid content type: "+ct)
	}
	if err := s.Jobs.AppendJobLog(userContext(c), routeKey(c), c.Body()); err != nil {
		return err
	}
	return c.SendStatus(fiber.StatusNoContent)
}

func (s *Server) handleJobActions(c *fiber.Ctx) error {
	if s.JobActions == nil {
		return unavailable("jobs")
	}
	out, err := s.JobActions.JobActions(userContext(c), routeKey(c), strings.Clone(c.Query("os", "linux")))
	if err != nil {
		return err
	}
	return c.JSON(out)
}

// handleBenchPool reads one pool without authentication: the baseline the
// gateway benchmark divides by. Enabled only with --bench-routes.
func (s *Server) handleBenchPool(c *fiber.Ctx) error {
	if err := s.objectsReady(); err != nil {
		return err
	}
	key := strings.Clone(c.Params("key"))
	if d, err := url.PathUnescape(key); err == nil {
		key = d
	}
	// The same read as an authorized GET of the pool (the read cache), so
	// that the benchmark's ratio is the guard's cost alone.
	v, err := s.Objects.View(userContext(c), "pools", key)
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	return c.Send(v.JSON)
}
