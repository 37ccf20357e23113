package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/provgate/provgate/backend/atomicfile"
)

const (
	generatedCertName = "tls.crt"
	generatedKeyName  = "tls.key"
	generatedValidity = 2 * 365 * 24 * time.Hour
)

// loadTLSConfig returns the server TLS configuration: the operator's
// certificate when --tls-cert/--tls-key are set, otherwise the self-signed
// one in the data dir, generated on first start (docs/design.md §15.2).
func loadTLSConfig(cfg Config, logger *slog.Logger) (*tls.Config, error) {
	certFile, keyFile := cfg.TLSCert, cfg.TLSKey
	if certFile == "" {
		certFile = filepath.Join(cfg.DataDir, generatedCertName)
		keyFile = filepath.Join(cfg.DataDir, generatedKeyName)
		if err := ensureSelfSigned(certFile, keyFile, logger); err != nil {
			return nil, err
		}
	}
	cert, err := loadKeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{cert},
		// fasthttp speaks HTTP/1.1 only; announcing h2 would break clients
		// that honour ALPN.
		NextProtos: []string{"http/1.1"},
	}, nil
}

// ensureSelfSigned generates the certificate pair unless both files exist.
// Exactly one of them existing is an error rather than a silent replacement:
// the operator may have put a file there on purpose.
func ensureSelfSigned(certFile, keyFile string, logger *slog.Logger) error {
	certExists, err := exists(certFile)
	if err != nil {
		return err
	}
	keyExists, err := exists(keyFile)
	if err != nil {
		return err
	}
	switch {
	case certExists && keyExists:
		return nil
	case certExists:
		return fmt.Errorf("tls: %s exists but %s does not; remove %s to generate a new pair", certFile, keyFile, certFile)
	case keyExists:
		return fmt.Errorf("tls: %s exists but %s does not; remove %s to generate a new pair", keyFile, certFile, keyFile)
	}
	hosts := []string{"localhost"}
	if h, err := os.Hostname(); err == nil && h != "" && h != "localhost" {
		hosts = append(hosts, h)
	}
	certPEM, keyPEM, err := selfSignedCert(hosts, time.Now(), generatedValidity)
	if err != nil {
		return fmt.Errorf("tls: generate certificate: %w", err)
	}
	// The key is written first so that a crash in between leaves a key
	// without a certificate, which the next start reports instead of using.
	if err := atomicfile.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		return fmt.Errorf("tls: write %s: %w", keyFile, err)
	}
	if err := atomicfile.WriteFile(certFile, certPEM, 0o644); err != nil {
		return fmt.Errorf("tls: write %s: %w", certFile, err)
	}
	logger.Info("generated self-signed TLS certificate", "cert", certFile, "key", keyFile, "hosts", hosts)
	return nil
}

// selfSignedCert returns a PEM certificate and PKCS #8 key (ECDSA P-256) valid
// for hosts plus the loopback addresses.
func selfSignedCert(hosts []string, now time.Time, validity time.Duration) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{Organization: []string{"provgate"}, CommonName: hosts[len(hosts)-1]},
		// Backdated a little so that clients with a slightly slow clock
		// accept it right away.
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		DNSNames:              hosts,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), nil
}

// loadKeyPair reads a certificate and key, reporting which file is at fault:
// tls.X509KeyPair alone does not name files.
func loadKeyPair(certFile, keyFile string) (tls.Certificate, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("tls certificate: %w", err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("tls key: %w", err)
	}
	block, _ := pem.Decode(certPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		return tls.Certificate{}, fmt.Errorf("tls certificate %s: no PEM CERTIFICATE block found (corrupt file?)", certFile)
	}
	leaf, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("tls certificate %s: %v", certFile, err)
	}
	if block, _ := pem.Decode(keyPEM); block == nil {
		return tls.Certificate{}, fmt.Errorf("tls key %s: no PEM private key block found (corrupt file?)", keyFile)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("tls key %s does not fit certificate %s: %v", keyFile, certFile, err)
	}
	if now := time.Now(); now.After(leaf.NotAfter) {
		return tls.Certificate{}, fmt.Errorf("tls certificate %s expired on %s", certFile, leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	return cert, nil
}

func exists(path string) (bool, error) {
	_, err := os.Stat(path)
	if err == nil {
		return true, nil
	}
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return false, err
}
