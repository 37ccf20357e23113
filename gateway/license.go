package gateway

import (
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/provgate/provgate/gateway/claims"
)

// licenseRoutes serves the license; a new license is policy data.
type licenseRoutes struct {
	license Licenser
	sync    PolicySync
}

func (l licenseRoutes) serves() serves {
	return serves{claims.ServeGetLicense: l.get, claims.ServeSetLicense: l.set}.unless(l.license == nil)
}

func (l licenseRoutes) get(c *fiber.Ctx) error {
	return c.JSON(l.license.LicenseState(userContext(c)))
}

func (l licenseRoutes) set(c *fiber.Ctx) error {
	var body struct {
		License string `json:"License"`
	}
	if err := decodeJSON(c, &body); err != nil {
		return err
	}
	st, err := l.license.LoadLicense(userContext(c), strings.TrimSpace(body.License))
	if err != nil {
		return err
	}
	if l.sync != nil {
		if err := l.sync.Refresh(userContext(c)); err != nil {
			return err
		}
	}
	return c.JSON(st)
}
