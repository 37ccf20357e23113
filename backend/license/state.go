package license

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/provgate/provgate/backend"
)

// SettingLicense is the store setting that holds the loaded license
// document, shared by every replica.
const SettingLicense = "license"

// Settings keeps server settings; *store.Store satisfies it.
type Settings interface {
	GetSetting(ctx context.Context, name string) (string, bool, error)
	SetSetting(ctx context.Context, name, value string) error
}

// Holder keeps the server's license: it verifies documents with the
// configured public key and keeps the accepted one in the store
// (docs/design.md §7). Every read verifies the stored document again, so
// a license that expires stops counting at once.
type Holder struct {
	st  Settings
	now func() time.Time

	mu  sync.RWMutex // guards pub, which Reload replaces
	pub ed25519.PublicKey
}

func (h *Holder) key() ed25519.PublicKey {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.pub
}

// NewHolder returns a Holder; pub nil means no key is configured (every
// load is refused). now is the clock (time.Now when nil).
func NewHolder(st Settings, pub ed25519.PublicKey, now func() time.Time) *Holder {
	if now == nil {
		now = time.Now
	}
	return &Holder{st: st, pub: pub, now: now}
}

// LicenseState reports the stored license; Error says why it is not valid.
func (h *Holder) LicenseState(ctx context.Context) backend.LicenseState {
	out := backend.LicenseState{Features: []string{}}
	doc, ok, err := h.st.GetSetting(ctx, SettingLicense)
	if err != nil {
		out.Error = "license could not be read"
		return out
	}
	if !ok || doc == "" {
		out.Error = "no license loaded"
		return out
	}
	pub := h.key()
	if pub == nil {
		out.Error = "no license public key configured (--license-public-key)"
		return out
	}
	lic, err := Verify(pub, doc, h.now())
	if err != nil {
		out.Error = err.Error()
		return out
	}
	return backend.LicenseState{Valid: true, Owner: lic.Owner, Features: append([]string{}, lic.Features...),
		Expires: lic.Expires.UTC().Format(time.RFC3339)}
}

// LoadLicense verifies doc and, when valid now, makes it the license.
func (h *Holder) LoadLicense(ctx context.Context, doc string) (backend.LicenseState, error) {
	return h.load(ctx, h.key(), doc)
}

func (h *Holder) load(ctx context.Context, pub ed25519.PublicKey, doc string) (backend.LicenseState, error) {
	if pub == nil {
		return backend.LicenseState{}, backend.OpError(backend.EBADREQUEST, backend.ReplaceOp, "license", "",
			"no license public key configured: start the server with --license-public-key")
	}
	if _, err := Verify(pub, doc, h.now()); err != nil {
		return backend.LicenseState{}, backend.NewError(backend.EINVALID, "ValidationError", "license", "", err.Error())
	}
	if err := h.st.SetSetting(ctx, SettingLicense, doc); err != nil {
		return backend.LicenseState{}, err
	}
	return h.LicenseState(ctx), nil
}

// Reload replaces the public key with pub and, when doc is not empty, loads
// doc as the license, as a start with these files does (SIGHUP in the
// server, docs/design.md §7). Nothing changes unless doc is valid under pub
// now: a broken file never takes away a working license.
func (h *Holder) Reload(ctx context.Context, pub ed25519.PublicKey, doc string) (backend.LicenseState, error) {
	if doc != "" {
		if _, err := h.load(ctx, pub, doc); err != nil {
			return backend.LicenseState{}, err
		}
	}
	h.mu.Lock()
	h.pub = pub
	h.mu.Unlock()
	return h.LicenseState(ctx), nil
}

// ReadFiles reads the public key at pubPath and the license document at
// docPath, each when its path is not empty, as a start and a reload (SIGHUP)
// take them from --license-public-key and --license.
func ReadFiles(pubPath, docPath string) (pub ed25519.PublicKey, doc string, err error) {
	if pubPath != "" {
		if pub, err = LoadPublicKey(pubPath); err != nil {
			return nil, "", err
		}
	}
	if docPath != "" {
		b, err := os.ReadFile(docPath)
		if err != nil {
			return nil, "", fmt.Errorf("license: %w", err)
		}
		doc = strings.TrimSpace(string(b))
	}
	return pub, doc, nil
}
