package objects

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"golang.org/x/crypto/nacl/box"

	"github.com/provgate/provgate/backend"
)

// clientSeal seals v for the public key pub as a DRP client does before it
// sets a secure param: a NaCl box from a fresh ephemeral key pair, sent as
// {"Key","Nonce","Payload"} with base64 fields.
func clientSeal(t *testing.T, pub []byte, v any) map[string]any {
	t.Helper()
	if len(pub) != 32 {
		t.Fatalf("public key is %d bytes, want 32", len(pub))
	}
	plain, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	ephPub, ephPriv, err := box.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	var peer [32]byte
	copy(peer[:], pub)
	var nonce [24]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		t.Fatal(err)
	}
	return map[string]any{
		"Key":     base64.StdEncoding.EncodeToString(ephPub[:]),
		"Nonce":   base64.StdEncoding.EncodeToString(nonce[:]),
		"Payload": base64.StdEncoding.EncodeToString(box.Seal(nil, plain, &nonce, &peer, ephPriv)),
	}
}

// TestPublicKeySealedParams: a value sealed by a client with an object's
// public key is opened, checked against the param's schema and stored
// sealed at rest; a value sealed for another object's key is refused.
func TestPublicKeySealedParams(t *testing.T) {
	each(t, func(t *testing.T, e env) {
		ctx := sys()
		mustCreate(t, e, "params", `{"Name":"sec/pw","Secure":true,"Schema":{"type":"string"}}`)
		m1 := mustCreate(t, e, "machines", `{"Name":"m1"}`).(*backend.Machine)
		m2 := mustCreate(t, e, "machines", `{"Name":"m2"}`).(*backend.Machine)
		mustCreate(t, e, "profiles", `{"Name":"prof"}`)

		pk1, err := e.svc.Params.PublicKey(ctx, "machines", m1.Uuid)
		if err != nil {
			t.Fatal(err)
		}
		again, _ := e.svc.Params.PublicKey(ctx, "machines", "Name:m1")
		pk2, _ := e.svc.Params.PublicKey(ctx, "machines", m2.Uuid)
		pkProf, _ := e.svc.Params.PublicKey(ctx, "profiles", "prof")
		if !bytes.Equal(pk1, again) || bytes.Equal(pk1, pk2) || bytes.Equal(pk1, pkProf) || len(pkProf) != 32 {
			t.Fatalf("keys: same object by two keys must match, other objects must differ: %x %x %x %x", pk1, again, pk2, pkProf)
		}

		t.Run("set, stored sealed, decoded", func(t *testing.T) {
			out, err := e.params().SetParam(ctx, "machines", m1.Uuid, "sec/pw", clientSeal(t, pk1, "hunter2"))
			if err != nil {
				t.Fatal(err)
			}
			sd, ok := asSecureData(out)
			if !ok || !strings.HasPrefix(sd.Key, "v2.") {
				t.Fatalf("reply %v is not the at-rest seal", out)
			}
			raw := toJSON(t, rawRecord(t, e, "machines", m1.Uuid))
			if strings.Contains(raw, "hunter2") {
				t.Fatalf("clear value stored: %s", raw)
			}
			v, err := e.params().GetParam(ctx, "machines", m1.Uuid, "sec/pw", false, true)
			if err != nil || v != "hunter2" {
				t.Fatalf("decoded %v %v", v, err)
			}
		})
		t.Run("patch of the params map (drpcli --ref)", func(t *testing.T) {
			patch := toJSON(t, []map[string]any{{"op": "add", "path": "/sec~1pw", "value": clientSeal(t, pkProf, "pp")}})
			if _, err := e.params().PatchParams(ctx, "profiles", "prof", []byte(patch)); err != nil {
				t.Fatal(err)
			}
			if v, _ := e.params().GetParam(ctx, "profiles", "prof", "sec/pw", false, true); v != "pp" {
				t.Fatalf("decoded %v", v)
			}
		})
		t.Run("schema checks the opened value", func(t *testing.T) {
			_, err := e.params().SetParam(ctx, "machines", m1.Uuid, "sec/pw", clientSeal(t, pk1, 42))
			wantErr(t, err, backend.EINVALID, "ValidationError", "Invalid value for param sec/pw")
		})
		t.Run("sealed for another object", func(t *testing.T) {
			_, err := e.params().SetParam(ctx, "machines", m2.Uuid, "sec/pw", clientSeal(t, pk1, "stolen"))
			wantErr(t, err, backend.EINVALID, "ValidationError", "not sealed with this object's public key")
			if v, _ := e.params().GetParam(ctx, "machines", m2.Uuid, "sec/pw", false, true); v != nil {
				t.Fatalf("m2 got %v", v)
			}
		})
		t.Run("damaged payload", func(t *testing.T) {
			sd := clientSeal(t, pk1, "x")
			p, _ := base64.StdEncoding.DecodeString(sd["Payload"].(string))
			p[0] ^= 1
			sd["Payload"] = base64.StdEncoding.EncodeToString(p)
			_, err := e.params().SetParam(ctx, "machines", m1.Uuid, "sec/pw", sd)
			wantErr(t, err, backend.EINVALID, "ValidationError", "not sealed with this object's public key")
		})
		t.Run("missing object and kinds without params", func(t *testing.T) {
			_, err := e.svc.Params.PublicKey(ctx, "machines", "Name:nope")
			wantErr(t, err, backend.ENOTFOUND, "", "Not Found")
			_, err = e.svc.Params.PublicKey(ctx, "users", "rocketskates")
			wantErr(t, err, backend.ENOTFOUND, "", "have no params")
		})
	})
}
