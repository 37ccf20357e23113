package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/provgate/provgate/backend"
	"github.com/provgate/provgate/backend/callback"
	"github.com/provgate/provgate/backend/eventbus"
	"github.com/provgate/provgate/backend/license"
	"github.com/provgate/provgate/backend/objects"
	"github.com/provgate/provgate/backend/pools"
	"github.com/provgate/provgate/backend/prefs"
	"github.com/provgate/provgate/backend/render"
	"github.com/provgate/provgate/backend/store"
	"github.com/provgate/provgate/gateway"
	"github.com/provgate/provgate/gateway/auth"
	"github.com/provgate/provgate/gateway/claims"
	"github.com/provgate/provgate/gateway/stream"
	"github.com/provgate/provgate/policies/opa"
	"github.com/provgate/provgate/policies/policydata"
)

// Bounds of the verified-token cache (auth.TokenCache).
const (
	tokenCacheSize = 10000
	tokenCacheTTL  = time.Minute
)

// buildApp is the one place that assembles the concrete pieces: store,
// policy engine, services and gateway (docs/design.md §1.3). cleanup stops
// background work and closes the store, after the listener has drained.
func buildApp(ctx context.Context, cfg Config, h hooks, logger *slog.Logger, stdout io.Writer) (srv *gateway.Server, cleanup func(), err error) {
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

	// The one kind and scope catalog every package reads (docs/design.md
	// §1.4).
	kinds := backend.NewCatalog()
	st, err := store.Open(ctx, cfg.DatabaseDSN(), store.Options{Logger: logger, Kinds: kinds, MaxOpenConns: cfg.DatabaseConns})
	if err != nil {
		return nil, nil, err
	}
	closers = append(closers, func() { _ = st.Close() })
	if err = auth.EnsureKeys(ctx, st); err != nil {
		return nil, nil, err
	}
	secureKey, err := objects.SecureKey(ctx, st)
	if err != nil {
		return nil, nil, err
	}

	lic, err := newLicenseHolder(ctx, cfg, st)
	if err != nil {
		return nil, nil, err
	}
	engine, closeEngine, reopenLog, err := newEngine(ctx, cfg, h, logger, st)
	if err != nil {
		return nil, nil, err
	}
	closers = append(closers, closeEngine)

	bus := eventbus.NewBus(kinds)
	prf := prefs.New(st)
	info := func() render.Info { return serverInfo(cfg) }
	// Event streams, and the relay that carries events between replicas
	// sharing a PostgreSQL database (docs/design.md §13).
	hub := stream.New(stream.Options{Bus: bus, Logger: logger, Buffer: cfg.EventBuffer, MaxPerPrincipal: cfg.EventStreams,
		FlushInterval: flushInterval(cfg.EventFlush), WriteTimeout: h.streamWriteTimeout})
	closers = append(closers, hub.Close)
	var fresh *policydata.Freshness
	var relay *eventbus.Relay
	var notify func(ctx context.Context, evs []backend.Event) error
	var events gateway.Events = bus
	if st.Notifies() {
		relay = eventbus.NewRelay(eventbus.RelayOptions{Bus: bus, Send: st.Notify, Logger: logger,
			Read: func(ctx context.Context, prefix, key string) ([]byte, error) {
				rec, err := st.Get(ctx, prefix, key)
				return rec.Data, err
			},
			OnRevision: func(ctx context.Context) {
				if err := fresh.Check(ctx); err != nil {
					logger.WarnContext(ctx, "reloading authorization data", "err", err.Error())
				}
			}})
		notify, events = relay.Send, relay
	}
	// The object service validates plugins with the callback service, which
	// in turn reads machines and plugins through the object service.
	var cb *callback.Service
	hashPassword := h.hashPassword()
	obj := objects.New(st, objects.Options{
		Kinds: kinds, Bus: bus, Logger: logger, HashPassword: hashPassword, NewSecret: auth.NewSecret, SecureKey: secureKey,
		Providers: []string{callback.ProviderName}, ValidatePlugin: func(p *backend.Plugin) []string { return cb.Configure(p) },
		PluginGrants: callback.Grants,
		OnJobChange:  func(ctx context.Context, old, job *backend.Job) error { return cb.JobChanged(ctx, old, job) },
		Notify:       notify, ViewCacheSize: viewCacheSize(cfg.ObjectCacheSize),
	})
	cb = callback.New(callback.Options{Logger: logger, ExecDir: cfg.CallbackExecDir, Info: info, Debug: prf.Debug,
		Store: st, Objects: obj.Objects, Params: obj.Params, DeliveryLease: cfg.CallbackDeliveryLease,
		StopGrace: cfg.ShutdownTimeout, Destinations: cfg.callbackDestinations()})

	secrets := auth.NewSecretCache(st)
	// Failed logins are counted in the store, so replicas sharing it share
	// the limits and a restart forgets none.
	authn := auth.New(secrets, auth.Options{Logger: logger, MaxTTL: cfg.MaxTokenTTL, Failures: st, Now: h.now, ScryptN: h.scryptN,
		ScryptConcurrency: cfg.ScryptConcurrency,
		ClaimContains:     func(have, want backend.Claim) bool { return engine.ClaimContains(context.Background(), have, want) }})
	tokens := auth.NewTokenCache(authn, tokenCacheSize, tokenCacheTTL)
	policy := policydata.NewSync(st, lic, engine, kinds)
	fresh = policydata.NewFreshness(st, st.Dialect() == "postgres", policy, secrets, tokens)
	// Every reload (a local change or another replica's) makes open event
	// streams authenticate again.
	fresh.OnReload(hub.Recheck)

	created, err := obj.Accounts.Bootstrap(ctx, func() (string, error) {
		pw, _, err := initialAdminPassword(cfg, stdout)
		return pw, err
	})
	if err != nil {
		return nil, nil, err
	}
	if !created && cfg.AdminPassword != "" {
		warnAdminPasswordIgnored(ctx, cfg.AdminPassword, obj.Accounts, logger)
	}
	if err = obj.Objects.InstallBuiltins(ctx); err != nil {
		return nil, nil, err
	}
	if err = obj.Params.MigrateSecureParamsOnce(ctx, st); err != nil {
		return nil, nil, err
	}
	if err = callback.InstallContent(ctx, obj.Objects, obj.Params); err != nil {
		return nil, nil, err
	}
	if err = fresh.Refresh(ctx); err != nil {
		return nil, nil, fmt.Errorf("policy data: %w", err)
	}

	srv = gateway.New(gateway.Options{
		Logger:    logger,
		Version:   version,
		BodyLimit: int(cfg.BodyLimit),
		Deps: gateway.Deps{
			Kinds:      kinds,
			Auth:       tokens,
			Policy:     engine,
			Resolver:   claims.ObjectResolver{Objects: obj.Objects},
			License:    lic,
			Objects:    obj.Objects,
			Params:     obj.Params,
			Sync:       fresh,
			Fresh:      fresh,
			Users:      auth.NewAccounts(authn, secrets, engine, obj.Accounts, fresh.Refresh),
			Pools:      pools.New(st, pools.Options{Kinds: kinds, Bus: bus, Logger: logger, Notify: notify}),
			Actions:    cb.Actions(),
			Jobs:       obj.Jobs,
			JobTokens:  auth.NewJobTokens(authn, obj.Objects, prf),
			JobActions: render.NewJobActions(obj.Objects, obj.Params, auth.NewMachineTokens(authn, prf), info),
			Prefs:      prf,
			Events:     events,
			Streams:    hub,
			TenantOf:   policy.TenantOf,

			DecisionLog: cfg.DecisionLog,
			Candidates: func(ctx context.Context, archive []byte) (gateway.CandidatePolicy, error) {
				key, err := bundlePublicKey(cfg)
				if err != nil {
					return nil, err
				}
				c, err := engine.Candidate(ctx, archive, key)
				if err != nil {
					return nil, err
				}
				return c, nil
			},
			LoginTarpit: time.Second,
			BenchRoute:  cfg.BenchRoutes,
			Store:       st,
			Callbacks:   cb,
		},
	})

	reload := func(ctx context.Context) { reloadLicense(ctx, cfg, lic, fresh.Refresh, logger) }
	closers = append(closers, startBackground(ctx, cfg, h, st, cb, engine, relay, logger, reopenLog, reload))
	return srv, closeAll, nil
}

// bundlePublicKey is the --policy-bundle-public-key a candidate bundle is
// checked with, as the served one is.
func bundlePublicKey(cfg Config) (string, error) {
	if cfg.PolicyBundlePublicKey == "" {
		return "", nil
	}
	b, err := os.ReadFile(cfg.PolicyBundlePublicKey)
	if err != nil {
		return "", backend.Errorf(backend.EINTERNAL, "policy bundle public key: %v", err)
	}
	return string(b), nil
}

// viewCacheSize is --object-cache-size as objects.Options counts it: the
// flag's 0 turns the cache off, which the option spells -1.
func viewCacheSize(flag int) int {
	if flag == 0 {
		return -1
	}
	return flag
}

// newLicenseHolder verifies licenses with --license-public-key and loads
// --license, when given, at start.
func newLicenseHolder(ctx context.Context, cfg Config, st *store.Store) (*license.Holder, error) {
	pub, doc, err := license.ReadFiles(cfg.LicensePublicKey, cfg.License)
	if err != nil {
		return nil, err
	}
	lic := license.NewHolder(st, pub, time.Now)
	if doc != "" {
		if _, err = lic.LoadLicense(ctx, doc); err != nil {
			return nil, fmt.Errorf("license %s: %s", cfg.License, backend.AsError(err).Error())
		}
	}
	return lic, nil
}

// reloadLicense reads --license-public-key and --license again (SIGHUP),
// as a start does, and makes the policy see the result. A file that cannot
// be read, or a license not valid under the key, leaves the previous key and
// license in place.
func reloadLicense(ctx context.Context, cfg Config, lic *license.Holder, refresh func(context.Context) error, logger *slog.Logger) {
	if cfg.LicensePublicKey == "" {
		return
	}
	fail := func(err error) {
		logger.Error("license reload failed; the previous license stays", "err", err.Error())
	}
	pub, doc, err := license.ReadFiles(cfg.LicensePublicKey, cfg.License)
	if err != nil {
		fail(err)
		return
	}
	ctx = backend.WithSystem(ctx) // no request drives a reload
	st, err := lic.Reload(ctx, pub, doc)
	if err != nil {
		fail(fmt.Errorf("license %s: %s", cfg.License, backend.AsError(err).Error()))
		return
	}
	if err := refresh(ctx); err != nil {
		fail(fmt.Errorf("policy data: %w", err))
		return
	}
	logger.Info("license reloaded", "valid", st.Valid, "owner", st.Owner, "features", st.Features, "expires", st.Expires, "error", st.Error)
}

// newEngine builds the policy engine (embedded, --policy-dir or
// --policy-bundle) with its decision log; closeEngine closes both, and
// reopenLog reopens the decision log file (SIGHUP). The store keeps the
// newest signed bundle's sequence for every replica.
func newEngine(ctx context.Context, cfg Config, h hooks, logger *slog.Logger, st *store.Store) (engine *opa.Engine, closeEngine func(), reopenLog func(context.Context), err error) {
	decisionLog, closeLog, reopenLog, err := openDecisionLog(cfg, logger)
	if err != nil {
		return nil, nil, nil, err
	}
	var pubKey string
	if cfg.PolicyBundlePublicKey != "" {
		b, err := os.ReadFile(cfg.PolicyBundlePublicKey)
		if err != nil {
			closeLog()
			return nil, nil, nil, fmt.Errorf("policy bundle public key: %w", err)
		}
		pubKey = string(b)
	}
	engine, err = opa.New(ctx, opa.Options{PolicyDir: cfg.PolicyDir, Logger: logger, DecisionLog: decisionLog,
		Verified: h.verified, Compiled: h.compiled, Now: h.now,
		Bundle: opa.BundleOptions{Location: cfg.PolicyBundle, PublicKey: pubKey, AllowHTTP: cfg.PolicyBundleAllowHTTP,
			Sequences: opa.SettingsSequences(st)}})
	if err != nil {
		closeLog()
		return nil, nil, nil, fmt.Errorf("policies: %w", err)
	}
	return engine, func() { _ = engine.Close(); closeLog() }, reopenLog, nil
}

// decisionLogFlush is how long a stopping server tries to send the
// decisions still queued for --decision-log-url.
const decisionLogFlush = 5 * time.Second

// openDecisionLog opens the --decision-log file, reopened on SIGHUP (after
// logrotate moved it), and starts shipping to --decision-log-url; the
// writer is nil when neither is set. The URL is the operator's own
// configuration, like --policy-bundle, so --callback-allow/--callback-deny
// do not apply to it (docs/design.md §9.5).
func openDecisionLog(cfg Config, logger *slog.Logger) (w io.Writer, closeLog func(), reopen func(context.Context), err error) {
	var sinks opa.Tee
	var closers []func()
	closeLog = func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	reopen = func(context.Context) {}
	if cfg.DecisionLog != "" {
		f, err := opa.OpenLogFile(cfg.DecisionLog)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("decision log: %w", err)
		}
		reopen = func(context.Context) {
			if err := f.Reopen(); err != nil {
				logger.Error("decision log: reopen", "err", err.Error())
			} else {
				logger.Info("decision log reopened", "path", cfg.DecisionLog)
			}
		}
		closers = append(closers, func() { _ = f.Close() })
		sinks = append(sinks, f)
	}
	if cfg.DecisionLogURL != "" {
		sh, err := opa.NewShipper(opa.ShipperOptions{URL: cfg.DecisionLogURL, Logger: logger, Buffer: cfg.DecisionLogURLBuffer,
			Labels: map[string]string{"app": "provgate", "id": newInstanceID(), "version": versionString()}})
		if err != nil {
			closeLog()
			return nil, nil, nil, fmt.Errorf("decision log url: %w", err)
		}
		closers = append(closers, func() { sh.Close(decisionLogFlush) })
		sinks = append(sinks, sh)
	}
	if len(sinks) == 0 {
		return nil, closeLog, reopen, nil
	}
	return sinks, closeLog, reopen, nil
}

// newInstanceID names this server process in shipped decision logs (OPA's
// labels.id).
func newInstanceID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// startBackground starts the jobfail delivery worker, the relay of other
// replicas' events when there is one, for a policy directory or bundle the
// reloads on change, and the reloads on h.reload (SIGHUP: the policy's, and
// each of onHUP); stop ends them all and waits for the worker and the
// reloads.
func startBackground(ctx context.Context, cfg Config, h hooks, st *store.Store, cb *callback.Service, engine *opa.Engine,
	relay *eventbus.Relay, logger *slog.Logger, onHUP ...func(context.Context)) (stop func()) {
	// A job's move to failed queues its jobfail deliveries inside its own
	// transaction (objects OnJobChange); nothing on the bus does, since
	// clients can post events.
	bg, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Go(func() { cb.RunWorker(bg, cfg.CallbackPollInterval) })
	if relay != nil {
		// Other replicas' events and authorization data changes.
		go relay.Run(bg)
		go func() {
			if err := st.Listen(bg, time.Second, relay.Receive, relay.Resync); err != nil {
				logger.Error("listening for other replicas' events stopped", "err", err.Error())
			}
		}()
	}
	// The reload requests (SIGHUP) are handed to each reload. main catches
	// the signal; a server never takes it from the process itself.
	hup := h.reload
	var policyHUP chan os.Signal
	if cfg.PolicyDir != "" || cfg.PolicyBundle != "" {
		// A failing policy never replaces the working one: the directory's
		// or bundle's tests run first.
		engine.WatchDir(bg, cfg.PolicyWatchInterval)
		policyHUP = make(chan os.Signal, 1)
		engine.ReloadOn(bg, policyHUP)
	}
	wg.Go(func() {
		for {
			select {
			case <-bg.Done():
				return
			case sig := <-hup: // never ready when hup is nil
				if policyHUP != nil {
					select {
					case policyHUP <- sig:
					default: // a reload is pending already
					}
				}
				for _, f := range onHUP {
					f(bg)
				}
			}
		}
	})
	return func() {
		cancel()
		wg.Wait()
	}
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

// flushInterval is --event-flush as stream.Options.FlushInterval, where 0
// takes the default: 0 there is negative here.
func flushInterval(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}
