package callback

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/provgate/provgate/backend"
)

// TestGrants: the pieces of a callback configuration that can carry
// machines' secrets, or run a program, and what their writer must hold
// (docs/design.md §5.9, §12.1). A piece changed is a new piece.
func TestGrants(t *testing.T) {
	secrets := []backend.Claim{{Scope: "machines", Action: "get,getSecure", Specific: "*"}}
	exec := []backend.Claim{{Scope: "plugins", Action: "exec", Specific: "cb"}}
	claimsOf := func(g map[string][]backend.Claim) map[string][]backend.Claim {
		out := map[string][]backend.Claim{}
		for k, v := range g {
			out[strings.Fields(k)[0]+" "+strings.Fields(k)[1]] = v
		}
		return out
	}
	tests := []struct {
		name      string
		callbacks map[string]any
		auths     map[string]any
		want      map[string][]backend.Claim
	}{
		{"plain", map[string]any{"hook": map[string]any{"Url": "https://r/{{.Machine.Name}}"}}, nil, map[string][]backend.Claim{}},
		{"decode", map[string]any{"hook": map[string]any{"Url": "https://r/", "Decode": true}}, nil, map[string][]backend.Claim{"callback hook": secrets}},
		{"jobfail", map[string]any{"jobfail": map[string]any{"Url": "https://r/"}}, nil, map[string][]backend.Claim{"callback jobfail": secrets}},
		{"param in Url", map[string]any{"hook": map[string]any{"Url": `https://r/{{ .ParamAsJSON "x" }}`}}, nil, map[string][]backend.Claim{"callback hook": secrets}},
		{"machine params in Url", map[string]any{"hook": map[string]any{"Url": `https://r/{{ index .Machine.Params "x" }}`}}, nil, map[string][]backend.Claim{"callback hook": secrets}},
		{"exec auth", map[string]any{"hook": map[string]any{"Url": "https://r/", "Auth": "a"}},
			map[string]any{"a": map[string]any{"AuthType": "exec", "Path": "/x"}, "b": map[string]any{"AuthType": "basic", "Username": "u"}},
			map[string][]backend.Claim{"exec a": exec}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := claimsOf(Grants(plugin(tt.callbacks, tt.auths))); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
	a := Grants(plugin(map[string]any{"jobfail": map[string]any{"Url": "https://a/"}}, nil))
	b := Grants(plugin(map[string]any{"jobfail": map[string]any{"Url": "https://b/"}}, nil))
	if reflect.DeepEqual(a, b) {
		t.Fatalf("a redirected jobfail callback keeps its key: %v", a)
	}
	if g := Grants(&backend.Plugin{Name: "x", Provider: "other", Params: map[string]any{ParamCallbacks: map[string]any{"jobfail": map[string]any{}}}}); len(g) != 0 {
		t.Fatalf("another provider's plugin: %v", g)
	}
}

// TestDecodeNeedsTheCallersGetSecure: a Decode callback sends decoded
// values, in its body or Url, only for a caller holding machines getSecure
// on the machine; server-internal work (jobfail) decodes.
func TestDecodeNeedsTheCallersGetSecure(t *testing.T) {
	rc := newReceiver(t, nil)
	p := plugin(map[string]any{
		"body": map[string]any{"Url": rc.URL + "/body", "Decode": true},
		"url":  map[string]any{"Url": rc.URL + `/url/{{.Param "secure/param"}}`, "Decode": true},
	}, nil)
	m := testMachine()
	for _, tt := range []struct {
		name   string
		access backend.Access
		sees   bool
	}{
		{"no getSecure", grants{}, false},
		{"getSecure", grants{claims: map[string]bool{"machines getSecure " + m.Uuid: true}}, true},
		{"server-internal", nil, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, nil)
			ctx := context.Background()
			if tt.access != nil {
				ctx = backend.WithAccess(ctx, tt.access)
			}
			before := len(rc.requests())
			for _, c := range []string{"body", "url"} {
				if _, err := e.svc.Do(ctx, p, m, act(c), ""); err != nil {
					t.Fatalf("%s: %v", c, err)
				}
			}
			for _, r := range rc.requests()[before:] {
				sent := r.Path + " " + string(r.Body)
				if strings.Contains(sent, securePlain) != tt.sees {
					t.Fatalf("sent %q: decoded value present %v, want %v", sent, !tt.sees, tt.sees)
				}
			}
		})
	}
}
