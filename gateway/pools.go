package gateway

import (
	"context"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/provgate/provgate/backend"
	"github.com/provgate/provgate/gateway/claims"
)

// Pools covers pool membership operations and reports.
type Pools interface {
	Active(ctx context.Context, visible []string) ([]string, error)
	Status(ctx context.Context, pool string, visible []string) (map[string][]backend.PoolResult, error)
	Op(ctx context.Context, verb backend.PoolVerb, pool string, body []byte, opts backend.PoolOptions) ([]backend.PoolResult, error)
	// ReleaseToPool releases the one machine the request addressed (and the
	// guard authorized).
	ReleaseToPool(ctx context.Context, machineKey string) ([]backend.PoolResult, error)
}

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
	return serves{
		claims.ServePoolsActive:   p.active,
		claims.ServePoolStatus:    p.status,
		claims.ServePoolOp:        p.op,
		claims.ServeReleaseToPool: p.releaseToPool,
	}.unless(p.pools == nil)
}

func (p poolRoutes) active(c *fiber.Ctx) error {
	vis, err := p.machines.of(c)
	if err != nil {
		return err
	}
	names, err := p.pools.Active(userContext(c), vis)
	if err != nil {
		return err
	}
	return c.JSON(names)
}

func (p poolRoutes) status(c *fiber.Ctx) error {
	vis, err := p.machines.of(c)
	if err != nil {
		return err
	}
	st, err := p.pools.Status(userContext(c), routeKey(c), vis)
	if err != nil {
		return err
	}
	return c.JSON(st)
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
