package objects

import (
	"context"
	"crypto/ecdh"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"

	"golang.org/x/crypto/nacl/box"

	"github.com/provgate/provgate/backend"
)

// Transport keys (docs/design.md §3.9): DRP clients encrypt a secure param
// value before sending it. drpcli's "set ... param" asks GET
// /<prefix>/<key>/pubkey for the object's curve25519 public key and sends
// {"Key","Nonce","Payload"}, a NaCl box (golang.org/x/crypto/nacl/box) sealed
// with an ephemeral key pair: Key is the ephemeral public key (32 bytes),
// Nonce 24 bytes, all base64. The server opens such a value with the
// object's private key and stores it sealed at rest like any clear value.
//
// Each object's key pair is derived from the secure params key with HKDF
// over the object's kind and key, so every replica sharing the store derives
// the same pair, nothing more is stored, and a value boxed for one object
// does not open on another.

// transportSalt separates transport keys from every other use of the key.
const transportSalt = "provgate secure param transport key v1"

// transportKey derives the X25519 private key of the object named by at
// (its name part is ignored: the key is per object, as in DRP).
func (b *secureBox) transportKey(prefix, key string) (*ecdh.PrivateKey, error) {
	info := binding{prefix: prefix, key: key}.aad()
	seed, err := hkdf.Key(sha256.New, b.master, []byte(transportSalt), string(info), 32)
	if err != nil {
		return nil, err
	}
	return ecdh.X25519().NewPrivateKey(seed)
}

// boxedValue is a value a DRP client sealed for a transport key.
type boxedValue struct {
	key     [32]byte
	nonce   [24]byte
	payload []byte
}

// asBoxed reports whether v is a client-sealed NaCl box: the envelope's
// shape with a 32-byte Key, a 24-byte Nonce and a Payload at least one box
// overhead long. The server's own at-rest seals never match (their Key is
// not base64 of 32 bytes).
func asBoxed(v any) (boxedValue, bool) {
	sd, ok := asSecureData(v)
	if !ok {
		return boxedValue{}, false
	}
	k, err1 := base64.StdEncoding.DecodeString(sd.Key)
	n, err2 := base64.StdEncoding.DecodeString(sd.Nonce)
	p, err3 := base64.StdEncoding.DecodeString(sd.Payload)
	if err1 != nil || err2 != nil || err3 != nil || len(k) != 32 || len(n) != 24 || len(p) < box.Overhead {
		return boxedValue{}, false
	}
	var bv boxedValue
	copy(bv.key[:], k)
	copy(bv.nonce[:], n)
	bv.payload = p
	return bv, true
}

var errNotForThisObject = errors.New("not sealed for this object's public key")

// openBoxed opens a client-sealed value sent to prefix/key and decodes the
// JSON inside it.
func (b *secureBox) openBoxed(prefix, key string, bv boxedValue) (any, error) {
	priv, err := b.transportKey(prefix, key)
	if err != nil {
		return nil, err
	}
	var sk [32]byte
	copy(sk[:], priv.Bytes())
	plain, ok := box.Open(nil, bv.payload, &bv.nonce, &bv.key, &sk)
	if !ok {
		return nil, errNotForThisObject
	}
	var v any
	if err := json.Unmarshal(plain, &v); err != nil {
		return nil, errNotForThisObject
	}
	return v, nil
}

// PublicKey returns the curve25519 public key DRP clients seal secure param
// values with for prefix/key (GET /<prefix>/<key>/pubkey). The object must
// exist and have params.
func (s *Params) PublicKey(ctx context.Context, prefix, key string) ([]byte, error) {
	m, err := s.readWithParams(ctx, prefix, key)
	if err != nil {
		return nil, err
	}
	if s.sec == nil {
		return nil, backend.OpError(backend.EUNAVAILABLE, backend.ReadOp, prefix, key,
			"Secure params are not configured on this server")
	}
	priv, err := s.sec.transportKey(m.Prefix(), m.Key())
	if err != nil {
		return nil, err
	}
	return priv.PublicKey().Bytes(), nil
}
