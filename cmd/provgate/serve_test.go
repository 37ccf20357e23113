package main

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
)

func writeTestFile(t *testing.T, path, data string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), mode); err != nil {
		t.Fatal(err)
	}
}

// writeCertPair writes a fresh self-signed pair into dir under the given names.
func writeCertPair(t *testing.T, dir, certName, keyName string) (certFile, keyFile string) {
	t.Helper()
	certPEM, keyPEM, err := selfSignedCert([]string{"localhost"}, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, certName), filepath.Join(dir, keyName)
	writeTestFile(t, certFile, string(certPEM), 0o644)
	writeTestFile(t, keyFile, string(keyPEM), 0o600)
	return certFile, keyFile
}

func TestServeCertificateErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		setup func(t *testing.T, dataDir string) []string // returns extra flags
		want  []string
	}{
		{"corrupt generated cert", func(t *testing.T, d string) []string {
			writeCertPair(t, d, "tls.crt", "tls.key")
			writeTestFile(t, filepath.Join(d, "tls.crt"), "not a certificate", 0o644)
			return nil
		}, []string{"tls.crt", "no PEM CERTIFICATE block"}},
		{"truncated cert", func(t *testing.T, d string) []string {
			writeCertPair(t, d, "tls.crt", "tls.key")
			writeTestFile(t, filepath.Join(d, "tls.crt"), "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n", 0o644)
			return nil
		}, []string{"tls.crt"}},
		{"corrupt generated key", func(t *testing.T, d string) []string {
			writeCertPair(t, d, "tls.crt", "tls.key")
			writeTestFile(t, filepath.Join(d, "tls.key"), "garbage", 0o600)
			return nil
		}, []string{"tls.key", "no PEM private key"}},
		{"mismatched generated pair", func(t *testing.T, d string) []string {
			writeCertPair(t, d, "tls.crt", "other.key")
			writeCertPair(t, d, "other.crt", "tls.key")
			return nil
		}, []string{"tls.key does not fit certificate", "tls.crt"}},
		{"cert without key", func(t *testing.T, d string) []string {
			writeCertPair(t, d, "tls.crt", "unused.key")
			return nil
		}, []string{"tls.crt exists but", "tls.key does not"}},
		{"mismatched flag pair", func(t *testing.T, d string) []string {
			cert, _ := writeCertPair(t, d, "a.crt", "a.key")
			_, key := writeCertPair(t, d, "b.crt", "b.key")
			return []string{"--tls-cert", cert, "--tls-key", key}
		}, []string{"b.key does not fit certificate", "a.crt"}},
		{"expired flag cert", func(t *testing.T, d string) []string {
			certPEM, keyPEM, err := selfSignedCert([]string{"localhost"}, time.Now().Add(-48*time.Hour), time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			writeTestFile(t, filepath.Join(d, "old.crt"), string(certPEM), 0o644)
			writeTestFile(t, filepath.Join(d, "old.key"), string(keyPEM), 0o600)
			return []string{"--tls-cert", filepath.Join(d, "old.crt"), "--tls-key", filepath.Join(d, "old.key")}
		}, []string{"old.crt expired"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dataDir := t.TempDir()
			args := append([]string{"--listen", "127.0.0.1:0", "--data-dir", dataDir}, tt.setup(t, dataDir)...)
			_, err := tryStartCLI(t, nil, args...)
			if err == nil {
				t.Fatal("server started, want an error")
			}
			for _, want := range tt.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q spans lines", err)
			}
		})
	}
}

func TestServeWithGivenCertificate(t *testing.T) {
	t.Parallel()
	dataDir, certDir := t.TempDir(), t.TempDir()
	cert, key := writeCertPair(t, certDir, "server.crt", "server.key")
	s := startCLI(t, map[string]string{"PROVGATE_TLS_CERT": cert, "PROVGATE_TLS_KEY": key},
		"--listen", "127.0.0.1:0", "--data-dir", dataDir)
	resp := getInfoOK(t, skipVerifyClient(), "https://"+s.addr+"/api/v3/info")
	certPEM, _ := os.ReadFile(cert)
	if !strings.Contains(string(certPEM), "CERTIFICATE") || resp.TLS == nil {
		t.Fatal("no TLS")
	}
	if _, err := os.Stat(filepath.Join(dataDir, "tls.crt")); err == nil {
		t.Error("a certificate was generated although --tls-cert was given")
	}
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
}

func TestServePortInUse(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	addr := ln.Addr().String()
	dir := t.TempDir()
	_, err = tryStartCLI(t, nil, "--listen", addr, "--data-dir", dir)
	if err == nil {
		t.Fatal("server started on a busy port")
	}
	if want := "listen " + addr + ": address already in use"; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
	// The port is claimed before the store is opened or the admin created.
	for _, f := range []string{"provgate.db", "initial-admin-password"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			t.Errorf("%s was written although the port was busy", f)
		}
	}
}

func TestServeDataDirErrors(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "plain-file")
	writeTestFile(t, file, "x", 0o644)
	tests := []struct {
		name, dir, want string
	}{
		{"data dir is a file", file, "data dir " + file + ": not a directory"},
		{"parent is a file", filepath.Join(file, "sub"), "data dir " + filepath.Join(file, "sub") + ": not a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tryStartCLI(t, nil, "--listen", "127.0.0.1:0", "--data-dir", tt.dir)
			if err == nil || err.Error() != tt.want {
				t.Errorf("error %v, want %q", err, tt.want)
			}
		})
	}
	t.Run("unwritable", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.Chmod(dir, 0o500); err != nil {
			t.Fatal(err)
		}
		defer os.Chmod(dir, 0o700)
		if os.Geteuid() == 0 {
			// Root writes through file modes; sysfs takes no new file
			// from anyone.
			dir = "/sys/kernel"
		}
		_, err := tryStartCLI(t, nil, "--listen", "127.0.0.1:0", "--data-dir", dir)
		if err == nil || !strings.Contains(err.Error(), "not writable") {
			t.Errorf("error %v, want not writable", err)
		}
	})
}

// TestGracefulShutdown checks that a request running when the stop signal
// arrives still gets its answer, and that run then returns nil.
func TestGracefulShutdown(t *testing.T) {
	t.Parallel()
	for _, noTLS := range []bool{false, true} {
		name := "tls"
		if noTLS {
			name = "plain"
		}
		t.Run(name, func(t *testing.T) {
			cfg := defaultConfig()
			cfg.Listen, cfg.DataDir, cfg.NoTLS = "127.0.0.1:0", t.TempDir(), noTLS
			cfg.ShutdownTimeout = 10 * time.Second

			entered, release := make(chan struct{}), make(chan struct{})
			app := fiber.New(fiber.Config{DisableStartupMessage: true})
			app.Get("/slow", func(c *fiber.Ctx) error {
				close(entered)
				<-release
				return c.SendString("done")
			})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			ready, served := make(chan string, 1), make(chan error, 1)
			logger := slog.New(slog.NewJSONHandler(io.Discard, nil))
			go func() { served <- listenAndServe(ctx, cfg, app, logger, ready) }()
			var addr string
			select {
			case addr = <-ready:
			case err := <-served:
				t.Fatal(err)
			}

			scheme := "https"
			if noTLS {
				scheme = "http"
			}
			type result struct {
				body string
				err  error
			}
			got := make(chan result, 1)
			go func() {
				resp, err := skipVerifyClient().Get(scheme + "://" + addr + "/slow")
				if err != nil {
					got <- result{err: err}
					return
				}
				defer resp.Body.Close()
				b, err := io.ReadAll(resp.Body)
				got <- result{string(b), err}
			}()
			<-entered
			cancel()
			// Give the shutdown time to start while the request is in flight.
			time.Sleep(100 * time.Millisecond)
			select {
			case err := <-served:
				t.Fatalf("listenAndServe returned %v with a request in flight", err)
			default:
			}
			close(release)
			r := <-got
			if r.err != nil || r.body != "done" {
				t.Fatalf("in-flight request: body %q, err %v", r.body, r.err)
			}
			select {
			case err := <-served:
				if err != nil {
					t.Fatalf("listenAndServe = %v, want nil", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("listenAndServe did not return")
			}
			if _, err := (&http.Client{Timeout: time.Second, Transport: &http.Transport{
				TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}).Get(scheme + "://" + addr + "/slow"); err == nil {
				t.Error("request after shutdown succeeded")
			}
		})
	}
}

// TestStopRightAfterStart guards the race where the stop arrives before
// fasthttp has started serving the listener.
func TestStopRightAfterStart(t *testing.T) {
	t.Parallel()
	for i := 0; i < 20; i++ {
		cfg := defaultConfig()
		cfg.Listen, cfg.DataDir, cfg.NoTLS = "127.0.0.1:0", t.TempDir(), true
		app := fiber.New(fiber.Config{DisableStartupMessage: true})
		ctx, cancel := context.WithCancel(context.Background())
		ready, served := make(chan string, 1), make(chan error, 1)
		go func() {
			served <- listenAndServe(ctx, cfg, app, slog.New(slog.NewJSONHandler(io.Discard, nil)), ready)
		}()
		<-ready
		cancel()
		select {
		case err := <-served:
			if err != nil {
				t.Fatalf("run %d: %v", i, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("run %d: listenAndServe did not return after cancel", i)
		}
	}
}
