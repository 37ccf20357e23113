package license

import (
	"context"
	"crypto/ed25519"
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
	pub ed25519.PublicKey
	now func() time.Time
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
	if h.pub == nil {
		out.Error = "no license public key configured (--license-public-key)"
		return out
	}
	lic, err := Verify(h.pub, doc, h.now())
	if err != nil {
		out.Error = err.Error()
		return out
	}
	return backend.LicenseState{Valid: true, Owner: lic.Owner, Features: append([]string{}, lic.Features...),
		Expires: lic.Expires.UTC().Format(time.RFC3339)}
}

// LoadLicense verifies doc and, when valid now, makes it the license.
func (h *Holder) LoadLicense(ctx context.Context, doc string) (backend.LicenseState, error) {
	if h.pub == nil {
		return backend.LicenseState{}, backend.OpError(backend.EBADREQUEST, backend.ReplaceOp, "license", "",
			"no license public key configured: start the server with --license-public-key")
	}
	if _, err := Verify(h.pub, doc, h.now()); err != nil {
		return backend.LicenseState{}, backend.NewError(backend.EINVALID, "ValidationError", "license", "", err.Error())
	}
	if err := h.st.SetSetting(ctx, SettingLicense, doc); err != nil {
		return backend.LicenseState{}, err
	}
	return h.LicenseState(ctx), nil
}
