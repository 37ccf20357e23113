package callback

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/provgate/provgate/backend"
)

// grants is a caller holding the listed claims ("scope action specific").
type grants struct {
	claims map[string]bool
	err    error
}

func (g grants) CanSee(context.Context, string, string) (bool, error) { return true, nil }

func (g grants) Can(_ context.Context, cs ...backend.Claim) (bool, error) {
	if g.err != nil {
		return false, g.err
	}
	for _, c := range cs {
		if !g.claims[c.Scope+" "+c.Action+" "+c.Specific] {
			return false, nil
		}
	}
	return true, nil
}

// Ungranted: grants hands out only what it names exactly.
func (g grants) Ungranted(_ context.Context, gs ...backend.Grant) ([]backend.Claim, error) {
	if g.err != nil {
		return nil, g.err
	}
	var out []backend.Claim
	for _, c := range ungrantedAll(gs) {
		if !g.claims[c.Scope+" "+c.Action+" "+c.Specific] {
			out = append(out, c)
		}
	}
	return out, nil
}

// ungrantedAll lists the claims of gs, as a caller holding nothing is
// answered.
func ungrantedAll(gs []backend.Grant) []backend.Claim {
	var out []backend.Claim
	for _, g := range gs {
		out = append(out, g.Claims...)
	}
	return out
}

// TestRepliesHideSecretsFromCallers: what callbackDo returns never carries a
// secret the caller could not read itself: the machine's decoded secure
// values need "machines getSecure <machine>", the plugin's configuration
// secrets (header values, auth credentials, tokens, URL query keys) need
// "plugins getSecure <plugin>".
func TestRepliesHideSecretsFromCallers(t *testing.T) {
	const (
		apiKey = "hdr-api-key-4471"
		pw     = "basic-pw-8812"
		urlKey = "url-key-0c3e"
	)
	// The receiver echoes the request body, or the request headers and
	// query on /headers.
	echo := newReceiver(t, nil)
	echo.respond = func(w http.ResponseWriter, r *http.Request, n int) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/headers" {
			_ = json.NewEncoder(w).Encode(map[string]any{"headers": r.Header, "query": r.URL.RawQuery})
			return
		}
		_, _ = w.Write(echo.requests()[n-1].Body)
	}
	p := plugin(map[string]any{
		"json":    map[string]any{"Url": echo.URL + "/body", "Decode": true, "JsonResponse": true},
		"string":  map[string]any{"Url": echo.URL + "/body", "Decode": true, "StringResponse": true},
		"base64":  map[string]any{"Url": echo.URL + "/body", "Decode": true},
		"headers": map[string]any{"Url": echo.URL + "/headers?apikey=" + urlKey, "Auth": "b", "JsonResponse": true, "Headers": map[string]any{"X-Api-Key": apiKey, "Accept": "application/json"}},
	}, map[string]any{"b": map[string]any{"AuthType": "basic", "Username": "u", "Password": pw}})
	basicTok := base64.StdEncoding.EncodeToString([]byte("u:" + pw))
	m := testMachine()
	machineClaim := "machines getSecure " + m.Uuid
	pluginClaim := "plugins getSecure cb"

	// read is everything a caller reads from a reply, base64 decoded.
	read := func(out json.RawMessage) string {
		var s string
		if json.Unmarshal(out, &s) == nil {
			if b, err := base64.StdEncoding.DecodeString(s); err == nil {
				return string(out) + string(b)
			}
		}
		return string(out)
	}
	tests := []struct {
		name          string
		access        backend.Access // nil: server-internal work (backend.WithSystem)
		seesMachine   bool
		seesConfigure bool
	}{
		{"no getSecure", grants{}, false, false},
		{"machine getSecure", grants{claims: map[string]bool{machineClaim: true}}, true, false},
		{"plugin getSecure", grants{claims: map[string]bool{pluginClaim: true}}, false, true},
		{"both", grants{claims: map[string]bool{machineClaim: true, pluginClaim: true}}, true, true},
		{"policy error masks", grants{err: errors.New("engine down"), claims: map[string]bool{machineClaim: true, pluginClaim: true}}, false, false},
		{"server-internal", nil, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, nil)
			ctx := backend.WithSystem(context.Background())
			if tt.access != nil {
				ctx = backend.WithAccess(ctx, tt.access)
			}
			for _, c := range []string{"json", "string", "base64"} {
				out, err := e.svc.Do(ctx, p, m, act(c), "")
				if err != nil {
					t.Fatalf("%s: %v", c, err)
				}
				got := read(out)
				if strings.Contains(got, securePlain) != tt.seesMachine {
					t.Errorf("%s reply shows the decoded value: %v, want %v: %s", c, !tt.seesMachine, tt.seesMachine, got)
				}
				if !strings.Contains(got, "node1.example.com") {
					t.Errorf("%s reply lost the rest of the body: %s", c, got)
				}
				if c == "json" && !json.Valid(out) {
					t.Errorf("masked JsonResponse is not JSON: %s", out)
				}
			}
			out, err := e.svc.Do(ctx, p, m, act("headers"), "")
			if err != nil {
				t.Fatal(err)
			}
			for _, sec := range []string{apiKey, basicTok, urlKey} {
				if strings.Contains(string(out), sec) != tt.seesConfigure {
					t.Errorf("headers reply shows %q: %v, want %v: %s", sec, !tt.seesConfigure, tt.seesConfigure, out)
				}
			}
			if !strings.Contains(string(out), "application/json") {
				t.Errorf("a plain header value was masked: %s", out)
			}
		})
	}
}

// TestRedactorForms: secrets are masked as written and as escaped inside
// JSON strings, and a masked JSON document stays JSON with its numbers.
func TestRedactorForms(t *testing.T) {
	r := newRedactor()
	r.addClass(machineSecret, `pa"ss<&>word`, "abc") // "abc" is too short to mask
	for _, text := range []string{`x pa"ss<&>word y`, `{"v":"pa\"ss\u003c\u0026\u003eword"}`, `{"v":"pa\"ss<&>word"}`} {
		if got := r.String(text); strings.Contains(got, "ss<&>") || strings.Contains(got, `ss\u003c`) || !strings.Contains(got, masked) {
			t.Errorf("String(%s) = %s", text, got)
		}
	}
	if got := r.String("abc"); got != "abc" {
		t.Errorf("short value masked: %s", got)
	}
	doc := []byte(`{"n":12345678901234567890,"l":[1.50,"pa\"ss<&>word"],"pa\"ss<&>word":true}`)
	out, err := r.json(doc)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"[REDACTED]":true,"l":[1.50,"[REDACTED]"],"n":12345678901234567890}`; string(out) != want {
		t.Errorf("json = %s, want %s", out, want)
	}
	clean := []byte(`{"b":1,"a":"fine"}`)
	if out, _ := r.json(clean); string(out) != string(clean) {
		t.Errorf("json rewrote a document with nothing to mask: %s", out)
	}
	if only := r.only(func(c secretClass) bool { return c == configSecret }); only.String(`pa"ss<&>word`) != `pa"ss<&>word` {
		t.Error("only kept another class")
	}
}
