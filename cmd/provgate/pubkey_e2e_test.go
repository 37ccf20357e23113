package main

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"golang.org/x/crypto/nacl/box"
)

// e2eSeal seals v for pub as drpcli does before setting a secure param (a
// NaCl box from an ephemeral key pair, fields base64).
func e2eSeal(t *testing.T, pub []byte, v any) map[string]any {
	t.Helper()
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

// pubkeyOf reads GET <obj>/pubkey: a JSON string holding the base64 key, as
// drpcli decodes it into []byte.
func pubkeyOf(t *testing.T, r resp) []byte {
	t.Helper()
	if !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("pubkey Content-Type %q", r.Header.Get("Content-Type"))
	}
	var k []byte
	r.JSON(t, &k)
	if len(k) != 32 {
		t.Fatalf("pubkey %s is %d bytes, want 32", r.Body, len(k))
	}
	return k
}

// TestE2ESecureParamPubkey: drpcli's secure param write (GET /params/<name>,
// GET <obj>/pubkey, POST the sealed value) works end to end; the key needs
// updateSecure, a tenant's hidden object answers 404 like a missing one,
// and a value sealed for one object's key is refused on another.
func TestE2ESecureParamPubkey(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, s *tserver) {
		s.Must(201, "POST", "/params", map[string]any{"Name": "sec/pw", "Secure": true, "Schema": map[string]any{"type": "string"}}, admin())
		var m1, m2, m3 struct{ Uuid string }
		s.Must(201, "POST", "/machines", map[string]any{"Name": "pk-m1"}, admin()).JSON(t, &m1)
		s.Must(201, "POST", "/machines", map[string]any{"Name": "pk-m2"}, admin()).JSON(t, &m2)
		s.Must(201, "POST", "/machines", map[string]any{"Name": "pk-m3"}, admin()).JSON(t, &m3)

		t.Run("drpcli set param flow", func(t *testing.T) {
			var def struct{ Secure bool }
			s.Must(200, "GET", "/params/sec/pw", nil, admin()).JSON(t, &def)
			if !def.Secure {
				t.Fatal("param not secure")
			}
			pk := pubkeyOf(t, s.Must(200, "GET", "/machines/"+m1.Uuid+"/pubkey", nil, admin()))
			if again := pubkeyOf(t, s.Must(200, "GET", "/machines/Name:pk-m1/pubkey", nil, admin())); string(again) != string(pk) {
				t.Fatal("the same machine by Name: has another key")
			}
			s.Must(200, "POST", "/machines/"+m1.Uuid+"/params/sec/pw", e2eSeal(t, pk, "hunter2"), admin())
			if r := s.Must(200, "GET", "/machines/"+m1.Uuid+"/params/sec/pw", nil, admin()); strings.Contains(r.String(), "hunter2") {
				t.Fatalf("sealed value shown without decode: %s", r)
			}
			var got any
			s.Must(200, "GET", "/machines/"+m1.Uuid+"/params/sec/pw?decode=true", nil, admin()).JSON(t, &got)
			if got != "hunter2" {
				t.Fatalf("decoded %v", got)
			}
			// A value sealed for m1 does not open on m3.
			r := s.Must(422, "POST", "/machines/"+m3.Uuid+"/params/sec/pw", e2eSeal(t, pk, "moved"), admin())
			if !strings.Contains(r.String(), "not sealed with this object's public key") {
				t.Fatalf("refusal %s", r)
			}
		})

		s.AddRole("pk-reader", [3]string{"machines", "get,list,getSecure,update", "*"})
		s.AddUser("pk-reader", "pk-reader-pw", "pk-reader")
		s.AddRole("pk-all", [3]string{"machines", "*", "*"})
		s.AddUser("pk-tenant", "pk-tenant-pw", "pk-all")
		s.Must(201, "POST", "/tenants", map[string]any{"Name": "pk-t", "Users": []string{"pk-tenant"},
			"Members": map[string][]string{"machines": {m3.Uuid}}}, admin())

		t.Run("needs updateSecure", func(t *testing.T) {
			r := s.Must(403, "GET", "/machines/"+m1.Uuid+"/pubkey", nil, basic("pk-reader", "pk-reader-pw"))
			if !strings.Contains(r.String(), "updateSecure") {
				t.Fatalf("refusal does not name the claim: %s", r)
			}
		})
		t.Run("tenant: hidden looks missing", func(t *testing.T) {
			who := basic("pk-tenant", "pk-tenant-pw")
			pubkeyOf(t, s.Must(200, "GET", "/machines/"+m3.Uuid+"/pubkey", nil, who))
			const missing = "00000000-0000-4000-8000-000000000000"
			hidden := s.Must(404, "GET", "/machines/"+m2.Uuid+"/pubkey", nil, who)
			gone := s.Must(404, "GET", "/machines/"+missing+"/pubkey", nil, who)
			if strings.ReplaceAll(string(gone.Body), missing, m2.Uuid) != string(hidden.Body) {
				t.Fatalf("hidden %s, missing %s", hidden, gone)
			}
		})
	}, licenseArgs(t)...)
}
