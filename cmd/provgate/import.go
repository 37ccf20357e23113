package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/provgate/provgate/gateway/importer"
)

// importCommand runs `provgate import [flags] FILE`: it sends the users or
// roles of FILE to a running server's import route with the caller's
// credentials (gateway/importer), named like drpcli's: RS_ENDPOINT, RS_KEY
// (user:password), RS_TOKEN.
func importCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("import", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	endpoint := fs.String("endpoint", envOr(getenv, "RS_ENDPOINT", "https://127.0.0.1:8092"), "server URL [$RS_ENDPOINT]")
	key := fs.String("key", "", "credentials as user:password [$RS_KEY]")
	token := fs.String("token", "", "a token instead of --key [$RS_TOKEN]")
	kind := fs.String("kind", "", "users or roles; empty reads it from the objects")
	batch := fs.Int("batch", importer.DefaultBatch, "objects per request (at most 1000); each request is written whole or not at all")
	caCert := fs.String("ca-cert", "", "PEM certificate(s) to trust for the server, e.g. <data-dir>/tls.crt")
	insecure := fs.Bool("insecure", false, "do not verify the server's certificate")
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(stderr, "usage: provgate import [flags] FILE   (FILE: the JSON array `drpcli users list` or `drpcli roles list` prints; - reads stdin)")
		fs.SetOutput(stderr)
		fs.PrintDefaults()
		return errHelp
	}
	if err != nil {
		return usagef("import: %v (see provgate import -h)", err)
	}
	if fs.NArg() != 1 {
		return usagef("import: want one FILE after the flags (see provgate import -h)")
	}
	// Secrets come from the environment unless given; they are never printed.
	if *key == "" {
		*key = getenv("RS_KEY")
	}
	if *token == "" {
		*token = getenv("RS_TOKEN")
	}
	var authz string
	switch {
	case *token != "":
		authz = "Bearer " + *token
	case *key != "":
		if !strings.Contains(*key, ":") {
			return usagef("import: --key must be user:password")
		}
		authz = "Basic " + base64.StdEncoding.EncodeToString([]byte(*key))
	default:
		return usagef("import: no credentials: set --key user:password, --token, RS_KEY or RS_TOKEN")
	}
	tlsCfg := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: *insecure} //nolint:gosec // only when asked
	if *caCert != "" {
		pem, err := os.ReadFile(*caCert)
		if err != nil {
			return fmt.Errorf("import: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("import: %s holds no PEM certificate", *caCert)
		}
		tlsCfg.RootCAs = pool
	}
	var in io.Reader = os.Stdin
	if name := fs.Arg(0); name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return fmt.Errorf("import: %w", err)
		}
		defer f.Close()
		in = f
	}
	client := &http.Client{Timeout: 10 * time.Minute, Transport: &http.Transport{TLSClientConfig: tlsCfg}}
	res, err := importer.Import(ctx, in, importer.Options{Endpoint: *endpoint, Authorization: authz, Kind: *kind,
		Batch: *batch, Client: client, Progress: stderr})
	if err != nil {
		return fmt.Errorf("import: %w", err)
	}
	_, err = fmt.Fprintf(stdout, "imported %d %s\n", res.Created, res.Kind)
	return err
}

func envOr(getenv func(string) string, name, def string) string {
	if v := getenv(name); v != "" {
		return v
	}
	return def
}
