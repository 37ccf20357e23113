package gateway

import (
	"github.com/gofiber/fiber/v2"

	"github.com/provgate/provgate/gateway/claims"
)

// prefsRoutes serves the server preferences.
type prefsRoutes struct{ prefs Prefs }

func (p prefsRoutes) serves() serves {
	return serves{claims.ServeGetPrefs: p.get, claims.ServeSetPrefs: p.set}.unless(p.prefs == nil)
}

func (p prefsRoutes) get(c *fiber.Ctx) error {
	out, err := p.prefs.Prefs(userContext(c))
	if err != nil {
		return err
	}
	return c.JSON(out)
}

func (p prefsRoutes) set(c *fiber.Ctx) error {
	in := map[string]string{}
	if err := decodeJSON(c, &in); err != nil {
		return err
	}
	out, err := p.prefs.SetPrefs(userContext(c), in)
	if err != nil {
		return err
	}
	return c.JSON(out)
}
