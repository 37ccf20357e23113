package backend

import (
	"encoding/base64"
	"testing"
)

// TestKeySetting: NewKey makes a fresh key of KeySize bytes that DecodeKey
// reads back; a setting that is not base64, or too short, is refused.
func TestKeySetting(t *testing.T) {
	a, b := NewKey(), NewKey()
	if a == b {
		t.Fatal("two keys alike")
	}
	key, ok := DecodeKey(a)
	if !ok || len(key) != KeySize {
		t.Fatalf("DecodeKey(NewKey()) = %d bytes, %v; want %d, true", len(key), ok, KeySize)
	}
	if base64.StdEncoding.EncodeToString(key) != a {
		t.Error("decoded key does not encode back to the setting")
	}
	for _, bad := range []string{"", "not base64!", base64.StdEncoding.EncodeToString(make([]byte, KeySize-1))} {
		if key, ok := DecodeKey(bad); ok || key != nil {
			t.Errorf("DecodeKey(%q) = %x, %v; want refused", bad, key, ok)
		}
	}
	if _, ok := DecodeKey(base64.StdEncoding.EncodeToString(make([]byte, 2*KeySize))); !ok {
		t.Error("a longer key refused")
	}
}
