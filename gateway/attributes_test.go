package gateway

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/provgate/provgate/backend"
	"github.com/provgate/provgate/gateway/claims"
	"github.com/provgate/provgate/policies"
)

// paramResolver answers Current for param definitions only.
type paramResolver struct{ secure map[string]bool }

func (r paramResolver) NativeKey(context.Context, string, string) (string, error) { return "", nil }
func (r paramResolver) JobMachine(context.Context, string) (string, error)        { return "", nil }
func (r paramResolver) Current(_ context.Context, prefix, key string) ([]byte, error) {
	if key == "broken" {
		return nil, backend.Errorf(backend.EUNAVAILABLE, "store down")
	}
	s, ok := r.secure[key]
	if prefix != backend.PrefixParams || !ok {
		return nil, backend.NotFound(backend.ReadOp, prefix, key)
	}
	return json.Marshal(map[string]any{"Name": key, "Secure": s})
}

func obj(t *testing.T, s string) map[string]any {
	t.Helper()
	m, err := decodeObject([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// The proposed object is the stored one with the write applied, for every
// kind of write the gateway models; a body that does not apply proposes
// nothing.
func TestPropose(t *testing.T) {
	stored := `{"Name": "m1", "Meta": {"a": "1"}, "Params": {"p": 1, "q": "x"}}`
	tests := []struct {
		name string
		res  claims.Result
		body string
		want string // "" for none
	}{
		{"create", claims.Result{Proposal: claims.ProposeBody}, `{"Name": "m2"}`, `{"Name": "m2"}`},
		{"put", claims.Result{Proposal: claims.ProposeBody, Key: "m1"}, `{"Name": "m1", "Description": "d"}`, `{"Name": "m1", "Description": "d"}`},
		{"patch", claims.Result{Proposal: claims.ProposePatch}, `[{"op": "replace", "path": "/Name", "value": "m9"}]`,
			`{"Name": "m9", "Meta": {"a": "1"}, "Params": {"p": 1, "q": "x"}}`},
		{"meta patch", claims.Result{Proposal: claims.ProposePatch, PatchRoot: "/Meta"}, `[{"op": "add", "path": "/protected", "value": "true"}]`,
			`{"Name": "m1", "Meta": {"a": "1", "protected": "true"}, "Params": {"p": 1, "q": "x"}}`},
		{"params patch", claims.Result{Proposal: claims.ProposePatch, PatchRoot: "/Params"}, `[{"op": "remove", "path": "/q"}]`,
			`{"Name": "m1", "Meta": {"a": "1"}, "Params": {"p": 1}}`},
		{"params replaced", claims.Result{Proposal: claims.ProposeParams}, `{"z": true}`,
			`{"Name": "m1", "Meta": {"a": "1"}, "Params": {"z": true}}`},
		{"param set", claims.Result{Proposal: claims.ProposeParam, Name: "a/b"}, `"v"`,
			`{"Name": "m1", "Meta": {"a": "1"}, "Params": {"p": 1, "q": "x", "a/b": "v"}}`},
		{"param deleted", claims.Result{Proposal: claims.ProposeParam, Name: "p"}, ``,
			`{"Name": "m1", "Meta": {"a": "1"}, "Params": {"q": "x"}}`},
		{"failing patch", claims.Result{Proposal: claims.ProposePatch}, `[{"op": "test", "path": "/Name", "value": "no"}]`, ""},
		{"malformed body", claims.Result{Proposal: claims.ProposeParam, Name: "p"}, `{`, ""},
		{"no write", claims.Result{}, `{"Name": "m2"}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := propose(tt.res, obj(t, stored), []byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			if tt.want == "" {
				if got != nil {
					t.Fatalf("proposed %v, want none", got)
				}
				return
			}
			if want := obj(t, tt.want); !reflect.DeepEqual(got, want) {
				t.Errorf("got %v\nwant %v", got, want)
			}
		})
	}
}

// Secure values never reach the policy: sealed ones, new values of params
// stored sealed, and values of params defined Secure are masked; an
// unreadable definition counts as secure.
func TestMaskSecure(t *testing.T) {
	r := paramResolver{secure: map[string]bool{"vault": true, "plain": false}}
	sealedValue := map[string]any{"Key": "k1", "Nonce": "n", "Payload": "p"}
	was := map[string]any{"Params": map[string]any{"old-secret": sealedValue}}
	got := maskSecure(context.Background(), r, map[string]any{"Params": map[string]any{
		"sealed": sealedValue, "old-secret": "new plain value", "vault": "hunter2", "plain": "visible", "undefined": "visible too", "broken": "unknown",
	}}, was)
	want := map[string]any{"Params": map[string]any{
		"sealed": policies.MaskedValue(), "old-secret": policies.MaskedValue(), "vault": policies.MaskedValue(),
		"broken": policies.MaskedValue(), "plain": "visible", "undefined": "visible too",
	}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v\nwant %v", got, want)
	}

	user := maskSecure(context.Background(), r, map[string]any{"Name": "u", "Password": "pw", "PasswordHash": "h", "Secret": "s"}, nil)
	if want := (map[string]any{"Name": "u", "Password": policies.MaskedValue(), "PasswordHash": policies.MaskedValue(),
		"Secret": policies.MaskedValue()}); !reflect.DeepEqual(user, want) {
		t.Errorf("user credentials: got %v", user)
	}
}
