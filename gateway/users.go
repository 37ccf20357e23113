package gateway

import (
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/provgate/provgate/backend"
	"github.com/provgate/provgate/gateway/auth"
	"github.com/provgate/provgate/gateway/claims"
)

// userRoutes serves a user's token, password and Secret, and the system
// actions (rotating the system Secret).
type userRoutes struct {
	kinds   *backend.Catalog
	users   Users
	info    func(*fiber.Ctx) info
	refresh refresher
}

func (u userRoutes) serves() serves {
	return serves{claims.ServeUserToken: u.token, claims.ServeUserPassword: u.password,
		claims.ServeUserSecret: u.secret, claims.ServeSystemAction: u.systemAction}.unless(u.users == nil)
}

func (u userRoutes) token(c *fiber.Ctx) error {
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
	tok, err := u.users.Token(userContext(c), routeKey(c), principalOf(c), req)
	if err != nil {
		return err
	}
	// DRP's reply is {Token, Info}; a token restricted to roles also says
	// which it carries and which roles= asked for in vain, since those are
	// dropped without an error (docs/design.md §8.5). DRP clients ignore
	// the extra members.
	reply := fiber.Map{"Token": tok.Token, "Info": u.info(c)}
	if tok.Roles != nil {
		reply["Roles"] = tok.Roles
	}
	if tok.Dropped != nil {
		reply["DroppedRoles"] = tok.Dropped
	}
	return c.JSON(reply)
}

func (u userRoutes) password(c *fiber.Ctx) error {
	var body struct {
		Password *string `json:"Password"`
	}
	if err := decodeJSON(c, &body); err != nil {
		return err
	}
	if body.Password == nil || *body.Password == "" {
		return backend.NewError(backend.EBADREQUEST, "PUT", "users", routeKey(c), "Password is required")
	}
	m, err := u.users.ChangePassword(userContext(c), routeKey(c), *body.Password)
	if err != nil {
		return err
	}
	u.refresh.afterWrite(c, "users")
	// Like any write's reply: the user itself only for a caller that may
	// get it (its self claim does), else only its Name.
	view, err := replyView(u.kinds, c, backend.Sanitize(m), "")
	if err != nil {
		return err
	}
	return c.JSON(view)
}

func (u userRoutes) secret(c *fiber.Ctx) error {
	if err := u.users.RotateSecret(userContext(c), routeKey(c)); err != nil {
		return err
	}
	return c.JSON(fiber.Map{"Rotated": "users/" + routeKey(c)})
}

// systemAction runs system actions; rotateSecret replaces the system
// Secret, which invalidates every token.
func (u userRoutes) systemAction(c *fiber.Ctx) error {
	switch cmd := accessOf(c).Cmd; cmd {
	case "rotateSecret":
		if err := u.users.RotateSystemSecret(userContext(c)); err != nil {
			return err
		}
		return c.JSON(fiber.Map{"Rotated": "system"})
	default:
		return backend.NewError(backend.ENOTFOUND, "INVOKE", "system", "global", "Action "+cmd+" on system: Not Found")
	}
}
