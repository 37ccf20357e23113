package main

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"time"
)

// Figures 10: the cost of the grant check (docs/design.md §5.9) on the
// writes it guards: a role create with 10 claims and a user create with 5
// roles, by the superuser (drpcli's administrator). With -baseline-server
// (a build without the check, e.g. of main) both servers run at once and
// their legs alternate, so the ratio compares like with like.

const (
	legRoleCreate     = "role-create-10-claims"
	legUserCreate     = "user-create-5-roles"
	legRoleCreateBase = "baseline-" + legRoleCreate
	legUserCreateBase = "baseline-" + legUserCreate
)

var grantIDs = []string{"10a", "10b", "10c", "10d"}

// grantsResult holds the legs of figures 10.
type grantsResult struct {
	Legs     map[string][]legResult
	Baseline bool
	setup
}

// grantClaims are the 10 claims of each created role: lists, "*", update:
// pointers and action: forms, as real roles hold them.
var grantClaims = []map[string]string{
	{"scope": "machines", "action": "get,list", "specific": "*"},
	{"scope": "machines", "action": "update:/Params,update:/Description", "specific": "*"},
	{"scope": "machines", "action": "action:callbackDo", "specific": "*"},
	{"scope": "profiles", "action": "get,list,update:/Params", "specific": "web,db"},
	{"scope": "pools", "action": "action:allocateMachines,action:releaseMachines,get", "specific": "p1,p2"},
	{"scope": "jobs", "action": "get,list,log", "specific": "*"},
	{"scope": "params,stages,tasks", "action": "get", "specific": "*"},
	{"scope": "workflows", "action": "get,list", "specific": "*"},
	{"scope": "bootenvs,subnets", "action": "get,list", "specific": "*"},
	{"scope": "events", "action": "post", "specific": "*"},
}

// grantServer is one server of figures 10 with its admin token.
type grantServer struct {
	srv   *server
	admin api
}

func startGrantServer(ctx context.Context, cfg config, name, bin, dir, pub, lic string) (*grantServer, error) {
	pw := randomSecret()
	srv, err := startServer(ctx, name, bin, dir, "", pw, "--license-public-key", pub, "--license", lic)
	if err != nil {
		return nil, err
	}
	a := api{base: srv.Base, c: newClient(1)}
	tok, err := a.as(basicAuth("rocketskates", pw)).token(ctx, "rocketskates", 2*time.Hour)
	if err != nil {
		srv.Stop()
		return nil, err
	}
	g := &grantServer{srv: srv, admin: a.as(tok)}
	// The five roles every created user gets.
	for i := 1; i <= 5; i++ {
		body := map[string]any{"Name": fmt.Sprintf("g-role-%d", i), "Claims": grantClaims[2*(i-1) : 2*i]}
		if _, err := g.admin.do(ctx, "POST", "/api/v3/roles", body, 201, nil); err != nil {
			srv.Stop()
			return nil, err
		}
	}
	return g, nil
}

// createOp creates a new role with 10 claims, or a new user with 5 roles,
// each time.
func (g *grantServer) createOp(kind string, seq *atomic.Int64) op {
	return jsonWriteOp(g.srv.Base, g.admin.auth, seq, func(n int64, r *request) any {
		if kind == legRoleCreate {
			r.URL += "/api/v3/roles"
			return map[string]any{"Name": fmt.Sprintf("g-r-%d", n), "Claims": grantClaims}
		}
		r.URL += "/api/v3/users"
		return map[string]any{"Name": fmt.Sprintf("g-u-%d", n), "Roles": []string{"g-role-1", "g-role-2", "g-role-3", "g-role-4", "g-role-5"}}
	})
}

// runGrants measures figures 10.
func runGrants(ctx context.Context, cfg config, tmp, pub, lic string, logf func(string, ...any)) (*grantsResult, error) {
	res := &grantsResult{Baseline: cfg.Baseline != ""}
	g, err := startGrantServer(ctx, cfg, "grants", cfg.Server, filepath.Join(tmp, "grants"), pub, lic)
	if err != nil {
		return nil, err
	}
	defer g.srv.Stop()
	var seq atomic.Int64
	legs := []legSpec{
		{Name: legRoleCreate, Clients: 1, Op: g.createOp(legRoleCreate, &seq)},
		{Name: legUserCreate, Clients: 1, Op: g.createOp(legUserCreate, &seq)},
	}
	res.Notes = append(res.Notes, fmt.Sprintf("figures 10: one superuser client's back-to-back creates on a SQLite server (`%s`): roles with the same 10 claims (lists, `*`, `update:` and `action:` forms), users (no password) with the same 5 roles of 2 claims each", cfg.Server))
	if res.Baseline {
		b, err := startGrantServer(ctx, cfg, "grants-baseline", cfg.Baseline, filepath.Join(tmp, "grants-baseline"), pub, lic)
		if err != nil {
			return nil, fmt.Errorf("baseline server: %w", err)
		}
		defer b.srv.Stop()
		legs = append(legs,
			legSpec{Name: legRoleCreateBase, Clients: 1, Op: b.createOp(legRoleCreate, &seq)},
			legSpec{Name: legUserCreateBase, Clients: 1, Op: b.createOp(legUserCreate, &seq)})
		res.Notes = append(res.Notes, fmt.Sprintf("figures 10c, 10d: the same legs on `%s` (-baseline-server), running at the same time, legs alternating", cfg.Baseline))
	}
	logf("figures 10: %d rounds of %s per leg, one client", cfg.Rounds, cfg.Leg)
	if res.Legs, err = interleave(ctx, legs, cfg.Rounds, cfg.Leg, cfg.Warmup, func(s string) { logf("%s", s) }); err != nil {
		return nil, err
	}
	return res, nil
}

// grantFigures computes figures 10.
func grantFigures(r *grantsResult, skipped string) []figure {
	if r == nil {
		return skippedFigures(skipped, grantIDs...)
	}
	p50 := func(id, leg, note string) figure {
		f := spec(id)
		f.Value, f.Note = medianDuration(r.Legs[leg], func(l legResult) time.Duration { return l.P50 }), note
		return f
	}
	figs := []figure{
		p50("10a", legRoleCreate, "POST /api/v3/roles with 10 claims by the superuser, one client, median of each round's p50"),
		p50("10b", legUserCreate, "POST /api/v3/users with 5 roles by the superuser, one client, median of each round's p50"),
	}
	if !r.Baseline {
		return append(figs, skippedFigures("no -baseline-server given", "10c", "10d")...)
	}
	return append(figs,
		fromRounds("10c", p50Ratios(r.Legs[legRoleCreate], r.Legs[legRoleCreateBase]),
			"role create p50 of this build vs the -baseline-server build, round by round"),
		fromRounds("10d", p50Ratios(r.Legs[legUserCreate], r.Legs[legUserCreateBase]),
			"user create p50 of this build vs the -baseline-server build, round by round"))
}
