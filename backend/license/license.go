// Package license signs and verifies provgate license documents.
//
// A license document is two base64url segments joined by a dot: the JSON
// payload and its ed25519 signature. It is plain ASCII without padding or line
// breaks, so it can be pasted into a file, an environment variable or a ticket
// without being mangled. The payload names the signing key by a short
// fingerprint, so that "signed by another key" is told apart from "changed
// after signing".
package license

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Verification failures. Callers tell them apart with errors.Is; the returned
// errors wrap them with details (dates, key fingerprints).
var (
	ErrMalformed   = errors.New("license is malformed")
	ErrWrongKey    = errors.New("license was signed by a different key")
	ErrTampered    = errors.New("license signature does not match its contents (tampered or corrupted)")
	ErrExpired     = errors.New("license has expired")
	ErrNotYetValid = errors.New("license is not yet valid")
)

// License is what a signed document grants.
type License struct {
	Owner    string
	Features []string
	Issued   time.Time
	Expires  time.Time
	ID       string
}

// payload is the signed JSON. Key is kept out of License because it describes
// the signature, not the grant.
type payload struct {
	ID       string
	Owner    string
	Features []string
	Issued   time.Time
	Expires  time.Time
	Key      string
}

var b64 = base64.RawURLEncoding

// Has reports whether the license grants feature. Feature names are case
// insensitive, matching how they are normalised when signing.
func (l License) Has(feature string) bool {
	return slices.Contains(l.Features, normalizeFeature(feature))
}

// ValidAt reports whether the license's validity window contains now.
// Issued is inclusive and Expires exclusive.
func (l License) ValidAt(now time.Time) bool {
	return !now.Before(l.Issued) && now.Before(l.Expires)
}

// KeyID is the fingerprint a document carries to name the key that signed it:
// the first 8 bytes of the SHA-256 of the raw public key, in hex.
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:8])
}

// Sign validates l and returns its signed document. An empty ID gets a random
// one; a zero Issued becomes the current time (to the second).
func Sign(priv ed25519.PrivateKey, l License) (string, error) {
	if len(priv) != ed25519.PrivateKeySize {
		return "", fmt.Errorf("sign license: private key has %d bytes, want %d", len(priv), ed25519.PrivateKeySize)
	}
	l.Owner = strings.TrimSpace(l.Owner)
	if l.Owner == "" {
		return "", errors.New("sign license: owner is required")
	}
	features, err := normalizeFeatures(l.Features)
	if err != nil {
		return "", fmt.Errorf("sign license: %w", err)
	}
	if l.Issued.IsZero() {
		l.Issued = time.Now().UTC().Truncate(time.Second)
	}
	if l.Expires.IsZero() {
		return "", errors.New("sign license: expiry time is required")
	}
	if !l.Expires.After(l.Issued) {
		return "", fmt.Errorf("sign license: expiry %s is not after issue time %s",
			l.Expires.UTC().Format(time.RFC3339), l.Issued.UTC().Format(time.RFC3339))
	}
	if l.ID == "" {
		l.ID = rand.Text()
	}
	p := payload{
		ID:       l.ID,
		Owner:    l.Owner,
		Features: features,
		Issued:   l.Issued.UTC(),
		Expires:  l.Expires.UTC(),
		Key:      KeyID(priv.Public().(ed25519.PublicKey)),
	}
	body, err := json.Marshal(p)
	if err != nil {
		return "", fmt.Errorf("sign license: %w", err)
	}
	head := b64.EncodeToString(body)
	sig := ed25519.Sign(priv, []byte(head))
	return head + "." + b64.EncodeToString(sig), nil
}

// Verify checks doc against pub and the validity window at now, and returns
// the license it grants. Surrounding white space (from a file or a paste) is
// ignored. For ErrExpired and ErrNotYetValid the decoded license is returned
// with the error, so that callers can report what it would grant.
func Verify(pub ed25519.PublicKey, doc string, now time.Time) (License, error) {
	if len(pub) != ed25519.PublicKeySize {
		return License{}, fmt.Errorf("verify license: public key has %d bytes, want %d", len(pub), ed25519.PublicKeySize)
	}
	doc = strings.TrimSpace(doc)
	head, sigText, ok := strings.Cut(doc, ".")
	if !ok || head == "" || sigText == "" || strings.Contains(sigText, ".") {
		return License{}, fmt.Errorf("%w: want two base64url segments separated by a dot", ErrMalformed)
	}
	body, err := b64.DecodeString(head)
	if err != nil {
		return License{}, fmt.Errorf("%w: payload is not base64url", ErrMalformed)
	}
	sig, err := b64.DecodeString(sigText)
	if err != nil || len(sig) != ed25519.SignatureSize {
		return License{}, fmt.Errorf("%w: signature is not a base64url ed25519 signature", ErrMalformed)
	}
	var p payload
	if err := json.Unmarshal(body, &p); err != nil {
		return License{}, fmt.Errorf("%w: payload is not valid JSON", ErrMalformed)
	}
	if want := KeyID(pub); p.Key != want {
		return License{}, fmt.Errorf("%w: document names key %q, this public key is %q", ErrWrongKey, p.Key, want)
	}
	if !ed25519.Verify(pub, []byte(head), sig) {
		return License{}, ErrTampered
	}
	l := License{ID: p.ID, Owner: p.Owner, Features: p.Features, Issued: p.Issued, Expires: p.Expires}
	if l.Owner == "" || l.Issued.IsZero() || l.Expires.IsZero() {
		return License{}, fmt.Errorf("%w: owner, issue and expiry time are required", ErrMalformed)
	}
	if now.Before(l.Issued) {
		return l, fmt.Errorf("%w: valid from %s", ErrNotYetValid, l.Issued.UTC().Format(time.RFC3339))
	}
	if !now.Before(l.Expires) {
		return l, fmt.Errorf("%w: expired at %s", ErrExpired, l.Expires.UTC().Format(time.RFC3339))
	}
	return l, nil
}

func normalizeFeature(f string) string {
	return strings.ToLower(strings.TrimSpace(f))
}

// normalizeFeatures lower-cases, sorts and de-duplicates feature names so
// that Has does not depend on how the signer typed them.
func normalizeFeatures(in []string) ([]string, error) {
	out := make([]string, 0, len(in))
	for _, f := range in {
		f = normalizeFeature(f)
		if f == "" {
			return nil, errors.New("empty feature name")
		}
		for _, r := range f {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return nil, fmt.Errorf("feature %q: only letters, digits, '-' and '_' are allowed", f)
			}
		}
		out = append(out, f)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}
