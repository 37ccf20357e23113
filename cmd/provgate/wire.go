package main

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/provgate/provgate/backend"
	"github.com/provgate/provgate/backend/callback"
	"github.com/provgate/provgate/backend/license"
	"github.com/provgate/provgate/backend/objects"
	"github.com/provgate/provgate/backend/pools"
	"github.com/provgate/provgate/backend/render"
	"github.com/provgate/provgate/backend/store"
	"github.com/provgate/provgate/gateway"
	"github.com/provgate/provgate/gateway/auth"
	"github.com/provgate/provgate/gateway/stream"
	"github.com/provgate/provgate/policies/opa"
)

// buildApp is the one place that assembles the concrete pieces: store,
// policy engine, services and gateway. cleanup stops background work and
// closes the store, after the listener has drained.
func buildApp(ctx context.Context, cfg Config, logger *slog.Logger, stdout io.Writer) (app *fiber.App, cleanup func(), err error) {
	var closers []func()
	closeAll := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	// A failed start releases what it opened; the named results are reset
	// by the failing return, so the deferred call uses closeAll itself.
	defer func() {
		if err != nil {
			closeAll()
		}
	}()

	st, err := store.Open(ctx, cfg.DatabaseDSN(), store.Options{Logger: logger})
	if err != nil {
		return nil, nil, err
	}
	closers = append(closers, func() { _ = st.Close() })

	// Server keys: created once, shared by every replica through the store.
	if _, err = ensureSetting(ctx, st, settingSystemSecret, auth.NewSecret); err != nil {
		return nil, nil, fmt.Errorf("system secret: %w", err)
	}
	if _, err = ensureSetting(ctx, st, settingTokenKey, randomKey); err != nil {
		return nil, nil, fmt.Errorf("token key: %w", err)
	}
	sk, err := ensureSetting(ctx, st, settingSecureKey, randomKey)
	if err != nil {
		return nil, nil, fmt.Errorf("secure param key: %w", err)
	}
	secureKey, err := base64.StdEncoding.DecodeString(sk)
	if err != nil || len(secureKey) != 32 {
		return nil, nil, errors.New("secure param key setting is corrupt")
	}

	var pub ed25519.PublicKey
	if cfg.LicensePublicKey != "" {
		if pub, err = license.LoadPublicKey(cfg.LicensePublicKey); err != nil {
			return nil, nil, err
		}
	}
	lic := &licenser{st: st, pub: pub, now: time.Now}
	if cfg.License != "" {
		doc, rerr := os.ReadFile(cfg.License)
		if rerr != nil {
			return nil, nil, fmt.Errorf("license: %w", rerr)
		}
		if _, err = lic.LoadLicense(ctx, string(doc)); err != nil {
			return nil, nil, fmt.Errorf("license %s: %s", cfg.License, backend.AsError(err).Error())
		}
	}

	var decisionLog io.Writer
	if cfg.DecisionLog != "" {
		f, ferr := os.OpenFile(cfg.DecisionLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if ferr != nil {
			return nil, nil, fmt.Errorf("decision log: %w", ferr)
		}
		closers = append(closers, func() { _ = f.Close() })
		decisionLog = f
	}
	engine, err := opa.New(ctx, opa.Options{PolicyDir: cfg.PolicyDir, Logger: logger, DecisionLog: decisionLog})
	if err != nil {
		return nil, nil, fmt.Errorf("policies: %w", err)
	}
	closers = append(closers, func() { _ = engine.Close() })

	bus := backend.NewBus()
	prf := prefs{st: st}
	// Event streams, and the relay that carries events between replicas
	// sharing a PostgreSQL database (docs/design.md §13).
	hub := stream.New(stream.Options{Bus: bus, Logger: logger, Buffer: cfg.EventBuffer, MaxPerPrincipal: cfg.EventStreams})
	closers = append(closers, hub.Close)
	var fresh *freshness
	var relay *backend.Relay
	var notify func(ctx context.Context, evs []backend.Event) error
	if st.Notifies() {
		relay = backend.NewRelay(backend.RelayOptions{Bus: bus, Send: st.Notify, Logger: logger,
			Read: func(ctx context.Context, prefix, key string) ([]byte, error) {
				rec, err := st.Get(ctx, prefix, key)
				return rec.Data, err
			},
			OnRevision: func(ctx context.Context) {
				if err := fresh.Check(ctx); err != nil {
					logger.WarnContext(ctx, "reloading authorization data", "err", err.Error())
				}
			}})
		notify = relay.Send
	}
	// The object service validates plugins with the callback service, which
	// in turn reads machines and plugins through the object service.
	var cb *callback.Service
	obj := objects.New(st, objects.Options{
		Bus: bus, Logger: logger, HashPassword: auth.HashPassword, NewSecret: auth.NewSecret, SecureKey: secureKey,
		Providers: []string{"callback"}, ValidatePlugin: func(p *backend.Plugin) []string { return cb.Configure(p) },
		OnJobChange: func(ctx context.Context, old, job *backend.Job) error { return cb.JobChanged(ctx, old, job) },
		Notify:      notify,
	})
	deps := cbDeps{st: st, o: obj}
	cb = callback.New(callback.Options{
		Logger:   logger,
		ExecDir:  cfg.CallbackExecDir,
		Info:     func() render.Info { return serverInfo(cfg) },
		Debug:    prf.debug,
		Store:    deps,
		Machines: deps,
		Plugins:  deps,

		DeliveryLease: cfg.CallbackDeliveryLease,
	})

	sec := &secrets{st: st}
	// Failed logins are counted in the store, so replicas sharing it share
	// the limits and a restart forgets none.
	authn := auth.New(sec, auth.Options{Logger: logger, MaxTTL: cfg.MaxTokenTTL, Failures: st,
		ClaimContains: func(have, want backend.Claim) bool { return engine.ClaimContains(context.Background(), have, want) }})
	sync := &policySync{st: st, engine: engine, lic: lic}
	tokens := newTokenCache(10000, time.Minute)
	// Every reload (a local change or another replica's) makes open event
	// streams authenticate again.
	fresh = &freshness{st: st, poll: st.Dialect() == "postgres", secrets: sec, tokens: tokens, policy: sync,
		onReload: hub.Recheck}

	if err = bootstrap(ctx, cfg, st, obj, stdout, logger); err != nil {
		return nil, nil, err
	}
	if err = obj.InstallBuiltins(ctx); err != nil {
		return nil, nil, err
	}
	if err = migrateSecureParams(ctx, st, obj, logger); err != nil {
		return nil, nil, err
	}
	if err = installContent(ctx, st, obj); err != nil {
		return nil, nil, err
	}
	if err = fresh.Refresh(ctx); err != nil {
		return nil, nil, fmt.Errorf("policy data: %w", err)
	}

	poolSvc := pools.New(st, pools.Options{Bus: bus, Logger: logger, Notify: notify})
	srv := gateway.New(gateway.Options{
		Logger:    logger,
		Version:   version,
		BodyLimit: int(cfg.BodyLimit),
		Deps: gateway.Deps{
			Auth:     authenticator{a: authn, cache: tokens},
			Policy:   engine,
			Resolver: resolver{o: obj},
			License:  lic,
			Objects:  obj,
			Sync:     fresh,
			Fresh:    fresh,
			Users:    &users{st: st, o: obj, authn: authn, engine: engine, secrets: sec, fresh: fresh, maxTTL: cfg.MaxTokenTTL},
			Pools:    poolsAdapter{p: poolSvc},
			Actions:  actions{st: st, o: obj, cb: cb},
			Jobs:     jobs{o: obj, authn: authn, prefs: prf, info: func() render.Info { return serverInfo(cfg) }},
			Prefs:    prf,
			Events:   events{bus: bus, relay: relay},
			Streams:  hub,
			TenantOf: sync.TenantOf,

			LoginTarpit: time.Second,
			BenchRoute:  cfg.BenchRoutes,
		},
	})

	// Background work: jobfail deliveries. A job's move to failed queues
	// them inside its own transaction (objects OnJobChange, above); nothing
	// on the bus does, since clients can post events.
	bg, stop := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{}, 1)
	go func() { defer func() { done <- struct{}{} }(); cb.RunWorker(bg, time.Second) }()
	if relay != nil {
		go relay.Run(bg)
		go func() {
			if err := st.Listen(bg, time.Second, relay.Receive, relay.Resync); err != nil {
				logger.Error("listening for other replicas' events stopped", "err", err.Error())
			}
		}()
	}
	if cfg.PolicyDir != "" {
		// A file change or SIGHUP recompiles the policy dir and runs its
		// tests first; a failing policy never replaces the working one.
		engine.WatchDir(bg, cfg.PolicyWatchInterval)
		hup := make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		go func() {
			defer signal.Stop(hup)
			for {
				select {
				case <-bg.Done():
					return
				case <-hup:
					if err := engine.Reload(bg); err != nil {
						logger.Error("policy reload refused; keeping the running policy", "error", err.Error())
					} else {
						logger.Info("policy reloaded", "dir", cfg.PolicyDir)
					}
				}
			}
		}()
	}
	closers = append(closers, func() {
		stop()
		<-done
	})
	return srv.App(), closeAll, nil
}

// serverInfo is what templates see of the endpoint.
func serverInfo(cfg Config) render.Info {
	host, port, _ := net.SplitHostPort(cfg.Listen)
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	p, _ := strconv.Atoi(port)
	scheme := "https"
	if cfg.NoTLS {
		scheme = "http"
	}
	return render.Info{Address: host, ApiPort: p, Version: version,
		ApiURL: scheme + "://" + net.JoinHostPort(host, port)}
}

// bootstrap creates the superuser role and the rocketskates user on the
// first start with an empty store (design D4). Later starts never touch
// them.
func bootstrap(ctx context.Context, cfg Config, st *store.Store, obj *objects.Service, stdout io.Writer, logger *slog.Logger) error {
	_, total, _, err := st.List(ctx, "users", backend.Query{Limit: 1})
	if err != nil {
		return err
	}
	if total > 0 {
		return nil
	}
	if _, err := st.Get(ctx, "roles", "superuser"); backend.IsCode(err, backend.ENOTFOUND) {
		role, _ := json.Marshal(backend.Role{Name: "superuser", Description: "every right",
			Claims: []backend.Claim{{Scope: "*", Action: "*", Specific: "*"}}})
		if _, err := obj.Create(ctx, "roles", role); err != nil && !backend.IsCode(err, backend.ECONFLICT) {
			return fmt.Errorf("bootstrap role superuser: %w", err)
		}
	} else if err != nil {
		return err
	}
	pw, _, err := initialAdminPassword(cfg, stdout)
	if err != nil {
		return err
	}
	user, _ := json.Marshal(map[string]any{"Name": "rocketskates", "Roles": []string{"superuser"}, "Password": pw,
		"Description": "first administrator"})
	if _, err := obj.Create(ctx, "users", user); err != nil && !backend.IsCode(err, backend.ECONFLICT) {
		return fmt.Errorf("bootstrap user rocketskates: %w", err)
	}
	logger.Info("created role superuser and user rocketskates")
	return nil
}

// migrateSecureParams re-seals, once per store, the secure params sealed
// before seals were bound to their object.
func migrateSecureParams(ctx context.Context, st *store.Store, obj *objects.Service, logger *slog.Logger) error {
	const done = "object-bound"
	if v, _, err := st.GetSetting(ctx, settingSecureSeal); err != nil {
		return err
	} else if v == done {
		return nil
	}
	n, err := obj.MigrateSecureParams(ctx)
	if err != nil {
		return fmt.Errorf("secure params: %w", err)
	}
	if n > 0 {
		logger.Info("secure params re-sealed to their objects", "count", n)
	}
	return st.SetSetting(ctx, settingSecureSeal, done)
}

// installContent adds the callback plugin's content (task, params, stage)
// when missing, so stages can call callbackDo out of the box, and brings
// the Secure flag of content params up to date (sealContentParam).
func installContent(ctx context.Context, st *store.Store, obj *objects.Service) error {
	tasks, params, stages := callback.Content()
	create := func(m backend.Model) error {
		if _, err := st.Get(ctx, m.Prefix(), m.Key()); err == nil {
			return nil
		}
		b, _ := json.Marshal(m)
		if _, err := obj.Create(ctx, m.Prefix(), b); err != nil && !backend.IsCode(err, backend.ECONFLICT) {
			return fmt.Errorf("content %s/%s: %w", m.Prefix(), m.Key(), err)
		}
		return nil
	}
	for _, p := range params {
		if err := create(p); err != nil {
			return err
		}
		if p.Secure {
			if err := sealContentParam(ctx, st, obj, p.Name); err != nil {
				return fmt.Errorf("content params/%s: %w", p.Name, err)
			}
		}
	}
	for _, t := range tasks {
		if err := create(t); err != nil {
			return err
		}
	}
	for _, s := range stages {
		if err := create(s); err != nil {
			return err
		}
	}
	return nil
}

// sealContentParam makes the content param name Secure when a data dir
// made before it was (callback/callbacks, whose header values and URLs
// carry credentials) still holds it in the clear, and seals the values
// plugins already hold: a value stored in the clear would otherwise still
// be shown to every reader. It runs on every start, so a start interrupted
// halfway finishes the work on the next.
func sealContentParam(ctx context.Context, st *store.Store, obj *objects.Service, name string) error {
	rec, err := st.Get(ctx, "params", name)
	if err != nil {
		return err
	}
	var def backend.Param
	if err := json.Unmarshal(rec.Data, &def); err != nil {
		return err
	}
	if !def.Secure {
		if _, err := obj.Patch(ctx, "params", name, []byte(`[{"op":"replace","path":"/Secure","value":true}]`), false); err != nil {
			return err
		}
	}
	recs, _, _, err := st.List(ctx, "plugins", backend.Query{Limit: -1})
	if err != nil {
		return err
	}
	for _, r := range recs {
		var p backend.Plugin
		if err := json.Unmarshal(r.Data, &p); err != nil {
			return fmt.Errorf("plugins/%s: %w", r.Key, err)
		}
		v, ok := p.Params[name]
		if !ok || isSealed(v) {
			continue
		}
		// Unchanged values are not sealed again on save, so the clear value
		// is removed and set anew, in one transaction.
		err := obj.InTx(ctx, func(ctx context.Context) error {
			if _, err := obj.DeleteParam(ctx, "plugins", p.Name, name); err != nil {
				return err
			}
			_, err := obj.SetParam(ctx, "plugins", p.Name, name, v)
			return err
		})
		if err != nil {
			return fmt.Errorf("sealing plugins/%s: %w", p.Name, err)
		}
	}
	return nil
}

// isSealed reports whether v has the shape of a sealed secure value
// (objects.SecureData: exactly Key, Nonce and Payload, all strings).
func isSealed(v any) bool {
	m, ok := v.(map[string]any)
	if !ok || len(m) != 3 {
		return false
	}
	for _, k := range []string{"Key", "Nonce", "Payload"} {
		if _, ok := m[k].(string); !ok {
			return false
		}
	}
	return true
}
