package gateway

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// TestContentTypeChecked: bodies must be JSON (DRP's 400 "Invalid content
// type"); the check runs before authentication, so no service is needed.
func TestContentTypeChecked(t *testing.T) {
	s := New(Options{})
	tests := []struct {
		name, ct string
		want     int
	}{
		{"form", "application/x-www-form-urlencoded", 400},
		{"text", "text/plain", 400},
		{"json passes the check", "application/json; charset=utf-8", 503},
		{"patch json passes the check", "application/json-patch+json", 503},
		{"no type passes the check", "", 503},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest("POST", "/api/v3/machines", strings.NewReader(`{"Name":"m1"}`))
			if tt.ct != "" {
				req.Header.Set("Content-Type", tt.ct)
			}
			res, err := s.App().Test(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(res.Body)
			if res.StatusCode != tt.want {
				t.Fatalf("status %d %s, want %d", res.StatusCode, body, tt.want)
			}
			if tt.want == 400 && !strings.Contains(string(body), "Invalid content type") {
				t.Fatalf("body %s", body)
			}
			if got := res.Header.Get("Content-Type"); got != "application/json" {
				t.Fatalf("Content-Type %q", got)
			}
		})
	}
}

// TestInfoWithoutTCP: /api/v3/info must not depend on the listener being
// TCP (in-memory test connections, unix sockets behind a proxy).
func TestInfoWithoutTCP(t *testing.T) {
	s := New(Options{})
	c := s.App().AcquireCtx(&fasthttp.RequestCtx{})
	defer s.App().ReleaseCtx(c)
	in := infoRoutes{kinds: testKinds}.build(c)
	if in.APIPort != 0 || in.Address != "" || len(in.Features) == 0 || in.Scopes == nil {
		t.Fatalf("info = %+v", in)
	}
}
