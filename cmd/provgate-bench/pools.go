package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

const (
	legAlloc1 = "alloc-1-caller"
	legAllocN = "alloc-8-callers"
)

// poolResult is figure 5, measured on a PostgreSQL server.
type poolResult struct {
	Legs       map[string][]legResult
	Allocated  int // allocations checked over all legs (warm-up included)
	Duplicates int // a machine handed out twice between two releases
	Lost       int // allocations the store does not show as InUse
	Mem        memPeak
	setup
}

// freshSchema creates a schema of its own in the database of dsn and
// returns a DSN selecting it, and a function that drops it.
func freshSchema(ctx context.Context, dsn string) (string, func(), error) {
	u, err := url.Parse(dsn)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", nil, fmt.Errorf("PROVGATE_TEST_DATABASE must be a postgres:// URL")
	}
	db, err := gorm.Open(postgres.Open(dsn), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		return "", nil, fmt.Errorf("postgres: %w", err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		return "", nil, err
	}
	schema := "bench_" + randomSecret()[:12]
	if err := db.WithContext(ctx).Exec("CREATE SCHEMA " + schema).Error; err != nil {
		_ = sqlDB.Close()
		return "", nil, fmt.Errorf("create schema: %w", err)
	}
	drop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = db.WithContext(ctx).Exec("DROP SCHEMA IF EXISTS " + schema + " CASCADE").Error
		_ = sqlDB.Close()
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String(), drop, nil
}

// allocTracker sees every machine handed out between two releases.
type allocTracker struct {
	mu    sync.Mutex
	seen  map[string]bool
	total int
	dups  int
}

func (t *allocTracker) add(uuid string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.total++
	if t.seen[uuid] {
		t.dups++
	}
	t.seen[uuid] = true
}

// runPools starts a server on a fresh PostgreSQL schema, puts cfg.PoolMachines
// machines in a pool and runs interleaved legs of 1 and 8 concurrent
// allocateMachines callers, releasing every machine before each leg.
func runPools(ctx context.Context, cfg config, tmp, pub, lic string, logf func(string, ...any)) (*poolResult, error) {
	dsn, drop, err := freshSchema(ctx, cfg.Postgres)
	if err != nil {
		return nil, err
	}
	defer drop()
	adminPW := randomSecret()
	srv, err := startServer(ctx, "postgres", cfg.Server, tmp+"/postgres", dsn, adminPW, "--license-public-key", pub, "--license", lic)
	if err != nil {
		return nil, err
	}
	res := &poolResult{}
	defer func() { res.Mem = srv.Stop() }()
	logf("postgres server at %s (log %s)", srv.Base, srv.LogPath)

	a := api{base: srv.Base, c: newClient(cfg.AllocCallers)}
	tok, err := a.as(basicAuth("rocketskates", adminPW)).token(ctx, "rocketskates", 2*time.Hour)
	if err != nil {
		return nil, err
	}
	admin := a.as(tok)
	if _, err := admin.do(ctx, "POST", "/api/v3/pools", map[string]any{"Id": "alloc"}, 201, nil); err != nil {
		return nil, err
	}
	t0 := time.Now()
	if _, err := admin.createMachines(ctx, "alloc", cfg.PoolMachines, cfg.AllocCallers); err != nil {
		return nil, fmt.Errorf("create machines: %w", err)
	}
	if _, err := admin.do(ctx, "POST", "/api/v3/pools/alloc/addMachines", map[string]any{"pool/count": cfg.PoolMachines}, 200, nil); err != nil {
		return nil, err
	}
	res.Notes = append(res.Notes, fmt.Sprintf("pool of %d machines on PostgreSQL, set up in %.1f s; every leg starts with all of them Free",
		cfg.PoolMachines, time.Since(t0).Seconds()))

	inUse := "/api/v3/machines?Pool=alloc&PoolStatus=InUse"
	free := "/api/v3/machines?Pool=alloc&PoolStatus=Free"
	tr := &allocTracker{seen: map[string]bool{}}
	// check compares what the callers were given with what the store holds:
	// every machine handed out must be InUse, exactly once.
	check := func(ctx context.Context) error {
		n, err := admin.count(ctx, inUse)
		if err != nil {
			return err
		}
		tr.mu.Lock()
		defer tr.mu.Unlock()
		res.Allocated += tr.total
		res.Duplicates += tr.dups
		if unique := len(tr.seen); n < unique {
			res.Lost += unique - n
		}
		return nil
	}
	prepare := func(ctx context.Context) error {
		if err := check(ctx); err != nil {
			return err
		}
		if _, err := admin.do(ctx, "POST", "/api/v3/pools/alloc/releaseMachines", map[string]any{"pool/all-machines": true}, 200, nil); err != nil {
			return err
		}
		n, err := admin.count(ctx, free)
		if err != nil {
			return err
		}
		if n != cfg.PoolMachines {
			return fmt.Errorf("%d Free machines after release, want %d", n, cfg.PoolMachines)
		}
		tr.mu.Lock()
		tr.seen, tr.total, tr.dups = map[string]bool{}, 0, 0
		tr.mu.Unlock()
		return nil
	}
	c := newClient(cfg.AllocCallers)
	allocate := allocOp(c, srv.Base+"/api/v3/pools/alloc/allocateMachines", admin.auth, tr)
	legs := []legSpec{
		{Name: legAlloc1, Clients: 1, Op: allocate, Prepare: prepare},
		{Name: legAllocN, Clients: cfg.AllocCallers, Op: allocate, Prepare: prepare},
	}
	logf("figure 5: %d rounds of %s per leg", cfg.Rounds, cfg.Leg)
	if res.Legs, err = interleave(ctx, legs, cfg.Rounds, cfg.Leg, cfg.Warmup, func(s string) { logf("%s", s) }); err != nil {
		return nil, err
	}
	if err := check(ctx); err != nil {
		return nil, err
	}
	return res, nil
}

// allocOp allocates one machine per request. A 409 (no Free machine left)
// ends that caller's leg; a leg that empties the pool is timed until then.
func allocOp(c *http.Client, url, auth string, tr *allocTracker) op {
	body := []byte(`{"pool/count":1}`)
	return func(ctx context.Context, _, _ int) error {
		var out []byte
		err := send(ctx, c, request{Method: "POST", URL: url, Auth: auth, ContentType: "application/json", Body: body, Want: 200}, &out)
		if err != nil {
			if len(out) > 0 && json.Valid(out) && isConflict(out) {
				return errExhausted
			}
			return err
		}
		var got []struct {
			Uuid      string
			Allocated bool
			Status    string
		}
		if err := json.Unmarshal(out, &got); err != nil {
			return err
		}
		if len(got) != 1 || !got[0].Allocated || got[0].Status != "InUse" {
			return fmt.Errorf("allocateMachines returned %s", truncate(out, 200))
		}
		tr.add(got[0].Uuid)
		return nil
	}
}

func isConflict(b []byte) bool {
	var e struct{ Code int }
	return json.Unmarshal(b, &e) == nil && e.Code == http.StatusConflict
}
