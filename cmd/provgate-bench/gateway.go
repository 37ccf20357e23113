package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Leg names, as they appear in the raw tables.
const (
	legBenchRoute = "bench-route"
	legBearer     = "bearer"
	legBasic      = "basic"
	legAttacked   = "bearer+wrong-basic"
	legListTenant = "list-tenant"
	legListAll    = "list-unrestricted"
	legGetOne     = "get-one-machine"
	legListSlim   = "list-slim-params"
	legListFilter = "list-filtered"
	legCallback   = "callbackDo"
	legDirect     = "direct"
)

// gatewayResult is everything measured on the SQLite server.
type gatewayResult struct {
	Auth     map[string][]legResult // figures 1, 2, 7
	List     map[string][]legResult // figures 4, 13
	Callback map[string][]legResult // figure 6
	Mem      memPeak
	setup
}

func randomSecret() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// runGateway starts the SQLite server, loads the data set through the API
// as the admin, and runs the interleaved legs of figures 1, 2, 4 and 6.
func runGateway(ctx context.Context, cfg config, tmp, pub, lic string, logf func(string, ...any)) (*gatewayResult, error) {
	return runGatewayOn(ctx, cfg, "sqlite", nil, tmp, pub, lic, logf)
}

// runGatewayProcs is runGateway on a second SQLite server run with
// GOMAXPROCS=procs (figure 7k): the same data set and legs, so that only
// the runtime's core count differs from figure 7i's server.
func runGatewayProcs(procs int) func(context.Context, config, string, string, string, func(string, ...any)) (*gatewayResult, error) {
	return func(ctx context.Context, cfg config, tmp, pub, lic string, logf func(string, ...any)) (*gatewayResult, error) {
		name := fmt.Sprintf("sqlite-procs%d", procs)
		return runGatewayOn(ctx, cfg, name, []string{fmt.Sprintf("GOMAXPROCS=%d", procs)}, tmp, pub, lic, logf)
	}
}

// runGatewayOn is runGateway with the server named name (its data dir
// under tmp) and env added to its environment.
func runGatewayOn(ctx context.Context, cfg config, name string, env []string, tmp, pub, lic string, logf func(string, ...any)) (*gatewayResult, error) {
	adminPW := randomSecret()
	// The callback receiver (figure 6) listens on this host's loopback
	// address, which callbacks may reach only when allowed.
	srv, err := startServerEnv(ctx, env, name, cfg.Server, tmp+"/"+name, "", adminPW, "--license-public-key", pub, "--license", lic,
		"--callback-allow", "127.0.0.1/32")
	if err != nil {
		return nil, err
	}
	res := &gatewayResult{}
	defer func() { res.Mem = srv.Stop() }()
	logf("%s server at %s (log %s)", name, srv.Base, srv.LogPath)

	setupClient := newClient(cfg.Clients)
	a := api{base: srv.Base, c: setupClient}
	adminTok, err := a.as(basicAuth("rocketskates", adminPW)).token(ctx, "rocketskates", 2*time.Hour)
	if err != nil {
		return nil, err
	}
	admin := a.as(adminTok)

	// A non-superuser role: reading pools and machines is all the measured
	// users may do.
	if _, err := admin.do(ctx, "POST", "/api/v3/roles", map[string]any{"Name": "bench-reader", "Claims": []map[string]string{
		{"scope": "pools", "action": "get,list", "specific": "*"},
		{"scope": "machines", "action": "get,list", "specific": "*"},
	}}, 201, nil); err != nil {
		return nil, err
	}
	tenantPW, freePW := randomSecret(), randomSecret()
	for _, u := range []struct{ name, pw string }{{"bench-tenant-user", tenantPW}, {"bench-free-user", freePW}} {
		if _, err := admin.do(ctx, "POST", "/api/v3/users", map[string]any{"Name": u.name, "Password": u.pw, "Roles": []string{"bench-reader"}}, 201, nil); err != nil {
			return nil, err
		}
	}
	if _, err := admin.do(ctx, "POST", "/api/v3/pools", map[string]any{"Id": "bench"}, 201, nil); err != nil {
		return nil, err
	}

	t0 := time.Now()
	uuids, err := admin.createMachines(ctx, "bench", cfg.Machines, cfg.Clients)
	if err != nil {
		return nil, fmt.Errorf("create machines: %w", err)
	}
	took := time.Since(t0)
	res.Notes = append(res.Notes, fmt.Sprintf("created %d machines through the API with %d concurrent POSTs in %.1f s (%.0f/s)",
		cfg.Machines, cfg.Clients, took.Seconds(), float64(cfg.Machines)/took.Seconds()))
	logf("created %d machines in %.1f s", cfg.Machines, took.Seconds())

	// The tenant makes tenant rules active for the measured user: pools and
	// machines are both restricted, to the bench pool and 1% of machines.
	visible := max(1, cfg.Machines/100)
	if _, err := admin.do(ctx, "POST", "/api/v3/tenants", map[string]any{
		"Name":    "bench-tenant",
		"Members": map[string][]string{"pools": {"bench"}, "machines": uuids[:visible]},
		"Users":   []string{"bench-tenant-user"},
	}, 201, nil); err != nil {
		return nil, err
	}
	tenantBasic := basicAuth("bench-tenant-user", tenantPW)
	tenantTok, err := a.as(tenantBasic).token(ctx, "bench-tenant-user", 2*time.Hour)
	if err != nil {
		return nil, err
	}
	freeTok, err := a.as(basicAuth("bench-free-user", freePW)).token(ctx, "bench-free-user", 2*time.Hour)
	if err != nil {
		return nil, err
	}

	// Check that each leg measures what it claims before timing it.
	if _, err := a.as(tenantTok).do(ctx, "GET", "/api/v3/pools/default", nil, 404, nil); err != nil {
		return nil, fmt.Errorf("tenant rules are not active: %w", err)
	}
	for _, c := range []struct {
		auth string
		want int
	}{{tenantTok, visible}, {freeTok, cfg.Machines}} {
		n, err := a.as(c.auth).count(ctx, "/api/v3/machines")
		if err != nil {
			return nil, err
		}
		if n != c.want {
			return nil, fmt.Errorf("list count %d, want %d", n, c.want)
		}
	}
	// limit=50 as the issue states; smaller only when -machines leaves the
	// tenant fewer than 50, so that both legs still return as many rows.
	limit := min(50, visible)
	list := fmt.Sprintf("/api/v3/machines?limit=%d", limit)
	for _, auth := range []string{tenantTok, freeTok} {
		var rows []map[string]any
		if _, err := a.as(auth).do(ctx, "GET", list, nil, 200, &rows); err != nil {
			return nil, err
		}
		if len(rows) != limit {
			return nil, fmt.Errorf("list returned %d rows, want %d", len(rows), limit)
		}
	}
	res.Notes = append(res.Notes, fmt.Sprintf("tenant user sees %d of %d machines; both list legs (GET %s) return %d rows",
		visible, cfg.Machines, list, limit))

	if !cfg.ListOnly && cfg.wants("1", "2", "7") {
		if err := runAuthLegs(ctx, cfg, res, srv, tenantTok, tenantBasic, logf); err != nil {
			return nil, err
		}
	}

	listLegs := []legSpec{
		{Name: legListTenant, Clients: cfg.Clients, Op: httpOp(newClient(cfg.Clients), request{Method: "GET", URL: srv.Base + list, Auth: tenantTok, Want: 200})},
		{Name: legListAll, Clients: cfg.Clients, Op: httpOp(newClient(cfg.Clients), request{Method: "GET", URL: srv.Base + list, Auth: freeTok, Want: 200})},
		{Name: legGetOne, Clients: cfg.Clients, Op: httpOp(newClient(cfg.Clients), request{Method: "GET", URL: srv.Base + "/api/v3/machines/" + uuids[0], Auth: freeTok, Want: 200})},
		{Name: legListSlim, Clients: cfg.Clients, Op: httpOp(newClient(cfg.Clients), request{Method: "GET", URL: srv.Base + list + "&slim=Params", Auth: freeTok, Want: 200})},
		{Name: legListFilter, Clients: cfg.Clients, Op: httpOp(newClient(cfg.Clients), request{Method: "GET", URL: srv.Base + list + "&Pool=bench", Auth: freeTok, Want: 200})},
	}
	if cfg.wants("4", "13") {
		logf("figures 4, 13: %d rounds of %s per leg", cfg.Rounds, cfg.Leg)
		if res.List, err = interleave(ctx, listLegs, cfg.Rounds, cfg.Leg, cfg.Warmup, func(s string) { logf("%s", s) }); err != nil {
			return nil, err
		}
	}

	if !cfg.ListOnly && cfg.wants("6") {
		if res.Callback, err = runCallback(ctx, cfg, admin, uuids[0], &res.Notes, logf); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// runAuthLegs times figures 1 and 2.
func runAuthLegs(ctx context.Context, cfg config, res *gatewayResult, srv *server, tenantTok, tenantBasic string, logf func(string, ...any)) (err error) {
	pool := srv.Base + "/api/v3/pools/bench"
	var seen refusals
	authLegs := []legSpec{
		{Name: legBenchRoute, Clients: cfg.Clients, Op: httpOp(newClient(cfg.Clients), request{Method: "GET", URL: srv.Base + "/bench/pools/bench", Want: 200})},
		{Name: legBearer, Clients: cfg.Clients, Op: httpOp(newClient(cfg.Clients), request{Method: "GET", URL: pool, Auth: tenantTok, Want: 200})},
		{Name: legBasic, Clients: cfg.Clients, Op: httpOp(newClient(cfg.Clients), request{Method: "GET", URL: pool, Auth: tenantBasic, Want: 200})},
		{Name: legAttacked, Clients: cfg.Clients, Op: httpOp(newClient(cfg.Clients), request{Method: "GET", URL: pool, Auth: tenantTok, Want: 200}),
			Background: &legSpec{Name: "wrong-basic", Clients: cfg.Attackers, Op: wrongBasicOp(newClient(cfg.Attackers), pool, &seen)}},
	}
	logf("figures 1, 2: %d rounds of %s per leg, %d clients", cfg.Rounds, cfg.Leg, cfg.Clients)
	if res.Auth, err = interleave(ctx, authLegs, cfg.Rounds, cfg.Leg, cfg.Warmup, func(s string) { logf("%s", s) }); err != nil {
		return err
	}
	res.Notes = append(res.Notes, fmt.Sprintf("figure 2b: the %d wrong-password clients (one client IP, 127.0.0.1) were answered: %s",
		cfg.Attackers, seen.String()))
	return nil
}

// refusals counts the answers to wrong passwords by status: 403 ran scrypt,
// 429 was refused by the failed-login limit without it, 503 found no free
// scrypt slot.
type refusals struct {
	forbidden, limited, unavailable atomic.Int64
}

func (r *refusals) String() string {
	return fmt.Sprintf("403 (password checked) %d, 429 (failed-login limit, no scrypt) %d, 503 (no free scrypt slot) %d",
		r.forbidden.Load(), r.limited.Load(), r.unavailable.Load())
}

// wrongBasicOp sends Basic credentials of an existing user with a password
// that is different every time, as a guessing attacker would: none can hit
// the credential cache. Every refusal the server may give counts as done.
func wrongBasicOp(c *http.Client, url string, seen *refusals) op {
	return func(ctx context.Context, w, i int) error {
		req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", basicAuth("bench-tenant-user", fmt.Sprintf("wrong-%d-%d", w, i)))
		res, err := c.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		switch res.StatusCode {
		case http.StatusForbidden:
			seen.forbidden.Add(1)
		case http.StatusTooManyRequests:
			seen.limited.Add(1)
		case http.StatusServiceUnavailable:
			seen.unavailable.Add(1)
		default:
			return fmt.Errorf("wrong password: status %d", res.StatusCode)
		}
		return nil
	}
}

// receiver is the loopback endpoint of figure 6. It keeps the first body
// it receives so the direct leg can send exactly what callbackDo sent.
type receiver struct {
	srv   *http.Server
	url   string
	hits  atomic.Int64
	conns atomic.Int64 // connections opened: keep-alive reuse shows as few
	mu    sync.Mutex
	body  []byte
	ctype string
}

func startReceiver() (*receiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &receiver{url: "http://" + ln.Addr().String() + "/hook"}
	r.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.hits.Add(1)
		r.mu.Lock()
		if r.body == nil {
			r.body, r.ctype = b, req.Header.Get("Content-Type")
		}
		r.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true}`))
	}), ReadHeaderTimeout: 10 * time.Second,
		ConnState: func(_ net.Conn, st http.ConnState) {
			if st == http.StateNew {
				r.conns.Add(1)
			}
		}}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

// runCallback measures callbackDo against a direct net/http POST of the
// same body to the same receiver, at the same concurrency.
func runCallback(ctx context.Context, cfg config, admin api, machine string, notes *[]string, logf func(string, ...any)) (map[string][]legResult, error) {
	rcv, err := startReceiver()
	if err != nil {
		return nil, err
	}
	defer rcv.srv.Close()
	if _, err := admin.do(ctx, "POST", "/api/v3/plugins", map[string]any{
		"Name": "bench-callback", "Provider": "callback",
		"Params": map[string]any{"callback/callbacks": map[string]any{"ping": map[string]any{"Url": rcv.url}}},
	}, 201, nil); err != nil {
		return nil, err
	}
	action := []byte(`{"callback/action":"ping"}`)
	path := "/api/v3/machines/" + machine + "/actions/callbackDo?plugin=bench-callback"
	if _, err := admin.do(ctx, "POST", path, action, 200, nil); err != nil {
		return nil, fmt.Errorf("callbackDo: %w", err)
	}
	if rcv.hits.Load() != 1 {
		return nil, fmt.Errorf("receiver got %d requests after one callbackDo, want 1", rcv.hits.Load())
	}
	rcv.mu.Lock()
	body, ctype := rcv.body, rcv.ctype
	rcv.mu.Unlock()
	logf("figure 6: callbackDo body is %d bytes (%s); %d rounds of %s per leg", len(body), ctype, cfg.Rounds, cfg.Leg)
	legs := []legSpec{
		{Name: legCallback, Clients: cfg.Clients, Op: httpOp(newClient(cfg.Clients), request{Method: "POST", URL: admin.base + path,
			Auth: admin.auth, ContentType: "application/json", Body: action, Want: 200})},
		{Name: legDirect, Clients: cfg.Clients, Op: httpOp(newClient(cfg.Clients), request{Method: "POST", URL: rcv.url,
			ContentType: ctype, Body: body, Want: 200})},
	}
	hits0, conns0 := rcv.hits.Load(), rcv.conns.Load()
	out, err := interleave(ctx, legs, cfg.Rounds, cfg.Leg, cfg.Warmup, func(s string) { logf("%s", s) })
	if err != nil {
		return nil, err
	}
	*notes = append(*notes, fmt.Sprintf("figure 6: the receiver got %d requests over %d new connections (both legs, %d clients each); callbackDo sends a %d-byte %s body",
		rcv.hits.Load()-hits0, rcv.conns.Load()-conns0, cfg.Clients, len(body), ctype))
	return out, nil
}
