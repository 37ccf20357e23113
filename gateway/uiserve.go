package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/filesystem"

	"github.com/provgate/provgate/backend"
	accessapi "github.com/provgate/provgate/gateway/access"
	"github.com/provgate/provgate/gateway/auth"
	"github.com/provgate/provgate/gateway/claims"
	"github.com/provgate/provgate/gateway/ui"
)

// The access explorer's page (docs/design.md §9.10). Each view asks the
// question its API route asks, authorized by that route's own claims
// (authorize on the route's request), and renders the same answer.

// sessionCookie carries a browser's token: Secure, HttpOnly,
// SameSite=Strict, only under /ui/.
const sessionCookie = "provgate_session"

// uiPages serves the access explorer's pages (docs/design.md §9.8): the
// explorer's answers, for a caller the pages authenticate themselves.
type uiPages struct {
	*explorer
	auth  Authenticator
	users Users
	fresh func(ctx context.Context) error
}

// uiCSP is the page's Content-Security-Policy: nothing from anywhere but
// the server, no inline script or style.
const uiCSP = "default-src 'self'"

// serves gives the page's rows of the route table their handlers; the
// router runs uiGuard before each page (claims.AccessSession).
func (s *uiPages) serves() serves {
	return serves{
		claims.ServeUIHeaders:    s.uiHeaders,
		claims.ServeUIStatic:     filesystem.New(filesystem.Config{Root: http.FS(ui.Static())}),
		claims.ServeUIHome:       s.uiHome,
		claims.ServeUIExplain:    s.uiExplain,
		claims.ServeUIUsers:      s.uiMatrix,
		claims.ServeUIWho:        s.uiWho,
		claims.ServeUITenants:    s.uiTenant,
		claims.ServeUIRoles:      s.uiRoles,
		claims.ServeUIDenials:    s.uiDenials,
		claims.ServeUIEscalation: s.uiEscalation,
	}
}

// uiHeaders sets the page's security headers on every /ui reply.
func (s *uiPages) uiHeaders(c *fiber.Ctx) error {
	c.Set("Content-Security-Policy", uiCSP)
	c.Set("X-Content-Type-Options", "nosniff")
	c.Set("X-Frame-Options", "DENY")
	c.Set("Referrer-Policy", "no-referrer")
	c.Set("Cache-Control", "no-store")
	return c.Next()
}

// uiGuard authenticates a browser: an Authorization header (Basic, as the
// browser's challenge dialog sends it, or Bearer) or the session cookie.
// Anonymous or failed logins get 401 with a Basic challenge and no data. A
// Basic login is given a session cookie holding a token of the user.
func (s *uiPages) uiGuard(c *fiber.Ctx) error {
	if s.auth == nil || s.policy == nil {
		return s.uiFail(c, http.StatusServiceUnavailable, "authorization is not configured")
	}
	ctx := userContext(c)
	if err := s.fresh(ctx); err != nil {
		return s.uiFail(c, http.StatusServiceUnavailable, "authorization data unavailable")
	}
	authz, fromCookie := c.Get(fiber.HeaderAuthorization), false
	if authz == "" {
		if v := c.Cookies(sessionCookie); v != "" {
			authz, fromCookie = "Bearer "+v, true
		}
	}
	if authz == "" {
		return s.uiChallenge(c, "Sign in to see the access explorer.")
	}
	p, err := s.auth.Authenticate(ctx, authz, c.IP())
	if err != nil {
		if backend.IsCode(err, backend.ETOOMANY) {
			return s.uiFail(c, http.StatusTooManyRequests, "too many failed logins; try again later")
		}
		if fromCookie {
			c.ClearCookie(sessionCookie)
		}
		return s.uiChallenge(c, "Those credentials are not accepted.")
	}
	if p.Method == auth.MethodBasic && s.users != nil {
		if tok, err := s.users.Token(ctx, p.Name, p, auth.TokenRequest{TTL: "1h"}); err == nil {
			c.Cookie(&fiber.Cookie{Name: sessionCookie, Value: tok.Token, Path: "/ui/", MaxAge: 3600, Secure: true,
				HTTPOnly: true, SameSite: fiber.CookieSameSiteStrictMode})
		}
	}
	c.Locals(principalKey, p)
	ctx = backend.WithAccess(ctx, &requestAccess{policy: s.policy, p: p})
	c.SetUserContext(ctx)
	return c.Next()
}

func (s *uiPages) uiChallenge(c *fiber.Ctx, msg string) error {
	c.Set(fiber.HeaderWWWAuthenticate, `Basic realm="provgate", charset="UTF-8"`)
	return s.uiFail(c, http.StatusUnauthorized, msg)
}

// uiFail renders an error page without any data.
func (s *uiPages) uiFail(c *fiber.Ctx, status int, msg string) error {
	return s.uiRender(c, status, ui.Page{Title: http.StatusText(status), View: ui.ViewError,
		Error: &ui.Failure{Status: status, Messages: []string{msg}}})
}

func (s *uiPages) uiRender(c *fiber.Ctx, status int, p ui.Page) error {
	if who := principalOf(c); who != nil && p.User == "" {
		p.User = who.Name
	}
	var buf bytes.Buffer
	if err := ui.Render(&buf, p); err != nil {
		return err
	}
	c.Set(fiber.HeaderContentType, fiber.MIMETextHTMLCharsetUTF8)
	return c.Status(status).Send(buf.Bytes())
}

// uiAnswer renders a view's answer, or the failure its question got.
func (s *uiPages) uiAnswer(c *fiber.Ctx, p ui.Page, data any, err error) error {
	if err != nil {
		status, msgs := errorAnswer(err)
		var be *backend.Error
		if !errors.As(err, &be) {
			status, msgs = http.StatusInternalServerError, []string{"internal error"}
		}
		p.Error = &ui.Failure{Status: status, Messages: msgs}
		return s.uiRender(c, status, p)
	}
	p.Data = data
	return s.uiRender(c, http.StatusOK, p)
}

// asRoute authorizes the caller for the API route the view stands for.
func (s *uiPages) asRoute(ctx context.Context, c *fiber.Ctx, method, path string, q url.Values, body any) (*authorization, error) {
	var raw []byte
	if body != nil {
		var err error
		if raw, err = json.Marshal(body); err != nil {
			return nil, err
		}
	}
	return s.authorize(ctx, principalOf(c), apiRequest{Method: method, Path: apiBase + path, Query: q, Body: raw}, s.realRequest())
}

func form(c *fiber.Ctx, names ...string) map[string]string {
	out := map[string]string{}
	for _, n := range names {
		out[n] = strings.Clone(c.Query(n))
	}
	return out
}

func (s *uiPages) uiHome(c *fiber.Ctx) error {
	return s.uiRender(c, http.StatusOK, ui.Page{Title: "Access explorer", View: ui.ViewHome})
}

func (s *uiPages) uiExplain(c *fiber.Ctx) error {
	f := form(c, "user", "method", "path", "body", "decision")
	if f["method"] == "" {
		f["method"] = "GET"
	}
	p := ui.Page{Title: "Explain a request", View: ui.ViewExplain, Form: f}
	ctx := userContext(c)
	switch {
	case f["decision"] != "":
		if _, err := s.asRoute(ctx, c, "POST", "/access/explain", nil, accessapi.ExplainRequest{Decision: f["decision"]}); err != nil {
			return s.uiAnswer(c, p, nil, err)
		}
		x, err := s.explainLogged(ctx, f["decision"])
		if err == nil {
			f["user"], f["method"], f["path"] = x.User, x.Method, strings.TrimPrefix(x.Path, apiBase)
		}
		return s.uiAnswer(c, p, x, err)
	case f["path"] == "":
		return s.uiRender(c, http.StatusOK, p)
	}
	var body json.RawMessage
	if b := strings.TrimSpace(f["body"]); b != "" {
		if !json.Valid([]byte(b)) {
			return s.uiAnswer(c, p, nil, backend.NewError(backend.EBADREQUEST, "GET", "access", "explain", "Body is not JSON"))
		}
		body = json.RawMessage(b)
	}
	if _, err := s.asRoute(ctx, c, "POST", "/access/explain", nil, accessapi.ExplainRequest{User: f["user"]}); err != nil {
		return s.uiAnswer(c, p, nil, err)
	}
	target, err := s.explainTarget(ctx, principalOf(c), f["user"])
	if err != nil {
		return s.uiAnswer(c, p, nil, err)
	}
	r, err := parseTarget(f["method"], f["path"], body)
	if err != nil {
		return s.uiAnswer(c, p, nil, err)
	}
	return s.uiAnswer(c, p, s.explain(ctx, target, r), nil)
}

func (s *uiPages) uiMatrix(c *fiber.Ctx) error {
	f := form(c, "name")
	if f["name"] == "" {
		f["name"] = principalOf(c).Name
	}
	p := ui.Page{Title: "What a user can do", View: ui.ViewMatrix, Form: f}
	return s.view(c, p, "/access/users/"+url.PathEscape(f["name"]), nil, func(ctx context.Context, z *authorization) (any, error) {
		who, err := s.userPrincipal(ctx, z.res.Key)
		if err != nil {
			return nil, err
		}
		return s.matrix(ctx, who)
	})
}

func (s *uiPages) uiWho(c *fiber.Ctx) error {
	f := form(c, "scope", "action", "key")
	p := ui.Page{Title: "Who can", View: ui.ViewWho, Form: f}
	if f["scope"] == "" || f["action"] == "" {
		return s.uiRender(c, http.StatusOK, p)
	}
	q := url.Values{"scope": {f["scope"]}, "action": {f["action"]}, "key": {f["key"]}}
	return s.view(c, p, "/access/who", q, func(ctx context.Context, _ *authorization) (any, error) {
		return s.whoQuestion(ctx, f["scope"], f["action"], f["key"])
	})
}

func (s *uiPages) uiTenant(c *fiber.Ctx) error {
	f := form(c, "name")
	p := ui.Page{Title: "A tenant's view", View: ui.ViewTenant, Form: f}
	if f["name"] == "" {
		return s.uiRender(c, http.StatusOK, p)
	}
	return s.view(c, p, "/access/tenants/"+url.PathEscape(f["name"]), nil, func(ctx context.Context, z *authorization) (any, error) {
		return s.tenantView(ctx, z.res.Key)
	})
}

func (s *uiPages) uiRoles(c *fiber.Ctx) error {
	f := form(c, "a", "b")
	p := ui.Page{Title: "Role diff", View: ui.ViewRoleDiff, Form: f}
	if f["a"] == "" || f["b"] == "" {
		return s.uiRender(c, http.StatusOK, p)
	}
	return s.view(c, p, "/access/roles/diff", url.Values{"a": {f["a"]}, "b": {f["b"]}}, func(ctx context.Context, _ *authorization) (any, error) {
		return s.roleDiff(ctx, f["a"], f["b"])
	})
}

func (s *uiPages) uiDenials(c *fiber.Ctx) error {
	p := ui.Page{Title: "Recent denials", View: ui.ViewDenials}
	return s.view(c, p, "/access/denials", nil, func(ctx context.Context, _ *authorization) (any, error) {
		ls, err := s.denials(ctx)
		if err != nil {
			return nil, err
		}
		out := make([]ui.Denial, 0, len(ls))
		for _, l := range ls {
			out = append(out, ui.Denial{DecisionID: l.DecisionID, Time: l.Timestamp.UTC().Format("2006-01-02 15:04:05"),
				Principal: l.Input.Principal.Name, Method: l.Input.Method, Path: l.Input.Path, Reasons: l.Result.Reasons})
		}
		return out, nil
	})
}

func (s *uiPages) uiEscalation(c *fiber.Ctx) error {
	p := ui.Page{Title: "Who can hand out authority", View: ui.ViewEscalation}
	return s.view(c, p, "/access/escalation", nil, func(ctx context.Context, _ *authorization) (any, error) {
		return s.escalation(ctx)
	})
}

// view answers page p with what answer gives, once the caller is
// authorized for the API GET route the view stands for (asRoute).
func (s *uiPages) view(c *fiber.Ctx, p ui.Page, path string, q url.Values, answer func(ctx context.Context, z *authorization) (any, error)) error {
	ctx := userContext(c)
	z, err := s.asRoute(ctx, c, "GET", path, q, nil)
	if err != nil {
		return s.uiAnswer(c, p, nil, err)
	}
	v, err := answer(ctx, z)
	return s.uiAnswer(c, p, v, err)
}
