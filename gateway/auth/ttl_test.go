package auth

import (
	"strings"
	"testing"
	"time"

	"github.com/provgate/provgate/backend"
)

func TestParseTTL(t *testing.T) {
	const (
		def = time.Hour
		max = 365 * 24 * time.Hour
		day = 24 * time.Hour
	)
	tests := []struct {
		in   string
		want time.Duration
		msg  string // substring of the error, when one is wanted
	}{
		{"", def, ""},
		{"  ", def, ""},
		{"3600", time.Hour, ""},
		{"7200", 2 * time.Hour, ""},
		{"600", 10 * time.Minute, ""},
		{"1h", time.Hour, ""},
		{"30m", 30 * time.Minute, ""},
		{"1h30m", 90 * time.Minute, ""},
		{"1.5h", 90 * time.Minute, ""},
		{"90s", 90 * time.Second, ""},
		{"1d", day, ""},
		{"1w", 7 * day, ""},
		{"1mo", 30 * day, ""},
		{"1y", 365 * day, ""},
		{"1d12h", 36 * time.Hour, ""},
		{"2w3d", 17 * day, ""},
		{"1mo1d", 31 * day, ""},
		{"0", 0, "must be positive"},
		{"0s", 0, "must be positive"},
		{"-5m", 0, "must be positive"},
		{"cow", 0, "invalid ttl"},
		{"never", 0, "invalid ttl"},
		{"1x", 0, "invalid ttl"},
		{"d", 0, "invalid ttl"},
		{"1.5d", 0, "invalid ttl"},
		{"1d 2h", 0, "invalid ttl"},
		{"1y1s", 0, "exceeds the maximum"},
		{"2y", 0, "exceeds the maximum"},
		{"99999999999999999999", 0, "exceeds the maximum"},
		{"9223372036854775807d", 0, "exceeds the maximum"},
		{"100000000000h", 0, "exceeds the maximum"}, // beyond what time.ParseDuration holds
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseTTL(tt.in, def, max)
			if tt.msg != "" {
				e := wantCode(t, err, backend.EBADREQUEST)
				if !strings.Contains(e.Error(), tt.msg) {
					t.Errorf("got %q, want it to say %q", e.Error(), tt.msg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
	t.Run("no maximum", func(t *testing.T) {
		got, err := ParseTTL("3y", def, 0)
		if err != nil || got != 3*365*day {
			t.Errorf("got %s, %v", got, err)
		}
	})
}

func TestAuthenticatorParseTTL(t *testing.T) {
	a := New(newFakeSecrets(), Options{DefaultTTL: 2 * time.Hour, MaxTTL: 24 * time.Hour})
	tests := []struct {
		in   string
		want time.Duration
		code string
	}{
		{"", 2 * time.Hour, ""},
		{"1d", 24 * time.Hour, ""},
		{"2d", 0, backend.EBADREQUEST},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := a.ParseTTL(tt.in)
			if code := backend.ErrorCode(err); code != tt.code || got != tt.want {
				t.Errorf("got %s %q, want %s %q", got, code, tt.want, tt.code)
			}
		})
	}
}
