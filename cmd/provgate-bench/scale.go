package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/provgate/provgate/backend"
	"github.com/provgate/provgate/backend/store"
)

// Leg names of the scale figures (9).
const (
	legGetObject   = "get-object"
	legHealthz     = "healthz"
	legScaleTenant = "large-list-tenant"
	legScaleFree   = "large-list-unrestricted"
	legScaleBig    = "large-list-tenant-10000"
	legCbDo        = "small-callbackDo"
	legCbGet       = "small-get-machine"
	legCbDirect    = "small-direct"
	legListLarge   = "large-list-filtered"
	legListSmall   = "small-list-filtered"
	legStatusLarge = "large-pool-status"
	legStatusSmall = "small-pool-status"
	legAllocLarge  = "large-allocate-100"
	legAllocSmall  = "small-allocate-100"
	legWho         = "large-who-can"
	legMatrix      = "large-user-matrix"
	legAuthzen     = "small-authzen-evaluation"
	legAuthzenGet  = "small-authorized-get"
)

// writeKinds are the writes of figures 9a-9f, each measured on the large
// and the small server.
var writeKinds = []struct{ ID, Name string }{
	{"9a", "role-create"}, {"9b", "role-patch"},
	{"9c", "user-create"}, {"9d", "user-patch"},
	{"9e", "tenant-create"}, {"9f", "tenant-patch"},
}

// benchPool holds machines m-0...m-99 of every fixture: the pool whose
// status, and the filter whose list, figures 9l and 9m time, the same 100
// machines in a fleet of any size.
const benchPool = "bench-pool"

// fleet is the size of a fixture. BigTenant, when not 0, is how many
// machines tenant t-big holds: the last ones of the fleet, in no other
// tenant.
type fleet struct {
	Machines, Users, Roles, Tenants, BigTenant int
}

// bigTenantMachines is the size of tenant t-big where the fleet has room.
const bigTenantMachines = 10000

// withBigTenant gives f a tenant t-big of bigTenantMachines machines when
// enough machines are in no other tenant.
func (f fleet) withBigTenant() fleet {
	if f.Machines-100*f.Tenants >= bigTenantMachines {
		f.BigTenant = bigTenantMachines
	}
	return f
}

func (f fleet) String() string {
	s := fmt.Sprintf("%d machines, %d users, %d roles, %d tenants", f.Machines, f.Users, f.Roles, f.Tenants)
	if f.BigTenant > 0 {
		s += fmt.Sprintf(" and tenant t-big of %d machines", f.BigTenant)
	}
	return s
}

// scaleResult is everything measured for figures 9.
type scaleResult struct {
	Large, Small fleet
	Writes       map[string][]legResult
	Reads        map[string][]legResult
	Allocs       map[string][]legResult
	Explorer     map[string][]legResult
	// ExplorerOnly: only the explorer legs ran (-explorer-only).
	ExplorerOnly bool
	Startup      time.Duration
	Mem          memPeak
	setup
}

// buildFleet writes a fixture straight into a stopped server's database
// (its SQLite file in dataDir, or dsn) through the store, in bulk (one
// transaction per kind, machines with CreateMany): machine m-<i>
// (m-0...m-99 in benchPool, the others in the default pool), user u-<i> holding role r-<i mod roles>, role
// r-<i> (read machines, read one profile), tenant t-<i> listing users
// u-<10i>...u-<10i+9> and machines m-<100i>...m-<100i+99>, and tenant t-big
// listing the last f.BigTenant machines.
func buildFleet(ctx context.Context, dataDir, dsn string, f fleet) (uuids []string, err error) {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, err
	}
	if dsn == "" {
		dsn = filepath.Join(dataDir, "provgate.db")
	}
	st, err := store.Open(ctx, dsn, store.Options{})
	if err != nil {
		return nil, err
	}
	defer st.Close()
	put := func(ctx context.Context, m backend.Model) error {
		m.Fill()
		m.Env().SetValid(nil)
		b, err := json.Marshal(m)
		if err != nil {
			return err
		}
		_, err = st.Create(ctx, m.Prefix(), m.Key(), b)
		return err
	}
	uuids = make([]string, f.Machines)
	for i := range uuids {
		uuids[i] = fmt.Sprintf("00000000-0000-4000-8000-%012d", i)
	}
	steps := []func(ctx context.Context) error{
		func(ctx context.Context) error {
			const batch = 20000
			keys, docs := make([]string, 0, batch), make([][]byte, 0, batch)
			for i, u := range uuids {
				m := &backend.Machine{Uuid: u, Name: fmt.Sprintf("m-%d", i), Secret: randomSecret(), Runnable: true}
				if i < 100 {
					m.Pool = benchPool
				}
				m.Fill()
				m.Env().SetValid(nil)
				b, err := json.Marshal(m)
				if err != nil {
					return err
				}
				keys, docs = append(keys, m.Key()), append(docs, b)
				if len(keys) == batch || i == len(uuids)-1 {
					if err := st.CreateMany(ctx, m.Prefix(), keys, docs); err != nil {
						return err
					}
					keys, docs = keys[:0], docs[:0]
				}
			}
			return nil
		},
		func(ctx context.Context) error {
			for i := range f.Roles {
				if err := put(ctx, &backend.Role{Name: fmt.Sprintf("r-%d", i), Claims: []backend.Claim{
					{Scope: "machines", Action: "get,list", Specific: "*"},
					{Scope: "profiles", Action: "get", Specific: fmt.Sprintf("p-%d", i)},
				}}); err != nil {
					return err
				}
			}
			return nil
		},
		func(ctx context.Context) error {
			for i := range f.Users {
				if err := put(ctx, &backend.User{Name: fmt.Sprintf("u-%d", i), Roles: []string{fmt.Sprintf("r-%d", i%max(f.Roles, 1))},
					Secret: randomSecret()}); err != nil {
					return err
				}
			}
			return nil
		},
		func(ctx context.Context) error {
			for i := range f.Tenants {
				t := &backend.Tenant{Name: fmt.Sprintf("t-%d", i), Members: map[string][]string{"machines": {}}}
				for u := 10 * i; u < min(10*i+10, f.Users); u++ {
					t.Users = append(t.Users, fmt.Sprintf("u-%d", u))
				}
				for m := 100 * i; m < min(100*i+100, f.Machines); m++ {
					t.Members["machines"] = append(t.Members["machines"], uuids[m])
				}
				if err := put(ctx, t); err != nil {
					return err
				}
			}
			if f.BigTenant == 0 {
				return nil
			}
			t := &backend.Tenant{Name: "t-big", Members: map[string][]string{"machines": uuids[len(uuids)-f.BigTenant:]}}
			return put(ctx, t)
		},
	}
	for _, step := range steps {
		if err := st.InTx(ctx, step); err != nil {
			return nil, err
		}
	}
	return uuids, nil
}

// scaleServer is one server of figures 9 with its fixture.
type scaleServer struct {
	srv   *server
	admin api
	uuids []string
	// reader holds bench-reader (machines get/list): the caller of the
	// reads; tenantReader is in tenant t-0, bigReader (when the fleet has
	// t-big) in t-big.
	reader, tenantReader, bigReader string
}

// startScale starts a server on an empty data dir (its first start makes
// the admin user and built-in content) and stops it, writes the fixture
// into its database through the store, and starts it again: that second
// start is the start-up time of a server holding the fleet.
func startScale(ctx context.Context, cfg config, name, dir, dsn, pub, lic string, f fleet, logf func(string, ...any)) (*scaleServer, time.Duration, error) {
	adminPW := randomSecret()
	// The callback receiver listens on this host's loopback address,
	// which callbacks may reach only when allowed.
	args := []string{"--license-public-key", pub, "--license", lic, "--callback-allow", "127.0.0.1/32"}
	first, err := startServer(ctx, name, cfg.Server, dir, dsn, adminPW, args...)
	if err != nil {
		return nil, 0, err
	}
	first.Stop()
	t0 := time.Now()
	uuids, err := buildFleet(ctx, dir, dsn, f)
	if err != nil {
		return nil, 0, fmt.Errorf("%s fixture: %w", name, err)
	}
	logf("%s fixture (%s) written through the store in %.1f s", name, f, time.Since(t0).Seconds())
	t1 := time.Now()
	srv, err := startServer(ctx, name, cfg.Server, dir, dsn, adminPW, args...)
	if err != nil {
		return nil, 0, err
	}
	startup := time.Since(t1)
	logf("%s server restarted in %.2f s at %s", name, startup.Seconds(), srv.Base)

	s := &scaleServer{srv: srv, uuids: uuids}
	a := api{base: srv.Base, c: newClient(cfg.Clients)}
	tok, err := a.as(basicAuth("rocketskates", adminPW)).token(ctx, "rocketskates", 2*time.Hour)
	if err != nil {
		srv.Stop()
		return nil, 0, err
	}
	s.admin = a.as(tok)
	fail := func(err error) (*scaleServer, time.Duration, error) { srv.Stop(); return nil, 0, err }
	if _, err := s.admin.do(ctx, "POST", "/api/v3/roles", map[string]any{"Name": "bench-reader", "Claims": []map[string]string{
		{"scope": "machines", "action": "get,list", "specific": "*"}, {"scope": "pools", "action": "get,list", "specific": "*"}}}, 201, nil); err != nil {
		return fail(err)
	}
	pw := randomSecret()
	for _, u := range []string{"scale-reader", "scale-tenant-reader", "scale-big-reader"} {
		if _, err := s.admin.do(ctx, "POST", "/api/v3/users", map[string]any{"Name": u, "Password": pw, "Roles": []string{"bench-reader"}}, 201, nil); err != nil {
			return fail(err)
		}
	}
	if _, err := s.admin.do(ctx, "PATCH", "/api/v3/tenants/t-0",
		[]byte(`[{"op":"add","path":"/Users/-","value":"scale-tenant-reader"}]`), 200, nil); err != nil {
		return fail(err)
	}
	if f.BigTenant > 0 {
		if _, err := s.admin.do(ctx, "PATCH", "/api/v3/tenants/t-big",
			[]byte(`[{"op":"add","path":"/Users","value":["scale-big-reader"]}]`), 200, nil); err != nil {
			return fail(err)
		}
		if s.bigReader, err = a.as(basicAuth("scale-big-reader", pw)).token(ctx, "scale-big-reader", 2*time.Hour); err != nil {
			return fail(err)
		}
	}
	if s.reader, err = a.as(basicAuth("scale-reader", pw)).token(ctx, "scale-reader", 2*time.Hour); err != nil {
		return fail(err)
	}
	if s.tenantReader, err = a.as(basicAuth("scale-tenant-reader", pw)).token(ctx, "scale-tenant-reader", 2*time.Hour); err != nil {
		return fail(err)
	}
	return s, startup, nil
}

// checkTenants checks that the tenant readers see their tenants' machines.
func (s *scaleServer) checkTenants(ctx context.Context) error {
	n, err := s.admin.as(s.tenantReader).count(ctx, "/api/v3/machines")
	if err != nil {
		return err
	}
	if want := min(100, len(s.uuids)); n != want {
		return fmt.Errorf("tenant reader sees %d machines, want %d", n, want)
	}
	if s.bigReader == "" {
		return nil
	}
	if n, err = s.admin.as(s.bigReader).count(ctx, "/api/v3/machines"); err != nil {
		return err
	}
	if n != bigTenantMachines {
		return fmt.Errorf("t-big reader sees %d machines, want %d", n, bigTenantMachines)
	}
	return nil
}

// writeOp is one write of kind k on s: creates make a new object each
// time, patches change the Description of one fixture object.
func (s *scaleServer) writeOp(kind string, seq *atomic.Int64) op {
	return jsonWriteOp(s.srv.Base, s.admin.auth, seq, func(n int64, r *request) any {
		switch kind {
		case "role-create":
			r.URL += "/api/v3/roles"
			return map[string]any{"Name": fmt.Sprintf("w-r-%d", n), "Claims": []map[string]string{{"scope": "profiles", "action": "get", "specific": "*"}}}
		case "user-create":
			r.URL += "/api/v3/users"
			return map[string]any{"Name": fmt.Sprintf("w-u-%d", n), "Roles": []string{"r-1"}}
		case "tenant-create":
			r.URL += "/api/v3/tenants"
			return map[string]any{"Name": fmt.Sprintf("w-t-%d", n), "Members": map[string][]string{"machines": {s.uuids[int(n)%len(s.uuids)]}}}
		}
		target := map[string]string{"role-patch": "roles/r-1", "user-patch": "users/u-1", "tenant-patch": "tenants/t-0"}[kind]
		r.Method, r.Want, r.URL = "PATCH", 200, r.URL+"/api/v3/"+target
		return []map[string]any{{"op": "replace", "path": "/Description", "value": fmt.Sprintf("d-%d", n)}}
	})
}

// runScale measures figures 9: writes, reads, lists and pool status on a
// server holding a large fleet against one holding a small one, both
// running at once so that their legs interleave.
func runScale(ctx context.Context, cfg config, tmp, pub, lic string, logf func(string, ...any)) (*scaleResult, error) {
	res := &scaleResult{
		Large: cfg.largeFleet(),
		Small: fleet{Machines: 100, Users: 10, Roles: 10, Tenants: 1},
	}
	large, startup, err := startScale(ctx, cfg, "large", filepath.Join(tmp, "scale-large"), "", pub, lic, res.Large, logf)
	if err != nil {
		return nil, err
	}
	res.Startup = startup
	defer func() { res.Mem = large.srv.Stop() }()
	small, _, err := startScale(ctx, cfg, "small", filepath.Join(tmp, "scale-small"), "", pub, lic, res.Small, logf)
	if err != nil {
		return nil, err
	}
	defer small.srv.Stop()

	// Check what the legs claim before timing them.
	for _, s := range []*scaleServer{large, small} {
		if err := s.checkTenants(ctx); err != nil {
			return nil, err
		}
	}
	res.Notes = append(res.Notes, fmt.Sprintf("figures 9: large server %s, small server %s, each written straight into its stopped server's SQLite file through backend/store after a first start on an empty data dir; start-up is the start after that",
		res.Large, res.Small))

	if !cfg.ExplorerOnly {
		if err := runScaleLegs(ctx, cfg, res, large, small, logf); err != nil {
			return nil, err
		}
	}

	// Figures 12b-12d: the access explorer on the large fleet, AuthZEN on
	// the small server against an authorized GET of the same machine.
	get := func(s *scaleServer, path, auth string) op {
		return httpOp(newClient(cfg.Clients), request{Method: "GET", URL: s.srv.Base + path, Auth: auth, Want: 200})
	}
	who := "/api/v3/access/who?scope=machines&action=get&key=" + large.uuids[len(large.uuids)/2]
	matrix := "/api/v3/access/users/u-5"
	if _, err := large.admin.do(ctx, "GET", who, nil, 200, nil); err != nil {
		return nil, fmt.Errorf("who can: %w", err)
	}
	eval, err := json.Marshal(map[string]any{"subject": map[string]any{"type": "user", "id": "u-1"},
		"action": map[string]any{"name": "get"}, "resource": map[string]any{"type": "machines", "id": small.uuids[0]}})
	if err != nil {
		return nil, err
	}
	explorerLegs := []legSpec{
		{Name: legWho, Clients: 1, Op: get(large, who, large.admin.auth)},
		{Name: legMatrix, Clients: 1, Op: get(large, matrix, large.admin.auth)},
		{Name: legAuthzen, Clients: cfg.Clients, Op: httpOp(newClient(cfg.Clients), request{Method: "POST",
			URL: small.srv.Base + "/access/v1/evaluation", Auth: small.admin.auth, ContentType: "application/json", Body: eval, Want: 200})},
		{Name: legAuthzenGet, Clients: cfg.Clients, Op: get(small, "/api/v3/machines/"+small.uuids[0], small.admin.auth)},
	}
	logf("figures 12b-12d: %d rounds of %s per leg", cfg.Rounds, cfg.Leg)
	if res.Explorer, err = interleave(ctx, explorerLegs, cfg.Rounds, cfg.Leg, cfg.Warmup, func(s string) { logf("%s", s) }); err != nil {
		return nil, err
	}

	if cfg.ExplorerOnly {
		res.ExplorerOnly = true
		return res, nil
	}
	allocLegs := []legSpec{
		{Name: legAllocLarge, Clients: 1, Op: large.allocOp(backend.DefaultPool)},
		{Name: legAllocSmall, Clients: 1, Op: small.allocOp(benchPool)},
	}
	logf("figure 9n: %d rounds of %s per leg", cfg.Rounds, cfg.Leg)
	if res.Allocs, err = interleave(ctx, allocLegs, cfg.Rounds, cfg.Leg, cfg.Warmup, func(s string) { logf("%s", s) }); err != nil {
		return nil, err
	}
	return res, nil
}

// runScaleLegs times figures 9a-9i and 9l-9m on the two servers.
func runScaleLegs(ctx context.Context, cfg config, res *scaleResult, large, small *scaleServer, logf func(string, ...any)) (err error) {
	var seq atomic.Int64
	var writeLegs []legSpec
	for _, w := range writeKinds {
		for _, s := range []struct {
			name string
			srv  *scaleServer
		}{{"large", large}, {"small", small}} {
			writeLegs = append(writeLegs, legSpec{Name: s.name + "-" + w.Name, Clients: 1, Op: s.srv.writeOp(w.Name, &seq)})
		}
	}
	logf("figures 9a-9f: %d rounds of %s per leg, one client", cfg.Rounds, cfg.Leg)
	if res.Writes, err = interleave(ctx, writeLegs, cfg.Rounds, cfg.Leg, cfg.Warmup, func(s string) { logf("%s", s) }); err != nil {
		return err
	}

	machine := "/api/v3/machines/" + large.uuids[len(large.uuids)/2]
	filtered := "/api/v3/machines?Pool=" + benchPool + "&limit=50"
	status := "/api/v3/pools/" + benchPool + "/status"
	for _, s := range []*scaleServer{large, small} {
		h, err := s.admin.as(s.reader).do(ctx, "GET", filtered, nil, 200, nil)
		if err != nil {
			return err
		}
		if n := h.Get("X-DRP-LIST-FILTER-COUNT"); n != "100" {
			return fmt.Errorf("filtered list: X-DRP-LIST-FILTER-COUNT %q, want 100", n)
		}
		if _, err := s.admin.as(s.reader).do(ctx, "GET", status, nil, 200, nil); err != nil {
			return err
		}
	}
	rcv, err := startReceiver()
	if err != nil {
		return err
	}
	defer rcv.srv.Close()
	if _, err := small.admin.do(ctx, "POST", "/api/v3/plugins", map[string]any{
		"Name": "bench-callback", "Provider": "callback",
		"Params": map[string]any{"callback/callbacks": map[string]any{"ping": map[string]any{"Url": rcv.url}}},
	}, 201, nil); err != nil {
		return err
	}
	action := []byte(`{"callback/action":"ping"}`)
	cbPath := "/api/v3/machines/" + small.uuids[0] + "/actions/callbackDo?plugin=bench-callback"
	if _, err := small.admin.do(ctx, "POST", cbPath, action, 200, nil); err != nil {
		return fmt.Errorf("callbackDo: %w", err)
	}
	rcv.mu.Lock()
	cbBody, cbType := rcv.body, rcv.ctype
	rcv.mu.Unlock()

	get := func(s *scaleServer, path, auth string) op {
		return httpOp(newClient(cfg.Clients), request{Method: "GET", URL: s.srv.Base + path, Auth: auth, Want: 200})
	}
	readLegs := []legSpec{
		{Name: legGetObject, Clients: cfg.Clients, Op: get(large, machine, large.reader)},
		{Name: legHealthz, Clients: cfg.Clients, Op: get(large, "/healthz", "")},
		{Name: legScaleTenant, Clients: cfg.Clients, Op: get(large, "/api/v3/machines?limit=50", large.tenantReader)},
		{Name: legScaleFree, Clients: cfg.Clients, Op: get(large, "/api/v3/machines?limit=50", large.reader)},
	}
	if large.bigReader != "" {
		readLegs = append(readLegs, legSpec{Name: legScaleBig, Clients: cfg.Clients, Op: get(large, "/api/v3/machines?limit=50", large.bigReader)})
	}
	readLegs = append(readLegs, []legSpec{
		{Name: legListLarge, Clients: 1, Op: get(large, filtered, large.reader)},
		{Name: legListSmall, Clients: 1, Op: get(small, filtered, small.reader)},
		{Name: legStatusLarge, Clients: 1, Op: get(large, status, large.reader)},
		{Name: legStatusSmall, Clients: 1, Op: get(small, status, small.reader)},
		{Name: legCbDo, Clients: cfg.Clients, Op: httpOp(newClient(cfg.Clients), request{Method: "POST", URL: small.srv.Base + cbPath,
			Auth: small.admin.auth, ContentType: "application/json", Body: action, Want: 200})},
		{Name: legCbGet, Clients: cfg.Clients, Op: get(small, "/api/v3/machines/"+small.uuids[0], small.admin.auth)},
		{Name: legCbDirect, Clients: cfg.Clients, Op: httpOp(newClient(cfg.Clients), request{Method: "POST", URL: rcv.url,
			ContentType: cbType, Body: cbBody, Want: 200})},
	}...)
	logf("figures 9g-9m: %d rounds of %s per leg", cfg.Rounds, cfg.Leg)
	if res.Reads, err = interleave(ctx, readLegs, cfg.Rounds, cfg.Leg, cfg.Warmup, func(s string) { logf("%s", s) }); err != nil {
		return err
	}

	return nil
}

// allocOp allocates 100 machines of pool and releases exactly those, both
// timed: one allocation's round trip.
func (s *scaleServer) allocOp(pool string) op {
	c := newClient(1)
	base := s.srv.Base + "/api/v3/pools/" + pool
	return func(ctx context.Context, _, _ int) error {
		var out []byte
		if err := send(ctx, c, request{Method: "POST", URL: base + "/allocateMachines", Auth: s.admin.auth,
			ContentType: "application/json", Body: []byte(`{"pool/count":100}`), Want: 200}, &out); err != nil {
			return err
		}
		var got []struct{ Uuid string }
		if err := json.Unmarshal(out, &got); err != nil {
			return err
		}
		if len(got) != 100 {
			return fmt.Errorf("allocateMachines gave %d machines, want 100", len(got))
		}
		list := make([]string, len(got))
		for i, m := range got {
			list[i] = m.Uuid
		}
		body, err := json.Marshal(map[string]any{"pool/machine-list": list})
		if err != nil {
			return err
		}
		return send(ctx, c, request{Method: "POST", URL: base + "/releaseMachines", Auth: s.admin.auth,
			ContentType: "application/json", Body: body, Want: 200}, nil)
	}
}

var scaleIDs = []string{"9a", "9b", "9c", "9d", "9e", "9f", "9g", "9h", "9o", "9i", "9j", "9k", "9l", "9m", "9n", "12b", "12c", "12d"}

// bigTenantFigure is figure id: the list of t-big's reader against the
// unrestricted one, skipped when the fleet has no room for t-big.
func bigTenantFigure(id string, f fleet, big, free []legResult) figure {
	if f.BigTenant == 0 {
		return skippedFigures(fmt.Sprintf("the large fleet has fewer than %d machines in no tenant", bigTenantMachines), id)[0]
	}
	return fromRounds(id, costRatios(big, free),
		fmt.Sprintf("GET /api/v3/machines?limit=50 on the large server by a user of tenant t-big (%d visible machines) vs a user in no tenant", f.BigTenant))
}

// p50Ratios is, per round, the p50 latency of a over that of b.
func p50Ratios(a, b []legResult) []float64 {
	out := make([]float64, 0, len(a))
	for i := range a {
		if i < len(b) {
			out = append(out, ratio(float64(a[i].P50), float64(b[i].P50)))
		}
	}
	return out
}

// p50Of is figure id: the median over rounds of each leg's p50, in ms.
func p50Of(id string, legs []legResult, note string) figure {
	f := spec(id)
	rounds := make([]float64, 0, len(legs))
	for _, l := range legs {
		rounds = append(rounds, ms(l.P50))
	}
	f.Value, f.Rounds, f.Note = median(rounds), rounds, note
	return f
}

// scaleFigures computes figures 9.
func scaleFigures(r *scaleResult, skipped string) []figure {
	if r == nil {
		return skippedFigures(skipped, scaleIDs...)
	}
	if r.ExplorerOnly {
		return append(skippedFigures("-explorer-only", scaleIDs[:len(scaleIDs)-3]...), explorerFigures(r)...)
	}
	var figs []figure
	for _, w := range writeKinds {
		figs = append(figs, fromRounds(w.ID, p50Ratios(r.Writes["large-"+w.Name], r.Writes["small-"+w.Name]),
			fmt.Sprintf("one admin client's back-to-back %ss (creates: a new object each; patches: the Description of one fixture object), p50 on the large server vs the small one", w.Name)))
	}
	rd := r.Reads
	// Figure 9i: callbackDo's own cost, the gateway request around it
	// taken out, against the bare call it makes.
	var cb []float64
	for i := range rd[legCbDo] {
		if i >= len(rd[legCbGet]) || i >= len(rd[legCbDirect]) {
			break
		}
		per := func(l legResult) float64 { return ratio(1, l.Throughput()) }
		cb = append(cb, ratio(per(rd[legCbDo][i])-per(rd[legCbGet][i]), per(rd[legCbDirect][i])))
	}
	start := spec("9j")
	start.Value, start.Note = r.Startup.Seconds(), "from exec to listening of the large server's start after its fixture was written (schema check, policy data of every role and tenant loaded)"
	mem := spec("9k")
	mem.Value = float64(r.Mem.HWMKiB) / 1024
	mem.Note = fmt.Sprintf("VmHWM of the large server over its whole run; largest sampled VmRSS %.1f MiB", float64(r.Mem.MaxRSSKiB)/1024)
	figs = append(figs,
		fromRounds("9g", throughputRatios(rd[legGetObject], rd[legHealthz]),
			"GET /api/v3/machines/<uuid> by a non-superuser Bearer on the large server vs GET /healthz, both with the configured clients"),
		fromRounds("9h", costRatios(rd[legScaleTenant], rd[legScaleFree]),
			"GET /api/v3/machines?limit=50 on the large server by a user of tenant t-0 (100 visible machines) vs a user in no tenant"),
		bigTenantFigure("9o", r.Large, rd[legScaleBig], rd[legScaleFree]),
		fromRounds("9i", cb,
			"(time per callbackDo − time per authorized GET of the same machine) / time per direct POST of the same body to the same receiver, small server"),
		start, mem,
		fromRounds("9l", p50Ratios(rd[legListLarge], rd[legListSmall]),
			"GET /api/v3/machines?Pool=bench-pool&limit=50 (the same 100 machines match in both fleets; answered with X-DRP-LIST-FILTER-COUNT 100), one client, p50 large vs small"),
		fromRounds("9m", p50Ratios(rd[legStatusLarge], rd[legStatusSmall]),
			"GET /api/v3/pools/bench-pool/status (the same 100 machines in both fleets, the rest of the large one in the default pool), one client, p50 large vs small"),
		fromRounds("9n", p50Ratios(r.Allocs[legAllocLarge], r.Allocs[legAllocSmall]),
			"allocateMachines {pool/count: 100} and releaseMachines of those 100, one client, p50: from the large fleet's default pool (all but 100 of its machines Free) vs the small fleet's 100-machine pool"),
	)
	return append(figs, explorerFigures(r)...)
}

// explorerFigures computes figures 12b-12d.
func explorerFigures(r *scaleResult) []figure {
	return []figure{
		p50Of("12b", r.Explorer[legWho], fmt.Sprintf("GET /api/v3/access/who?scope=machines&action=get&key=<uuid> as the admin on the large server (%d users; users provably alike decided once, Engine.Questions), one client, median of the rounds' p50", r.Large.Users)),
		p50Of("12c", r.Explorer[legMatrix], "GET /api/v3/access/users/u-5 as the admin on the large server (every scope and action decided), one client, median of the rounds' p50"),
		fromRounds("12d", throughputRatios(r.Explorer[legAuthzen], r.Explorer[legAuthzenGet]),
			"POST /access/v1/evaluation (admin asks whether u-1 may get a machine) vs GET /api/v3/machines/<uuid> as the admin, small server, the configured clients"),
	}
}
