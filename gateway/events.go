package gateway

import (
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/provgate/provgate/backend"
	"github.com/provgate/provgate/gateway/claims"
)

// eventRoutes serves posted events.
type eventRoutes struct {
	kinds  *backend.Catalog
	events Events
}

func (e eventRoutes) serves() serves {
	return serves{claims.ServePostEvent: e.post}.unless(e.events == nil)
}

func (e eventRoutes) post(c *fiber.Ctx) error {
	var ev backend.Event
	if err := decodeJSON(c, &ev); err != nil {
		return err
	}
	// Store changes are the server's to report (docs/design.md §13.1).
	ev, err := e.kinds.CheckPosted(ev)
	if err != nil {
		return err
	}
	if ev.Time.IsZero() {
		ev.Time = time.Now().UTC()
	}
	if p := principalOf(c); p != nil {
		ev.Principal = p.Subject()
	}
	if err := e.events.PostEvent(userContext(c), ev); err != nil {
		return err
	}
	return c.JSON(ev)
}
