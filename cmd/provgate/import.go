package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
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
	conn := addConnFlags(fs, getenv)
	kind := fs.String("kind", "", "users or roles; empty reads it from the objects")
	batch := fs.Int("batch", importer.DefaultBatch, "objects per request (at most 1000); each request is written whole or not at all")
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
	authz, client, err := conn.connect("import", getenv, 10*time.Minute)
	if err != nil {
		return err
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
	res, err := importer.Import(ctx, in, importer.Options{Endpoint: *conn.endpoint, Authorization: authz, Kind: *kind,
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
