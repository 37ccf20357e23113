package license

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var (
	t0      = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	t1      = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	testLic = License{Owner: "Acme", Features: []string{"RBAC", "pools", "rbac"}, Issued: t0, Expires: t1, ID: "lic-1"}
)

func mustKey(t *testing.T) (ed25519.PublicKey, ed25519.PrivateKey) {
	t.Helper()
	pub, priv, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return pub, priv
}

func mustSign(t *testing.T, priv ed25519.PrivateKey, l License) string {
	t.Helper()
	doc, err := Sign(priv, l)
	if err != nil {
		t.Fatalf("Sign: %v", err)
	}
	return doc
}

// editPayload changes the signed JSON but keeps the old signature, the way an
// attacker who edits a document would.
func editPayload(t *testing.T, doc string, edit func(m map[string]any)) string {
	t.Helper()
	head, sig, _ := strings.Cut(doc, ".")
	body, err := base64.RawURLEncoding.DecodeString(head)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	body, _ = json.Marshal(m)
	return base64.RawURLEncoding.EncodeToString(body) + "." + sig
}

func TestSignVerifyRoundTrip(t *testing.T) {
	pub, priv := mustKey(t)
	doc := mustSign(t, priv, testLic)
	if strings.ContainsAny(doc, " \n=+/") {
		t.Errorf("document %q is not compact base64url", doc)
	}
	got, err := Verify(pub, "  "+doc+"\n", t0.Add(time.Hour))
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if got.Owner != "Acme" || got.ID != "lic-1" || !got.Issued.Equal(t0) || !got.Expires.Equal(t1) {
		t.Errorf("got %+v", got)
	}
	if want := []string{"pools", "rbac"}; strings.Join(got.Features, ",") != strings.Join(want, ",") {
		t.Errorf("features = %v, want %v", got.Features, want)
	}
	for _, f := range []string{"rbac", "RBAC", " pools "} {
		if !got.Has(f) {
			t.Errorf("Has(%q) = false, want true", f)
		}
	}
	if got.Has("secure-params") {
		t.Error("Has(secure-params) = true, want false")
	}
}

func TestSignDefaults(t *testing.T) {
	pub, priv := mustKey(t)
	doc := mustSign(t, priv, License{Owner: "x", Features: []string{"rbac"}, Expires: time.Now().Add(time.Hour)})
	got, err := Verify(pub, doc, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if got.ID == "" || got.Issued.IsZero() {
		t.Errorf("ID %q, Issued %v: want both filled in", got.ID, got.Issued)
	}
}

func TestSignRejects(t *testing.T) {
	_, priv := mustKey(t)
	tests := []struct {
		name string
		lic  License
		priv ed25519.PrivateKey
		want string
	}{
		{"no owner", License{Expires: t1}, priv, "owner is required"},
		{"no expiry", License{Owner: "a"}, priv, "expiry time is required"},
		{"expiry before issue", License{Owner: "a", Issued: t1, Expires: t0}, priv, "is not after issue time"},
		{"empty feature", License{Owner: "a", Expires: t1, Features: []string{""}}, priv, "empty feature name"},
		{"bad feature", License{Owner: "a", Expires: t1, Features: []string{"rb ac"}}, priv, "only letters"},
		{"short key", License{Owner: "a", Expires: t1}, priv[:10], "private key has 10 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Sign(tt.priv, tt.lic)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Sign error = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestVerifyOutcomes(t *testing.T) {
	pub, priv := mustKey(t)
	otherPub, otherPriv := mustKey(t)
	doc := mustSign(t, priv, testLic)
	head, sig, _ := strings.Cut(doc, ".")

	tests := []struct {
		name string
		pub  ed25519.PublicKey
		doc  string
		now  time.Time
		want error
	}{
		{"valid", pub, doc, t0, nil},
		{"valid just before expiry", pub, doc, t1.Add(-time.Nanosecond), nil},
		{"expired at expiry", pub, doc, t1, ErrExpired},
		{"expired later", pub, doc, t1.AddDate(1, 0, 0), ErrExpired},
		{"not yet valid", pub, doc, t0.Add(-time.Second), ErrNotYetValid},
		{"wrong public key", otherPub, doc, t0, ErrWrongKey},
		{"signed by other key with our key id", pub, editPayload(t, mustSign(t, otherPriv, testLic),
			func(m map[string]any) { m["Key"] = KeyID(pub) }), t0, ErrTampered},
		{"features widened", pub, editPayload(t, doc, func(m map[string]any) {
			m["Features"] = []string{"pools", "rbac", "everything"}
		}), t0, ErrTampered},
		{"expiry extended", pub, editPayload(t, doc, func(m map[string]any) { m["Expires"] = "2099-01-01T00:00:00Z" }),
			t1.AddDate(1, 0, 0), ErrTampered},
		{"signature swapped", pub, head + "." + strings.Split(mustSign(t, priv, License{Owner: "b", Expires: t1}), ".")[1], t0, ErrTampered},
		{"empty", pub, "", t0, ErrMalformed},
		{"one segment", pub, head, t0, ErrMalformed},
		{"three segments", pub, doc + ".x", t0, ErrMalformed},
		{"payload not base64", pub, "!!!." + sig, t0, ErrMalformed},
		{"signature not base64", pub, head + ".***", t0, ErrMalformed},
		{"signature short", pub, head + ".AAAA", t0, ErrMalformed},
		{"payload not json", pub, base64.RawURLEncoding.EncodeToString([]byte("{nope")) + "." + sig, t0, ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Verify(tt.pub, tt.doc, tt.now)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Verify error = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("Verify error = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestVerifyDistinctMessages(t *testing.T) {
	seen := map[string]error{}
	for _, err := range []error{ErrMalformed, ErrWrongKey, ErrTampered, ErrExpired, ErrNotYetValid} {
		if prev, ok := seen[err.Error()]; ok {
			t.Errorf("%v and %v share a message", prev, err)
		}
		seen[err.Error()] = err
	}
}

func TestVerifyReturnsLicenseWhenOutsideWindow(t *testing.T) {
	pub, priv := mustKey(t)
	got, err := Verify(pub, mustSign(t, priv, testLic), t1.Add(time.Hour))
	if !errors.Is(err, ErrExpired) {
		t.Fatalf("err = %v, want ErrExpired", err)
	}
	if got.Owner != "Acme" {
		t.Errorf("expired license not returned: %+v", got)
	}
	if !strings.Contains(err.Error(), "2030-01-01T00:00:00Z") {
		t.Errorf("error %q does not name the expiry", err)
	}
}

func TestValidAt(t *testing.T) {
	l := License{Issued: t0, Expires: t1}
	for _, tt := range []struct {
		now  time.Time
		want bool
	}{{t0.Add(-1), false}, {t0, true}, {t1.Add(-1), true}, {t1, false}} {
		if got := l.ValidAt(tt.now); got != tt.want {
			t.Errorf("ValidAt(%v) = %v, want %v", tt.now, got, tt.want)
		}
	}
}

func TestKeyFiles(t *testing.T) {
	dir := t.TempDir()
	privPath, pubPath := filepath.Join(dir, "k.pem"), filepath.Join(dir, "k.pub")
	pub, priv := mustKey(t)
	if err := WriteKeyPair(privPath, pubPath, priv, false); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]os.FileMode{privPath: 0o600, pubPath: 0o644} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s mode = %o, want %o", path, got, want)
		}
	}
	gotPriv, err := LoadPrivateKey(privPath)
	if err != nil {
		t.Fatal(err)
	}
	gotPub, err := LoadPublicKey(pubPath)
	if err != nil {
		t.Fatal(err)
	}
	if !gotPriv.Equal(priv) || !gotPub.Equal(pub) {
		t.Error("keys do not round-trip")
	}

	t.Run("refuses overwrite", func(t *testing.T) {
		_, other := mustKey(t)
		err := WriteKeyPair(privPath, pubPath, other, false)
		if err == nil || !strings.Contains(err.Error(), "already exists") {
			t.Fatalf("err = %v, want already exists", err)
		}
		if k, _ := LoadPrivateKey(privPath); !k.Equal(priv) {
			t.Error("key was replaced")
		}
	})
	t.Run("force overwrites", func(t *testing.T) {
		_, other := mustKey(t)
		if err := os.Chmod(privPath, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := WriteKeyPair(privPath, pubPath, other, true); err != nil {
			t.Fatal(err)
		}
		if k, _ := LoadPrivateKey(privPath); !k.Equal(other) {
			t.Error("key was not replaced")
		}
		if fi, _ := os.Stat(privPath); fi.Mode().Perm() != 0o600 {
			t.Errorf("mode after force = %o, want 600", fi.Mode().Perm())
		}
	})
	t.Run("same path", func(t *testing.T) {
		if err := WriteKeyPair(privPath, privPath, priv, true); err == nil {
			t.Error("want error for identical paths")
		}
	})
	t.Run("wrong block type", func(t *testing.T) {
		if _, err := LoadPublicKey(privPath); err == nil || !strings.Contains(err.Error(), privPath) {
			t.Errorf("err = %v, want error naming %s", err, privPath)
		}
		if _, err := LoadPrivateKey(pubPath); err == nil || !strings.Contains(err.Error(), pubPath) {
			t.Errorf("err = %v, want error naming %s", err, pubPath)
		}
	})
	t.Run("missing", func(t *testing.T) {
		if _, err := LoadPublicKey(filepath.Join(dir, "nope")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("err = %v, want not exist", err)
		}
	})
}

func TestLoadFile(t *testing.T) {
	pub, priv := mustKey(t)
	path := filepath.Join(t.TempDir(), "license")
	if err := os.WriteFile(path, []byte(mustSign(t, priv, testLic)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadFile(pub, path, t0); err != nil {
		t.Fatal(err)
	}
	_, err := LoadFile(pub, path, t1)
	if !errors.Is(err, ErrExpired) || !strings.Contains(err.Error(), path) {
		t.Errorf("err = %v, want ErrExpired naming the file", err)
	}
}

func FuzzVerify(f *testing.F) {
	pub, priv, err := GenerateKey()
	if err != nil {
		f.Fatal(err)
	}
	doc, err := Sign(priv, testLic)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(doc)
	f.Add("")
	f.Add(".")
	f.Add("e30.AAAA")
	f.Fuzz(func(t *testing.T, doc string) {
		l, err := Verify(pub, doc, t0)
		if err == nil && (l.Owner == "" || !l.ValidAt(t0)) {
			t.Errorf("accepted %q as %+v", doc, l)
		}
	})
}

// TestReadFiles: the key and the document are each read when named; a
// missing file is an error that names it.
func TestReadFiles(t *testing.T) {
	dir := t.TempDir()
	pubPath := filepath.Join(dir, "pub.pem")
	key, _, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	pubPEM, err := EncodePublicKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pubPath, pubPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	docPath := filepath.Join(dir, "license.txt")
	if err := os.WriteFile(docPath, []byte("  the-document \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	pub, doc, err := ReadFiles(pubPath, docPath)
	if err != nil || !pub.Equal(key) || doc != "the-document" {
		t.Fatalf("ReadFiles: %d-byte key, doc %q, %v", len(pub), doc, err)
	}
	if pub, doc, err := ReadFiles("", ""); err != nil || pub != nil || doc != "" {
		t.Fatalf("nothing named: %v %q %v", pub, doc, err)
	}
	if _, _, err := ReadFiles(pubPath, filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("missing document: %v", err)
	}
	if _, _, err := ReadFiles(filepath.Join(dir, "nokey"), docPath); err == nil || !strings.Contains(err.Error(), "nokey") {
		t.Fatalf("missing key: %v", err)
	}
}
