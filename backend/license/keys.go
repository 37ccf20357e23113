package license

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/provgate/provgate/backend/atomicfile"
)

// GenerateKey returns a new ed25519 key pair for signing licenses.
func GenerateKey() (ed25519.PublicKey, ed25519.PrivateKey, error) {
	return ed25519.GenerateKey(rand.Reader)
}

// EncodePrivateKey returns priv as a PKCS #8 "PRIVATE KEY" PEM block, the
// form openssl and most tools read.
func EncodePrivateKey(priv ed25519.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, fmt.Errorf("encode private key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// EncodePublicKey returns pub as a PKIX "PUBLIC KEY" PEM block.
func EncodePublicKey(pub ed25519.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("encode public key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
}

// ParsePrivateKey reads a PKCS #8 PEM ed25519 private key.
func ParsePrivateKey(data []byte) (ed25519.PrivateKey, error) {
	return parsePEM[ed25519.PrivateKey](data, "PRIVATE KEY", "private", x509.ParsePKCS8PrivateKey)
}

// ParsePublicKey reads a PKIX PEM ed25519 public key.
func ParsePublicKey(data []byte) (ed25519.PublicKey, error) {
	return parsePEM[ed25519.PublicKey](data, "PUBLIC KEY", "public", x509.ParsePKIXPublicKey)
}

// parsePEM reads the one PEM block of type blockType in data with parse and
// requires a key of type K; which names the key in errors.
func parsePEM[K any](data []byte, blockType, which string, parse func([]byte) (any, error)) (K, error) {
	var zero K
	block, _ := pem.Decode(data)
	if block == nil || block.Type != blockType {
		return zero, fmt.Errorf("no PEM %q block found", blockType)
	}
	key, err := parse(block.Bytes)
	if err != nil {
		return zero, fmt.Errorf("parse %s key: %w", which, err)
	}
	k, ok := key.(K)
	if !ok {
		return zero, fmt.Errorf("%s key is %T, want ed25519", which, key)
	}
	return k, nil
}

// LoadPrivateKey reads an ed25519 private key file; errors name the file.
func LoadPrivateKey(path string) (ed25519.PrivateKey, error) {
	return loadKey(path, "private key", ParsePrivateKey)
}

// LoadPublicKey reads an ed25519 public key file; errors name the file.
func LoadPublicKey(path string) (ed25519.PublicKey, error) {
	return loadKey(path, "license public key", ParsePublicKey)
}

// loadKey reads the key file at path with parse; errors start with what.
func loadKey[K any](path, what string, parse func([]byte) (K, error)) (K, error) {
	var zero K
	data, err := os.ReadFile(path)
	if err != nil {
		return zero, fmt.Errorf("%s: %w", what, err)
	}
	k, err := parse(data)
	if err != nil {
		return zero, fmt.Errorf("%s %s: %w", what, path, err)
	}
	return k, nil
}

// LoadFile reads the license document at path and verifies it with pub at
// now. Like Verify, it returns the decoded license along with ErrExpired and
// ErrNotYetValid.
func LoadFile(pub ed25519.PublicKey, path string, now time.Time) (License, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return License{}, fmt.Errorf("license: %w", err)
	}
	l, err := Verify(pub, strings.TrimSpace(string(data)), now)
	if err != nil {
		return l, fmt.Errorf("license %s: %w", path, err)
	}
	return l, nil
}

// WriteKeyPair writes priv (mode 0600) and its public key (mode 0644). It
// refuses to replace existing files unless force is set, because losing a
// signing key orphans every license it signed.
func WriteKeyPair(privPath, pubPath string, priv ed25519.PrivateKey, force bool) error {
	privPEM, err := EncodePrivateKey(priv)
	if err != nil {
		return err
	}
	pubPEM, err := EncodePublicKey(priv.Public().(ed25519.PublicKey))
	if err != nil {
		return err
	}
	if filepath.Clean(privPath) == filepath.Clean(pubPath) {
		return errors.New("private and public key paths are the same file")
	}
	if !force {
		for _, p := range []string{privPath, pubPath} {
			if _, err := os.Lstat(p); err == nil {
				return fmt.Errorf("%s already exists (use --force to overwrite)", p)
			} else if !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
	}
	if err := atomicfile.WriteFile(privPath, privPEM, 0o600); err != nil {
		return err
	}
	return atomicfile.WriteFile(pubPath, pubPEM, 0o644)
}
