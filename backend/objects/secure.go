package objects

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"

	"github.com/provgate/provgate/backend"
)

// secureBox encrypts secure param values at rest with AES-256-GCM. A value is
// stored as {"Key","Nonce","Payload"} (the shape DRP clients know for secure
// params): Key identifies the server key (so a rotated key is detected rather
// than producing garbage), Nonce and Payload are base64. The param name is
// the additional data, so a ciphertext cannot be moved to another param.
type secureBox struct {
	aead  cipher.AEAD
	keyID string
}

func newSecureBox(key []byte) (*secureBox, error) {
	if len(key) != 32 {
		return nil, fmt.Errorf("objects: SecureKey must be 32 bytes, got %d", len(key))
	}
	blk, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(blk)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(append([]byte("provgate secure params key id\x00"), key...))
	return &secureBox{aead: aead, keyID: base64.RawURLEncoding.EncodeToString(sum[:9])}, nil
}

// SecureData is the at-rest (and default wire) form of a secure param value.
type SecureData struct {
	Key     string `json:"Key"`
	Nonce   string `json:"Nonce"`
	Payload string `json:"Payload"`
}

func (b *secureBox) seal(name string, v any) (map[string]any, error) {
	plain, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, b.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	ct := b.aead.Seal(nil, nonce, plain, []byte(name))
	return map[string]any{
		"Key":     b.keyID,
		"Nonce":   base64.StdEncoding.EncodeToString(nonce),
		"Payload": base64.StdEncoding.EncodeToString(ct),
	}, nil
}

// asSecureData reports whether v has exactly the envelope's shape.
func asSecureData(v any) (SecureData, bool) {
	m, ok := v.(map[string]any)
	if !ok || len(m) != 3 {
		return SecureData{}, false
	}
	var sd SecureData
	var okK, okN, okP bool
	sd.Key, okK = m["Key"].(string)
	sd.Nonce, okN = m["Nonce"].(string)
	sd.Payload, okP = m["Payload"].(string)
	return sd, okK && okN && okP
}

func (b *secureBox) open(name string, sd SecureData) (any, error) {
	if sd.Key != b.keyID {
		return nil, fmt.Errorf("encrypted with another key")
	}
	nonce, err := base64.StdEncoding.DecodeString(sd.Nonce)
	if err != nil || len(nonce) != b.aead.NonceSize() {
		return nil, fmt.Errorf("bad nonce")
	}
	ct, err := base64.StdEncoding.DecodeString(sd.Payload)
	if err != nil {
		return nil, fmt.Errorf("bad payload")
	}
	plain, err := b.aead.Open(nil, nonce, ct, []byte(name))
	if err != nil {
		return nil, fmt.Errorf("cannot decrypt")
	}
	var v any
	if err := json.Unmarshal(plain, &v); err != nil {
		return nil, err
	}
	return v, nil
}

// sealValue returns the at-rest form of a value given for the secure param
// name: an envelope this server made is kept as is (a GET-modify-PUT round
// trip), anything else is encrypted. plain is the clear value, for schema
// checks.
func (s *Service) sealValue(name string, v any) (stored, plain any, err error) {
	if s.sec == nil {
		return nil, nil, backend.NewError(backend.EUNAVAILABLE, "ValidationError", "params", name,
			"Secure params are not configured on this server")
	}
	if sd, ok := asSecureData(v); ok {
		p, err := s.sec.open(name, sd)
		if err != nil {
			return nil, nil, fmt.Errorf("secure param %s: %s", name, err.Error())
		}
		return v, p, nil
	}
	sealed, err := s.sec.seal(name, v)
	if err != nil {
		return nil, nil, err
	}
	return sealed, v, nil
}

// openValue decrypts v when it is an envelope this server can open; other
// values are returned unchanged.
func (s *Service) openValue(name string, v any) (any, error) {
	sd, ok := asSecureData(v)
	if !ok || s.sec == nil {
		return v, nil
	}
	p, err := s.sec.open(name, sd)
	if err != nil {
		return nil, backend.NewError(backend.EINTERNAL, "GET", "params", name, "Cannot decode secure param "+name)
	}
	return p, nil
}
