package opa

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
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

	// plainHTTP: location is an http:// URL, read only with allowHTTP.
	plainHTTP, allowHTTP bool
	// active is the sequence of the signed bundle served (guarded by
	// reloadMu); sequences keeps the newest across restarts and replicas.
	active    BundleSequence
	sequences SequenceStore
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
	// AllowHTTP lets Location be a plain http:// URL, and a URL redirect
	// to one: without it such a bundle is refused, since anyone on the
	// way could read or replace it (docs/design.md §9.7).
	AllowHTTP bool
	// Sequences keeps the sequence of the newest signed bundle activated,
	// so that an older one is refused after a restart and by every
	// replica sharing it; nil keeps it in this engine only.
	Sequences SequenceStore
}

// BundleSequence orders signed bundles: Sequence is the positive integer
// the signed manifest carries at metadata.provgate.sequence, Digest names
// the signed content (a hash of its signatures), so that one sequence is
// one bundle.
type BundleSequence struct {
	Sequence int64  `json:"sequence"`
	Digest   string `json:"digest"`
}

// SequenceStore keeps the newest BundleSequence activated.
type SequenceStore interface {
	// LoadBundleSequence returns the newest sequence saved; the zero value
	// when none was.
	LoadBundleSequence(ctx context.Context) (BundleSequence, error)
	// SaveBundleSequence records seq unless a higher one is already
	// recorded: the sequence never goes back.
	SaveBundleSequence(ctx context.Context, seq BundleSequence) error
}

func newBundleConfig(o BundleOptions) *bundleConfig {
	c := &bundleConfig{location: o.Location, client: o.Client,
		url:       strings.HasPrefix(o.Location, "http://") || strings.HasPrefix(o.Location, "https://"),
		plainHTTP: strings.HasPrefix(o.Location, "http://"), allowHTTP: o.AllowHTTP, sequences: o.Sequences}
	if c.client == nil {
		c.client = &http.Client{Timeout: time.Minute}
	}
	if !c.allowHTTP {
		// A redirect must not move the bundle to plain http either.
		cl := *c.client
		next := cl.CheckRedirect
		cl.CheckRedirect = func(req *http.Request, via []*http.Request) error {
			if req.URL.Scheme != "https" {
				return fmt.Errorf("redirected to a plain http URL (%s); allow it with --policy-bundle-allow-http", req.URL.Redacted())
			}
			if next != nil {
				return next(req, via)
			}
			if len(via) >= 10 {
				return errors.New("stopped after 10 redirects")
			}
			return nil
		}
		c.client = &cl
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
	seq, err := e.bundle.order(ctx, b)
	if err != nil {
		return refuse(policyError("read policy bundle "+e.bundle.display, err))
	}
	src := &source{mods: map[string]string{}, tests: map[string]string{}, data: b.Data, revision: b.Manifest.Revision,
		sequence: seq}
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
	if err := src.test(ctx, e.verified); err != nil {
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
	if c.plainHTTP && !c.allowHTTP {
		return nil, "", policyError("fetch policy bundle", fmt.Errorf(
			"%s is a plain http URL, which anyone on the way can read or replace; use https, or allow it with --policy-bundle-allow-http", c.display))
	}
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

// order checks a signed bundle's place in the order of signed bundles
// (docs/design.md §9.7) and returns its sequence; nil for an unsigned
// bundle, which is not ordered. A signed bundle must carry a sequence; one
// lower than the bundle served, or than the newest the SequenceStore
// recorded, is refused (a replayed older bundle would re-open what a newer
// one closed), and so is another bundle with the same sequence.
func (c *bundleConfig) order(ctx context.Context, b bundle.Bundle) (*BundleSequence, error) {
	if c.verify == nil {
		return nil, nil
	}
	n, err := manifestSequence(b.Manifest)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256([]byte(strings.Join(b.Signatures.Signatures, "\n")))
	seq := BundleSequence{Sequence: n, Digest: hex.EncodeToString(sum[:])}
	newest := c.active
	if c.sequences != nil {
		saved, err := c.sequences.LoadBundleSequence(ctx)
		if err != nil {
			return nil, fmt.Errorf("reading the newest bundle sequence: %w", err)
		}
		if saved.Sequence > newest.Sequence {
			newest = saved
		}
	}
	switch {
	case seq.Sequence < newest.Sequence:
		return nil, fmt.Errorf("bundle sequence %d is older than sequence %d, already activated; a bundle must carry a higher sequence than the last one", seq.Sequence, newest.Sequence)
	case seq.Sequence == newest.Sequence && seq.Digest != newest.Digest:
		return nil, fmt.Errorf("bundle sequence %d was already activated with other content; a new bundle must carry a higher sequence", seq.Sequence)
	}
	return &seq, nil
}

// activated records the sequence of the bundle now served.
func (e *Engine) activated(ctx context.Context, src *source) {
	if e.bundle == nil || src.sequence == nil {
		return
	}
	e.bundle.active = *src.sequence
	if e.bundle.sequences == nil {
		return
	}
	if err := e.bundle.sequences.SaveBundleSequence(ctx, *src.sequence); err != nil {
		e.logger.ErrorContext(ctx, "recording the policy bundle sequence failed; a restart may accept an older bundle",
			"sequence", src.sequence.Sequence, "err", err.Error())
	}
}

// SequenceKey is where a signed bundle's manifest carries its sequence:
// {"metadata": {"provgate": {"sequence": 7}}}.
const SequenceKey = "metadata.provgate.sequence"

// manifestSequence reads metadata.provgate.sequence, a positive integer.
func manifestSequence(m bundle.Manifest) (int64, error) {
	missing := fmt.Errorf("a signed bundle needs a positive integer %s in its .manifest", SequenceKey)
	pg, ok := m.Metadata["provgate"].(map[string]any)
	if !ok {
		return 0, missing
	}
	var n int64
	switch v := pg["sequence"].(type) {
	case json.Number:
		i, err := v.Int64()
		if err != nil {
			return 0, missing
		}
		n = i
	case float64:
		if v != math.Trunc(v) || v > 1<<53 {
			return 0, missing
		}
		n = int64(v)
	case int:
		n = int64(v)
	case int64:
		n = v
	default:
		return 0, missing
	}
	if n < 1 {
		return 0, missing
	}
	return n, nil
}

// SequenceSetting is the server setting SettingsSequences keeps the newest
// bundle sequence in.
const SequenceSetting = "policy-bundle-sequence"

// Settings is what SettingsSequences needs of the store: UpdateSetting
// reads and writes one setting while holding it.
type Settings interface {
	GetSetting(ctx context.Context, name string) (string, bool, error)
	UpdateSetting(ctx context.Context, name string, next func(cur string) (string, bool)) error
}

// SettingsSequences keeps the newest signed bundle's sequence in a server
// setting, shared by every replica of the store.
func SettingsSequences(st Settings) SequenceStore { return settingsSequences{st} }

type settingsSequences struct{ st Settings }

func (s settingsSequences) LoadBundleSequence(ctx context.Context) (BundleSequence, error) {
	v, _, err := s.st.GetSetting(ctx, SequenceSetting)
	if err != nil || v == "" {
		return BundleSequence{}, err
	}
	var seq BundleSequence
	if err := json.Unmarshal([]byte(v), &seq); err != nil {
		return BundleSequence{}, fmt.Errorf("setting %s: %w", SequenceSetting, err)
	}
	return seq, nil
}

func (s settingsSequences) SaveBundleSequence(ctx context.Context, seq BundleSequence) error {
	v, err := json.Marshal(seq)
	if err != nil {
		return err
	}
	return s.st.UpdateSetting(ctx, SequenceSetting, func(cur string) (string, bool) {
		var have BundleSequence
		if cur != "" && json.Unmarshal([]byte(cur), &have) == nil && have.Sequence >= seq.Sequence {
			return "", false
		}
		return string(v), true
	})
}
