package objects

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/provgate/provgate/backend"
)

// secureBox encrypts secure param values at rest with AES-256-GCM. A value is
// stored as {"Key","Nonce","Payload"} (the shape DRP clients know for secure
// params): Key identifies the server key and the seal's form, Nonce and
// Payload are base64.
//
// A seal is bound to the object and the param it belongs to: the additional
// data is (object kind, object key, param name), so an envelope copied to
// another machine, profile, stage, plugin or param does not open there. Key
// is "v2.<key id>" for such seals. The first form (Key "<key id>", bound to
// the param name alone) is only read by MigrateSecureParams, which re-seals
// it at start-up; a client sending it later is refused.
type secureBox struct {
	master   []byte // the secure params key; transport keys derive from it
	aead     cipher.AEAD
	keyID    string // Key of object-bound seals
	legacyID string // Key of the first, name-only seals
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
	id := base64.RawURLEncoding.EncodeToString(sum[:9])
	return &secureBox{master: bytes.Clone(key), aead: aead, keyID: "v2." + id, legacyID: id}, nil
}

// binding names the one place a sealed value may be opened.
type binding struct{ prefix, key, name string }

// aad is the seal's additional data: each part length-prefixed, so no two
// bindings give the same bytes.
func (b binding) aad() []byte {
	out := []byte("provgate secure param v2")
	for _, f := range []string{b.prefix, b.key, b.name} {
		out = binary.AppendUvarint(out, uint64(len(f)))
		out = append(out, f...)
	}
	return out
}

// SecureData is the at-rest (and default wire) form of a secure param value.
type SecureData struct {
	Key     string `json:"Key"`
	Nonce   string `json:"Nonce"`
	Payload string `json:"Payload"`
}

func (b *secureBox) seal(at binding, v any) (map[string]any, error) {
	plain, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, b.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	ct := b.aead.Seal(nil, nonce, plain, at.aad())
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

// ours reports whether sd was sealed with this server's key, in either form.
func (b *secureBox) ours(sd SecureData) bool { return sd.Key == b.keyID || sd.Key == b.legacyID }

var errNotHere = errors.New("sealed for another object")

// open opens an object-bound seal at its binding.
func (b *secureBox) open(at binding, sd SecureData) (any, error) {
	if sd.Key != b.keyID {
		return nil, errNotHere
	}
	return b.openAAD(sd, at.aad())
}

// openLegacy opens a seal of the first form, bound to the param name only.
func (b *secureBox) openLegacy(name string, sd SecureData) (any, error) {
	if sd.Key != b.legacyID {
		return nil, errNotHere
	}
	return b.openAAD(sd, []byte(name))
}

func (b *secureBox) openAAD(sd SecureData, aad []byte) (any, error) {
	nonce, err := base64.StdEncoding.DecodeString(sd.Nonce)
	if err != nil || len(nonce) != b.aead.NonceSize() {
		return nil, errNotHere
	}
	ct, err := base64.StdEncoding.DecodeString(sd.Payload)
	if err != nil {
		return nil, errNotHere
	}
	plain, err := b.aead.Open(nil, nonce, ct, aad)
	if err != nil {
		return nil, errNotHere
	}
	var v any
	if err := json.Unmarshal(plain, &v); err != nil {
		return nil, err
	}
	return v, nil
}

// ownEnvelope looks at a value written to a param. An envelope sealed with
// this server's key is accepted only at its own binding (a GET-modify-PUT
// round trip): then sealed is true and plain is its clear value, for schema
// checks. refused is true for one of this server's envelopes made for
// another place (another object or param, or the first seal form).
func (s *core) ownEnvelope(at binding, v any) (plain any, sealed, refused bool) {
	sd, ok := asSecureData(v)
	if !ok || s.sec == nil || !s.sec.ours(sd) {
		return nil, false, false
	}
	p, err := s.sec.open(at, sd)
	if err != nil {
		return nil, false, true
	}
	return p, true, false
}

// openValue decrypts v when it is an envelope this server sealed for at;
// other values are returned unchanged. A seal of this server's that does
// not open at its place (a value written before seals were bound and never
// migrated, or damaged data) stays sealed: it is logged, never opened.
func (s *core) openValue(at binding, v any) any {
	sd, ok := asSecureData(v)
	if !ok || s.sec == nil || !s.sec.ours(sd) {
		return v
	}
	p, err := s.sec.open(at, sd)
	if err != nil {
		s.log.Warn("secure param does not open at its object", "model", at.prefix, "key", at.key, "param", at.name)
		return v
	}
	return p
}

// MigrateSecureParams re-seals every value still sealed in the first form
// (bound to its param name alone) with its object's binding. Each object is
// rewritten in its own transaction, with the revision read, so concurrent
// writers and other replicas running the same migration are safe; objects
// without such values are not written, so a second run changes nothing. It
// returns how many values were re-sealed.
func (s *Params) MigrateSecureParams(ctx context.Context) (int, error) {
	if s.sec == nil {
		return 0, nil
	}
	legacy := []byte(`"` + s.sec.legacyID + `"`)
	total := 0
	for _, prefix := range s.kinds.Prefixes() {
		if !s.kinds.Kind(prefix).HasParams {
			continue
		}
		const page = 200
		for off := 0; ; off += page {
			recs, _, _, err := s.st.List(ctx, prefix, backend.Query{Offset: off, Limit: page})
			if err != nil {
				return total, err
			}
			for _, rec := range recs {
				if !bytes.Contains(rec.Data, legacy) {
					continue
				}
				n, err := s.migrateObject(ctx, prefix, rec.Key)
				if err != nil {
					return total, err
				}
				total += n
			}
			if len(recs) < page {
				break
			}
		}
	}
	return total, nil
}

func (s *Params) migrateObject(ctx context.Context, prefix, key string) (int, error) {
	k := s.kinds.Kind(prefix)
	for attempt := 0; ; attempt++ {
		n, stale := 0, false
		err := s.inTx(ctx, func(ctx context.Context) error {
			n = 0
			rec, err := s.st.Get(ctx, prefix, key)
			if backend.IsCode(err, backend.ENOTFOUND) {
				return nil
			}
			if err != nil {
				return err
			}
			m, err := decodeRecord(k, rec.Data)
			if err != nil {
				return err
			}
			old := clone(m)
			params := *paramsOf(m)
			for name, v := range params {
				sd, ok := asSecureData(v)
				if !ok || sd.Key != s.sec.legacyID {
					continue
				}
				plain, err := s.sec.openLegacy(name, sd)
				if err != nil {
					s.log.Warn("secure param in the first seal form does not open; left as is",
						"model", prefix, "key", key, "param", name)
					continue
				}
				sealed, err := s.sec.seal(binding{prefix, key, name}, plain)
				if err != nil {
					return err
				}
				params[name] = sealed
				n++
			}
			if n == 0 {
				return nil
			}
			data, err := encode(m)
			if err != nil {
				return err
			}
			if _, err := s.st.Update(ctx, prefix, key, rec.Rev, data); err != nil {
				if backend.IsCode(err, backend.ECONFLICT) {
					stale = true
				}
				return err
			}
			emit(ctx, s.event(ctx, "update", m, old))
			return nil
		})
		if err != nil && stale && attempt < s.retries {
			continue
		}
		return n, err
	}
}
