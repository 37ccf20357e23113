package opa

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/open-policy-agent/opa/v1/bundle"

	"github.com/provgate/provgate/policies"
)

// maxBundleBytes bounds a bundle read from a file or a URL.
const maxBundleBytes = 64 << 20

// errNotModified is a URL poll answered 304: nothing to reload.
var errNotModified = errors.New("bundle not modified")

// bundleConfig is where an OPA bundle comes from (docs/design.md §9.7) and
// how it is verified.
type bundleConfig struct {
	location string // a directory, a .tar.gz file or an http(s) URL
	display  string // location without a URL's password, for logs and errors
	url      bool
	verify   *bundle.VerificationConfig // nil: signatures are not checked
	client   *http.Client
	etag     string // of the served bundle, for URL polls (guarded by reloadMu)
}

// BundleOptions configure an engine that serves an OPA bundle.
type BundleOptions struct {
	// Location is a directory laid out as `opa build` reads it, a .tar.gz
	// file as `opa build` writes it, or an http(s) URL serving one.
	Location string
	// PublicKey, when set, is the PEM public key (RS256, as `opa sign`
	// uses by default) that must have signed the bundle: an unsigned or
	// tampered bundle is refused.
	PublicKey string
	// Client fetches URLs; nil uses a client with a one-minute timeout.
	Client *http.Client
}

func newBundleConfig(o BundleOptions) *bundleConfig {
	c := &bundleConfig{location: o.Location, client: o.Client,
		url: strings.HasPrefix(o.Location, "http://") || strings.HasPrefix(o.Location, "https://")}
	if c.client == nil {
		c.client = &http.Client{Timeout: time.Minute}
	}
	c.display = c.location
	if u, err := url.Parse(c.location); err == nil && c.url {
		c.display = u.Redacted()
	}
	if o.PublicKey != "" {
		c.verify = bundle.NewVerificationConfig(map[string]*bundle.KeyConfig{
			"provgate": {Key: o.PublicKey, Algorithm: "RS256"},
		}, "provgate", "", nil)
	}
	return c
}

// prepareBundle reads, verifies, compiles and tests the bundle: what a
// reload would serve. A URL answering 304 to the served bundle's ETag is
// errNotModified.
func (e *Engine) prepareBundle(ctx context.Context) (*source, *policy, error) {
	b, etag, err := e.bundle.read(ctx)
	// A fetched bundle that is refused (bad signature, failing tests) is
	// refused for good: its ETag is remembered so that polls do not fetch
	// and test it again until the server publishes another one. The served
	// policy stays; the refusal is logged once.
	refuse := func(err error) (*source, *policy, error) {
		if etag != "" {
			e.bundle.etag = etag
		}
		return nil, nil, err
	}
	if err != nil {
		return refuse(err)
	}
	src := &source{mods: map[string]string{}, tests: map[string]string{}, data: b.Data, revision: b.Manifest.Revision}
	for _, m := range b.Modules {
		name := m.Path
		if strings.HasSuffix(name, policies.TestSuffix) {
			src.tests[name] = string(m.Raw)
		} else {
			src.mods[name] = string(m.Raw)
		}
	}
	if len(src.mods) == 0 {
		return refuse(policyError("read policy bundle", fmt.Errorf("no .rego policy files in %s", e.bundle.display)))
	}
	if src.data == nil {
		src.data = map[string]any{}
	}
	if err := src.classify(); err != nil {
		return refuse(err)
	}
	p, err := e.build(ctx, src.modules(), src.data)
	if err != nil {
		return refuse(err)
	}
	if err := src.test(ctx); err != nil {
		return refuse(err)
	}
	if !e.bundle.url {
		src.sums = bundleSums(e.bundle.location)
	}
	e.bundle.etag = etag
	return src, p, nil
}

// read loads the bundle with OPA's bundle reader, which also checks the
// signature when a key is configured.
func (c *bundleConfig) read(ctx context.Context) (bundle.Bundle, string, error) {
	var r *bundle.Reader
	var etag string
	switch {
	case c.url:
		body, tag, err := c.fetch(ctx)
		if err != nil {
			return bundle.Bundle{}, "", err
		}
		etag = tag
		r = bundle.NewReader(bytes.NewReader(body))
	default:
		fi, err := os.Stat(c.location)
		if err != nil {
			return bundle.Bundle{}, "", policyError("read policy bundle", err)
		}
		if fi.IsDir() {
			r = bundle.NewCustomReader(bundle.NewDirectoryLoader(c.location))
		} else {
			f, err := os.Open(c.location)
			if err != nil {
				return bundle.Bundle{}, "", policyError("read policy bundle", err)
			}
			defer f.Close()
			r = bundle.NewReader(f)
		}
	}
	r = r.WithSizeLimitBytes(maxBundleBytes)
	if c.verify != nil {
		r = r.WithBundleVerificationConfig(c.verify)
	} else {
		r = r.WithSkipBundleVerification(true)
	}
	b, err := r.Read()
	if err != nil {
		return bundle.Bundle{}, etag, policyError("read policy bundle "+c.display, err)
	}
	return b, etag, nil
}

// fetch GETs the bundle URL, asking with the served bundle's ETag.
func (c *bundleConfig) fetch(ctx context.Context) ([]byte, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.location, nil)
	if err != nil {
		return nil, "", policyError("fetch policy bundle", err)
	}
	if c.etag != "" {
		req.Header.Set("If-None-Match", c.etag)
	}
	res, err := c.client.Do(req)
	if err != nil {
		return nil, "", policyError("fetch policy bundle", err)
	}
	defer res.Body.Close()
	switch {
	case res.StatusCode == http.StatusNotModified && c.etag != "":
		return nil, "", errNotModified
	case res.StatusCode != http.StatusOK:
		return nil, "", policyError("fetch policy bundle", fmt.Errorf("%s answered %s", c.display, res.Status))
	}
	body, err := io.ReadAll(io.LimitReader(res.Body, maxBundleBytes+1))
	if err != nil {
		return nil, "", policyError("fetch policy bundle", err)
	}
	if len(body) > maxBundleBytes {
		return nil, "", policyError("fetch policy bundle", fmt.Errorf("larger than %d bytes", maxBundleBytes))
	}
	return body, res.Header.Get("ETag"), nil
}

// bundleSums hashes a bundle file, or every file of a bundle directory, to
// notice a change.
func bundleSums(location string) map[string][sha256.Size]byte {
	out := map[string][sha256.Size]byte{}
	_ = filepath.WalkDir(location, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if b, err := os.ReadFile(path); err == nil {
			out[path] = sha256.Sum256(b)
		}
		return nil
	})
	return out
}
