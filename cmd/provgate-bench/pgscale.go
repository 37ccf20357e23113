package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"
)

// Leg names of figures 14 (the large fleet on PostgreSQL).
const (
	legPGTenant = "pg-list-tenant"
	legPGBig    = "pg-list-tenant-10000"
	legPGFree   = "pg-list-unrestricted"
)

// pgScaleResult is figures 14: tenant lists on a PostgreSQL server holding
// the large fleet, and the start-up of one holding StartupFleet.
type pgScaleResult struct {
	Large        fleet
	Reads        map[string][]legResult
	StartupFleet fleet
	// Startup and Mem are those of the StartupFleet server; zero when
	// -startup-machines is 0.
	Startup time.Duration
	Mem     memPeak
	setup
}

var pgScaleIDs = []string{"14a", "14b", "14c", "14d"}

// largeFleet is the large fleet of figures 9 and 14, with tenant t-big.
func (c config) largeFleet() fleet {
	return fleet{Machines: c.ScaleMachines, Users: c.ScaleUsers, Roles: c.ScaleRoles, Tenants: c.ScaleTenants}.withBigTenant()
}

// runPGScale measures figures 14, each server on a fresh schema of
// cfg.Postgres, its fixture written through the store as for figures 9.
func runPGScale(ctx context.Context, cfg config, tmp, pub, lic string, logf func(string, ...any)) (*pgScaleResult, error) {
	res := &pgScaleResult{Large: cfg.largeFleet()}
	if err := runPGLists(ctx, cfg, res, tmp, pub, lic, logf); err != nil {
		return nil, err
	}
	if cfg.StartupMachines == 0 {
		return res, nil
	}
	res.StartupFleet = fleet{Machines: cfg.StartupMachines, Users: cfg.ScaleUsers, Roles: cfg.ScaleRoles, Tenants: cfg.ScaleTenants}.withBigTenant()
	dsn, drop, err := freshSchema(ctx, cfg.Postgres)
	if err != nil {
		return nil, err
	}
	defer drop()
	srv, startup, err := startScale(ctx, cfg, "pg-startup", filepath.Join(tmp, "pg-startup"), dsn, pub, lic, res.StartupFleet, logf)
	if err != nil {
		return nil, err
	}
	res.Startup = startup
	// The server answers its tenants' lists before it counts as started.
	if err := srv.checkTenants(ctx); err != nil {
		srv.srv.Stop()
		return nil, err
	}
	res.Mem = srv.srv.Stop()
	res.Notes = append(res.Notes, fmt.Sprintf("figures 14c-14d: a PostgreSQL server holding %s, written through backend/store after a first start on a fresh schema; start-up is the start after that, peak memory over that start and a tenant list by each tenant reader", res.StartupFleet))
	return res, nil
}

func runPGLists(ctx context.Context, cfg config, res *pgScaleResult, tmp, pub, lic string, logf func(string, ...any)) error {
	if res.Large.BigTenant == 0 {
		return fmt.Errorf("figures 14 need %d machines in no tenant of the large fleet", bigTenantMachines)
	}
	dsn, drop, err := freshSchema(ctx, cfg.Postgres)
	if err != nil {
		return err
	}
	defer drop()
	large, _, err := startScale(ctx, cfg, "pg-large", filepath.Join(tmp, "pg-large"), dsn, pub, lic, res.Large, logf)
	if err != nil {
		return err
	}
	defer large.srv.Stop()
	if err := large.checkTenants(ctx); err != nil {
		return err
	}
	get := func(auth string) op {
		return httpOp(newClient(cfg.Clients), request{Method: "GET", URL: large.srv.Base + "/api/v3/machines?limit=50", Auth: auth, Want: 200})
	}
	legs := []legSpec{
		{Name: legPGTenant, Clients: cfg.Clients, Op: get(large.tenantReader)},
		{Name: legPGBig, Clients: cfg.Clients, Op: get(large.bigReader)},
		{Name: legPGFree, Clients: cfg.Clients, Op: get(large.reader)},
	}
	logf("figures 14a-14b: %d rounds of %s per leg", cfg.Rounds, cfg.Leg)
	if res.Reads, err = interleave(ctx, legs, cfg.Rounds, cfg.Leg, cfg.Warmup, func(s string) { logf("%s", s) }); err != nil {
		return err
	}
	res.Notes = append(res.Notes, fmt.Sprintf("figures 14a-14b: a PostgreSQL server (fresh schema of PROVGATE_TEST_DATABASE) holding %s, written through backend/store after a first start", res.Large))
	return nil
}

// pgScaleFigures computes figures 14.
func pgScaleFigures(r *pgScaleResult, skipped string) []figure {
	if r == nil {
		return skippedFigures(skipped, pgScaleIDs...)
	}
	figs := []figure{
		fromRounds("14a", costRatios(r.Reads[legPGTenant], r.Reads[legPGFree]),
			"GET /api/v3/machines?limit=50 on the PostgreSQL large-fleet server by a user of tenant t-0 (100 visible machines) vs a user in no tenant"),
		fromRounds("14b", costRatios(r.Reads[legPGBig], r.Reads[legPGFree]),
			fmt.Sprintf("the same list by a user of tenant t-big (%d visible machines) vs a user in no tenant", r.Large.BigTenant)),
	}
	if r.StartupFleet.Machines == 0 {
		return append(figs, skippedFigures("-startup-machines 0", "14c", "14d")...)
	}
	start, mem := spec("14c"), spec("14d")
	start.Value = r.Startup.Seconds()
	start.Note = fmt.Sprintf("from exec to listening of a PostgreSQL server holding %s (schema check, policy data of every role and tenant loaded)", r.StartupFleet)
	mem.Value = float64(r.Mem.HWMKiB) / 1024
	mem.Note = fmt.Sprintf("VmHWM of that server over its start and one list per tenant reader; largest sampled VmRSS %.1f MiB", float64(r.Mem.MaxRSSKiB)/1024)
	return append(figs, start, mem)
}
