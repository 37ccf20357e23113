package gateway

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/provgate/provgate/policies"
)

// hiding hides the native key "native-m2" (as a tenant would) and, once
// revoked is set, refuses everything (the caller's role was taken away).
type hiding struct {
	allowAll
	revoked bool
}

func (h *hiding) Decide(_ context.Context, in policies.Input) (policies.Decision, error) {
	if in.Object != nil && in.Object.Key == "native-m2" {
		return policies.Decision{NotFound: true, Reasons: []string{}}, nil
	}
	if h.revoked {
		return policies.Decision{Reasons: []string{"Requires: something"}}, nil
	}
	return policies.Decision{Allow: true, Reasons: []string{}}, nil
}

func errorOf(t *testing.T, body []byte) apiError {
	t.Helper()
	var e apiError
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("error body %s: %v", body, err)
	}
	return e
}

// TestHiddenBeforeBodyErrors: a hidden object is not found, named as the
// caller named it, whatever the body holds; a visible one gets the body
// error.
func TestHiddenBeforeBodyErrors(t *testing.T) {
	dec := &hiding{}
	s := New(Options{Logger: slog.New(slog.DiscardHandler), Deps: Deps{Auth: dec, Policy: dec, Resolver: keyResolver{},
		Objects: recObjects{&recorder{}}, Params: recObjects{&recorder{}}}})
	for _, tc := range []struct {
		method, uri, body string
		status            int
		key               string
	}{
		{"GET", "/api/v3/machines/Name:m2", "", 404, "Name:m2"},
		{"PATCH", "/api/v3/machines/Name:m2", "{", 404, "Name:m2"},
		{"PATCH", "/api/v3/machines/Name:m2", `[{"op":"bogus"}]`, 404, "Name:m2"},
		{"PATCH", "/api/v3/machines/Name:m2/params", `"x"`, 404, "Name:m2"},
		{"PUT", "/api/v3/machines/Name:m2", "[]", 404, "Name:m2"},
		{"PATCH", "/api/v3/machines/Name:m3", "{", 400, "native-m3"},
		{"PUT", "/api/v3/machines/Name:m3", "[]", 400, "native-m3"},
	} {
		ctx := serve(s, tc.method, tc.uri, []byte(tc.body))
		if ctx.Response.StatusCode() != tc.status {
			t.Fatalf("%s %s %q: %d %s, want %d", tc.method, tc.uri, tc.body, ctx.Response.StatusCode(), ctx.Response.Body(), tc.status)
		}
		if e := errorOf(t, ctx.Response.Body()); e.Key != tc.key || e.Model != "machines" || (tc.status == 404 && (e.Type != tc.method ||
			len(e.Messages) != 1 || e.Messages[0] != "Not Found")) {
			t.Errorf("%s %s %q: %+v", tc.method, tc.uri, tc.body, e)
		}
	}
}
