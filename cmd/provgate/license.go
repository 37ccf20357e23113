package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/provgate/provgate/backend/license"
)

// licenseCommand runs "provgate license keygen|sign|verify". These are
// offline tools for whoever issues licenses; the server only verifies.
func licenseCommand(args []string, stdout, stderr io.Writer) error {
	with := func(run func([]string, io.Writer, io.Writer) error) func([]string) error {
		return func(args []string) error { return run(args, stdout, stderr) }
	}
	return runSubcommand("license", args, subcommand{"keygen", with(licenseKeygen)},
		subcommand{"sign", with(licenseSign)}, subcommand{"verify", with(licenseVerify)})
}

func newLicenseFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("license "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

func required(fs *flag.FlagSet, names ...string) error {
	for _, n := range names {
		if fs.Lookup(n).Value.String() == "" {
			return usagef("%s: --%s is required", fs.Name(), n)
		}
	}
	return nil
}

func licenseKeygen(args []string, stdout, stderr io.Writer) error {
	fs := newLicenseFlags("keygen")
	privPath := fs.String("private-key", "", "file to write the PEM private key to (mode 0600)")
	pubPath := fs.String("public-key", "", "file to write the PEM public key to (mode 0644)")
	force := fs.Bool("force", false, "overwrite existing key files")
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	if err := required(fs, "private-key", "public-key"); err != nil {
		return err
	}
	pub, priv, err := license.GenerateKey()
	if err != nil {
		return fmt.Errorf("license keygen: %w", err)
	}
	if err := license.WriteKeyPair(*privPath, *pubPath, priv, *force); err != nil {
		return fmt.Errorf("license keygen: %w", err)
	}
	_, err = fmt.Fprintf(stdout, "wrote private key %s and public key %s (key id %s)\n", *privPath, *pubPath, license.KeyID(pub))
	return err
}

func licenseSign(args []string, stdout, stderr io.Writer) error {
	fs := newLicenseFlags("sign")
	privPath := fs.String("private-key", "", "PEM private key file")
	features := fs.String("features", "", "comma-separated features, e.g. rbac")
	expires := fs.String("expires", "", "expiry time, RFC 3339, e.g. 2030-01-01T00:00:00Z")
	issued := fs.String("issued", "", "start of validity, RFC 3339 (default: now)")
	owner := fs.String("owner", "", "license holder")
	id := fs.String("id", "", "license id (default: random)")
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	if err := required(fs, "private-key", "expires", "owner"); err != nil {
		return err
	}
	l := license.License{Owner: *owner, ID: *id}
	var err error
	if l.Expires, err = time.Parse(time.RFC3339, *expires); err != nil {
		return usagef("license sign: --expires %q: want RFC 3339, e.g. 2030-01-01T00:00:00Z", *expires)
	}
	if *issued != "" {
		if l.Issued, err = time.Parse(time.RFC3339, *issued); err != nil {
			return usagef("license sign: --issued %q: want RFC 3339, e.g. 2026-01-01T00:00:00Z", *issued)
		}
	}
	if *features != "" {
		l.Features = strings.Split(*features, ",")
	}
	priv, err := license.LoadPrivateKey(*privPath)
	if err != nil {
		return fmt.Errorf("license sign: %w", err)
	}
	doc, err := license.Sign(priv, l)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(stdout, doc)
	return err
}

func licenseVerify(args []string, stdout, stderr io.Writer) error {
	fs := newLicenseFlags("verify")
	pubPath := fs.String("public-key", "", "PEM public key file")
	docPath := fs.String("license", "", "license document file")
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	if err := required(fs, "public-key", "license"); err != nil {
		return err
	}
	pub, err := license.LoadPublicKey(*pubPath)
	if err != nil {
		return fmt.Errorf("license verify: %w", err)
	}
	l, err := license.LoadFile(pub, *docPath, time.Now())
	state := "valid"
	switch {
	case errors.Is(err, license.ErrExpired):
		state = "expired"
	case errors.Is(err, license.ErrNotYetValid):
		state = "not yet valid"
	case err != nil:
		return fmt.Errorf("license verify: %w", err)
	}
	fmt.Fprintf(stdout, "state: %s\nowner: %s\nfeatures: %s\nid: %s\nissued: %s\nexpires: %s\n",
		state, l.Owner, strings.Join(l.Features, ","), l.ID,
		l.Issued.UTC().Format(time.RFC3339), l.Expires.UTC().Format(time.RFC3339))
	if err != nil {
		return fmt.Errorf("license verify: %w", err)
	}
	return nil
}
