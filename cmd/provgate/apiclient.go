package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"
)

// connFlags are the flags of the commands that talk to a running server,
// named like drpcli's: --endpoint (RS_ENDPOINT), --key user:password
// (RS_KEY), --token (RS_TOKEN), --ca-cert, --insecure.
type connFlags struct {
	endpoint, key, token, caCert *string
	insecure                     *bool
}

func addConnFlags(fs *flag.FlagSet, getenv func(string) string) connFlags {
	return connFlags{
		endpoint: fs.String("endpoint", envOr(getenv, "RS_ENDPOINT", "https://127.0.0.1:8092"), "server URL [$RS_ENDPOINT]"),
		key:      fs.String("key", "", "credentials as user:password [$RS_KEY]"),
		token:    fs.String("token", "", "a token instead of --key [$RS_TOKEN]"),
		caCert:   fs.String("ca-cert", "", "PEM certificate(s) to trust for the server, e.g. <data-dir>/tls.crt"),
		insecure: fs.Bool("insecure", false, "do not verify the server's certificate"),
	}
}

// connect returns the Authorization header and an HTTP client for the
// flags. Secrets come from the environment unless given; they are never
// printed. cmd names the command in errors.
func (f connFlags) connect(cmd string, getenv func(string) string, timeout time.Duration) (string, *http.Client, error) {
	if *f.key == "" {
		*f.key = getenv("RS_KEY")
	}
	if *f.token == "" {
		*f.token = getenv("RS_TOKEN")
	}
	var authz string
	switch {
	case *f.token != "":
		authz = "Bearer " + *f.token
	case *f.key != "":
		if !strings.Contains(*f.key, ":") {
			return "", nil, usagef("%s: --key must be user:password", cmd)
		}
		authz = "Basic " + base64.StdEncoding.EncodeToString([]byte(*f.key))
	default:
		return "", nil, usagef("%s: no credentials: set --key user:password, --token, RS_KEY or RS_TOKEN", cmd)
	}
	tlsCfg := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: *f.insecure} //nolint:gosec // only when asked
	if *f.caCert != "" {
		pem, err := os.ReadFile(*f.caCert)
		if err != nil {
			return "", nil, fmt.Errorf("%s: %w", cmd, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return "", nil, fmt.Errorf("%s: %s holds no PEM certificate", cmd, *f.caCert)
		}
		tlsCfg.RootCAs = pool
	}
	return authz, &http.Client{Timeout: timeout, Transport: &http.Transport{TLSClientConfig: tlsCfg}}, nil
}
