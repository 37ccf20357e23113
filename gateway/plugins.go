package gateway

import (
	"encoding/json"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/provgate/provgate/backend"
	"github.com/provgate/provgate/gateway/claims"
)

// pluginRoutes serves plugin providers, the plugin actions of objects and
// a plugin's callback attempts.
type pluginRoutes struct{ actions Actions }

func (p pluginRoutes) serves() serves {
	return serves{claims.ServeListProviders: p.providers, claims.ServeGetProvider: p.provider,
		claims.ServeListActions: p.list, claims.ServeGetAction: p.get, claims.ServeRunAction: p.run,
		claims.ServePluginAttempts: p.attempts}.unless(p.actions == nil)
}

func (p pluginRoutes) providers(c *fiber.Ctx) error { return c.JSON(p.actions.Providers()) }

func (p pluginRoutes) provider(c *fiber.Ctx) error {
	name := routeKey(c)
	for _, pp := range p.actions.Providers() {
		if pp.Name == name {
			if c.Method() == fiber.MethodHead {
				return c.SendStatus(fiber.StatusOK)
			}
			return c.JSON(pp)
		}
	}
	return backend.NotFound(backend.RequestOp, "plugin_providers", name)
}

func (p pluginRoutes) list(c *fiber.Ctx) error {
	acts, err := p.actions.List(userContext(c), routePrefix(c), routeKey(c), strings.Clone(c.Query("plugin")))
	if err != nil {
		return err
	}
	return c.JSON(acts)
}

func (p pluginRoutes) get(c *fiber.Ctx) error {
	cmd := accessOf(c).Cmd
	acts, err := p.actions.List(userContext(c), routePrefix(c), routeKey(c), strings.Clone(c.Query("plugin")))
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

func (p pluginRoutes) run(c *fiber.Ctx) error {
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
	out, err := p.actions.Run(userContext(c), routePrefix(c), routeKey(c), accessOf(c).Cmd, strings.Clone(c.Query("plugin")), args)
	if err != nil {
		return err
	}
	return c.Send(out)
}

func (p pluginRoutes) attempts(c *fiber.Ctx) error {
	out, err := p.actions.Attempts(userContext(c), routeKey(c), strings.Clone(c.Query("machine")), c.QueryInt("limit", 100))
	if err != nil {
		return err
	}
	return c.JSON(out)
}
