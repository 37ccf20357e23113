package gateway

import (
	"context"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/provgate/provgate/backend"
	"github.com/provgate/provgate/gateway/claims"
)

// poolRoutes serves pool reports and membership operations, which see and
// move only the machines the caller may see.
type poolRoutes struct {
	pools    Pools
	machines machineVisibility
	// wait is the request's context for an operation that may wait (a
	// graceful shutdown ends the wait).
	wait    func(context.Context) context.Context
	metrics *metrics
}

func (p poolRoutes) serves() serves {
	return serves{claims.ServePoolsActive: p.active, claims.ServePoolStatus: p.status,
		claims.ServePoolOp: p.op, claims.ServeReleaseToPool: p.releaseToPool}.unless(p.pools == nil)
}

func (p poolRoutes) active(c *fiber.Ctx) error {
	return p.report(c, func(ctx context.Context, vis []string) (any, error) { return p.pools.Active(ctx, vis) })
}

func (p poolRoutes) status(c *fiber.Ctx) error {
	return p.report(c, func(ctx context.Context, vis []string) (any, error) {
		return p.pools.Status(ctx, routeKey(c), vis)
	})
}

// report answers a pool report of the machines the caller may see.
func (p poolRoutes) report(c *fiber.Ctx, read func(ctx context.Context, visible []string) (any, error)) error {
	vis, err := p.machines.of(c)
	if err != nil {
		return err
	}
	out, err := read(userContext(c), vis)
	if err != nil {
		return err
	}
	return c.JSON(out)
}

func (p poolRoutes) op(c *fiber.Ctx) error {
	vis, err := p.machines.of(c)
	if err != nil {
		return err
	}
	// The verb is the one the request was authorized for (action:<verb>).
	verb := backend.PoolVerb(strings.TrimPrefix(accessOf(c).Operation, "action:"))
	res, err := p.pools.Op(p.wait(userContext(c)), verb, routeKey(c), c.Body(), backend.PoolOptions{
		SourcePool: strings.Clone(c.Query("source-pool")), Force: c.QueryBool("force"), Visible: vis})
	p.metrics.countPoolOp(string(verb), len(res), err)
	if err != nil {
		return err
	}
	return c.JSON(res)
}

func (p poolRoutes) releaseToPool(c *fiber.Ctx) error {
	res, err := p.pools.ReleaseToPool(userContext(c), routeKey(c))
	p.metrics.countPoolOp("releaseToPool", len(res), err)
	if err != nil {
		return err
	}
	return c.JSON(res)
}
