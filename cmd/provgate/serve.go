package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/gofiber/fiber/v2"
)

// prepareDataDir creates the data dir (mode 0700: it holds keys and the
// initial admin password) and proves it is writable now rather than at the
// first write, deep inside a request.
func prepareDataDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("data dir %s: %w", dir, pathErr(err))
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("data dir %s: %w", dir, pathErr(err))
	}
	if !fi.IsDir() {
		return fmt.Errorf("data dir %s: not a directory", dir)
	}
	f, err := os.CreateTemp(dir, ".write-check-*")
	if err != nil {
		return fmt.Errorf("data dir %s: not writable: %w", dir, pathErr(err))
	}
	name := f.Name()
	f.Close()
	if err := os.Remove(name); err != nil {
		return fmt.Errorf("data dir %s: %w", dir, pathErr(err))
	}
	if _, err := os.ReadDir(dir); err != nil {
		return fmt.Errorf("data dir %s: not readable: %w", dir, pathErr(err))
	}
	return nil
}

// pathErr drops the *PathError wrapper, whose text repeats the path the
// caller already names.
func pathErr(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// listenAndServe serves app on cfg.Listen until ctx is cancelled, then lets
// in-flight requests finish within cfg.ShutdownTimeout. The bound address is
// sent on ready (when not nil) once connections are accepted.
func listenAndServe(ctx context.Context, cfg Config, app *fiber.App, logger *slog.Logger, ready chan<- string) error {
	ln, err := bind(cfg)
	if err != nil {
		return err
	}
	return serveOn(ctx, cfg, ln, app, nil, logger, ready)
}

// bind claims the listen address. serve binds before building the
// application, so a busy port fails before anything is written.
func bind(cfg Config) (net.Listener, error) {
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, listenError(cfg.Listen, err)
	}
	return ln, nil
}

// serveOn serves app on a bound listener (see listenAndServe). When ctx
// ends, drain (when not nil) starts the graceful shutdown: readiness turns
// false and event streams and long polls end; the listener keeps serving
// for cfg.ShutdownDelay, then closes and in-flight requests get
// cfg.ShutdownTimeout (docs/design.md §15.7).
func serveOn(ctx context.Context, cfg Config, ln net.Listener, app *fiber.App, drain func(), logger *slog.Logger, ready chan<- string) error {
	if err := prepareDataDir(cfg.DataDir); err != nil {
		ln.Close()
		return err
	}
	var tlsConfig *tls.Config
	if !cfg.NoTLS {
		var err error
		if tlsConfig, err = loadTLSConfig(cfg, logger); err != nil {
			ln.Close()
			return err
		}
	}
	addr := ln.Addr().String()
	scheme := "http"
	if tlsConfig != nil {
		ln = tls.NewListener(ln, tlsConfig)
		scheme = "https"
	}

	served := make(chan error, 1)
	go func() { served <- app.Listener(ln) }()
	logger.Info("listening", "addr", addr, "url", scheme+"://"+addr+"/api/v3")
	if ready != nil {
		select {
		case ready <- addr:
		case <-ctx.Done():
		}
	}

	select {
	case err := <-served:
		// Listener returns early only when accepting fails.
		return fmt.Errorf("serve %s: %w", addr, err)
	case <-ctx.Done():
	}
	logger.Info("draining", "delay", cfg.ShutdownDelay.String())
	if drain != nil {
		drain()
	}
	if cfg.ShutdownDelay > 0 {
		select {
		case <-time.After(cfg.ShutdownDelay):
		case err := <-served:
			return fmt.Errorf("serve %s: %w", addr, err)
		}
	}
	logger.Info("shutting down", "timeout", cfg.ShutdownTimeout.String())
	shutdownErr := app.ShutdownWithTimeout(cfg.ShutdownTimeout)
	// When the stop comes right after start, fasthttp may not have
	// registered the listener yet, so its shutdown cannot close it; closing
	// it here makes a late Serve return instead of running on.
	ln.Close()
	if shutdownErr != nil {
		return fmt.Errorf("shutdown: requests still running after %s: %w", cfg.ShutdownTimeout, shutdownErr)
	}
	if err := <-served; err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("serve %s: %w", addr, err)
	}
	logger.Info("stopped")
	return nil
}

// listenError turns net.Listen's "listen tcp :8092: bind: address already in
// use" into the shorter message operators search for.
func listenError(addr string, err error) error {
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("listen %s: address already in use", addr)
	}
	if errors.Is(err, syscall.EACCES) {
		return fmt.Errorf("listen %s: permission denied (ports below 1024 need privileges)", addr)
	}
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		err = oe.Err
	}
	return fmt.Errorf("listen %s: %w", addr, err)
}
