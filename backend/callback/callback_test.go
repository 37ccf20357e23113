package callback

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/provgate/provgate/backend"
	"github.com/provgate/provgate/backend/render"
)

func do(t *testing.T, e *env, p *backend.Plugin, params map[string]any) (json.RawMessage, error) {
	t.Helper()
	m, _ := e.machines.GetMachine(context.Background(), testMachine().Uuid)
	return e.svc.Do(backend.WithSystem(context.Background()), p, m, params, "")
}

func act(name string) map[string]any { return map[string]any{ParamAction: name} }

func TestValidate(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "tok.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho tok\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(t.TempDir(), "evil.sh")
	if err := os.WriteFile(outside, []byte("#!/bin/sh\necho evil\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.sh")
	if err := os.Symlink(outside, link); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		params  map[string]any
		execDir string
		want    []string // substrings, each in some message
	}{
		{"valid", map[string]any{ParamCallbacks: map[string]any{"a": map[string]any{"Url": "https://x.example/{{.Machine.Uuid}}", "Retry": 2}}}, "", nil},
		{"missing callbacks", map[string]any{}, "", []string{"Missing Parameter callback/callbacks"}},
		{"Retries suggests Retry", map[string]any{ParamCallbacks: map[string]any{"a": map[string]any{"Url": "https://x", "Retries": 3}}}, "",
			[]string{`unknown field "Retries" (did you mean "Retry"?)`}},
		{"case-sensitive", map[string]any{ParamCallbacks: map[string]any{"a": map[string]any{"url": "https://x"}}}, "",
			[]string{`unknown field "url" (did you mean "Url"?)`, "Url is required"}},
		{"bad scheme", map[string]any{ParamCallbacks: map[string]any{"a": map[string]any{"Url": "ftp://x/y"}}}, "", []string{"scheme must be http or https"}},
		{"bad template", map[string]any{ParamCallbacks: map[string]any{"a": map[string]any{"Url": "https://x/{{.Machine.Uuid"}}}, "", []string{"Url template"}},
		{"bad method", map[string]any{ParamCallbacks: map[string]any{"a": map[string]any{"Url": "https://x", "Method": "FETCH"}}}, "", []string{"invalid Method"}},
		{"negative numbers", map[string]any{ParamCallbacks: map[string]any{"a": map[string]any{"Url": "https://x", "Retry": -1, "Delay": -1, "Timeout": -5}}}, "",
			[]string{"Retry must not be negative", "Delay must not be negative", "Timeout must not be negative"}},
		{"too many retries", map[string]any{ParamCallbacks: map[string]any{"a": map[string]any{"Url": "https://x", "Retry": MaxRetry + 1}},
			ParamAuths: map[string]any{"j": map[string]any{"AuthType": "json-token", "Url": "https://t", "TokenField": "t", "Retry": 1000000}}}, "",
			[]string{`callback "a": Retry 101 is more than 100`, `auth "j": Retry 1000000 is more than 100`}},
		{"wrong type", map[string]any{ParamCallbacks: map[string]any{"a": map[string]any{"Url": "https://x", "Retry": "3"}}}, "", []string{"field Retry must be an integer"}},
		{"missing auth", map[string]any{ParamCallbacks: map[string]any{"a": map[string]any{"Url": "https://x", "Auth": "nope", "Auths": []any{"gone"}}}}, "",
			[]string{`auth "nope" is not defined`, `auth "gone" is not defined`}},
		{"basic needs Username", map[string]any{ParamCallbacks: map[string]any{}, ParamAuths: map[string]any{"b": map[string]any{"AuthType": "basic", "Password": "pw-secret-1"}}}, "",
			[]string{"basic auth needs Username"}},
		{"json-token needs Url and TokenField", map[string]any{ParamCallbacks: map[string]any{}, ParamAuths: map[string]any{"j": map[string]any{"AuthType": "json-token", "Data": "data-secret-1"}}}, "",
			[]string{"json-token auth needs Url", "json-token auth needs TokenField"}},
		{"unknown AuthType", map[string]any{ParamCallbacks: map[string]any{}, ParamAuths: map[string]any{"x": map[string]any{"AuthType": "oauth"}}}, "", []string{`unknown AuthType "oauth"`}},
		{"exec disabled", map[string]any{ParamCallbacks: map[string]any{}, ParamAuths: map[string]any{"e": map[string]any{"AuthType": "exec", "Path": script}}}, "", []string{"exec auths are disabled"}},
		{"exec inside dir", map[string]any{ParamCallbacks: map[string]any{}, ParamAuths: map[string]any{"e": map[string]any{"AuthType": "exec", "Path": script}}}, dir, nil},
		{"exec outside dir", map[string]any{ParamCallbacks: map[string]any{}, ParamAuths: map[string]any{"e": map[string]any{"AuthType": "exec", "Path": outside}}}, dir, []string{errExecPath.Error()}},
		{"exec dotdot", map[string]any{ParamCallbacks: map[string]any{}, ParamAuths: map[string]any{"e": map[string]any{"AuthType": "exec", "Path": dir + "/../" + filepath.Base(filepath.Dir(outside)) + "/evil.sh"}}}, dir, []string{errExecPath.Error()}},
		{"exec symlink escape", map[string]any{ParamCallbacks: map[string]any{}, ParamAuths: map[string]any{"e": map[string]any{"AuthType": "exec", "Path": link}}}, dir, []string{errExecPath.Error()}},
		{"data-override in config", map[string]any{ParamCallbacks: map[string]any{}, ParamDataOverride: "x"}, "", []string{"only valid as a parameter of the action call"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Validate(tt.params, ValidateOptions{ExecDir: tt.execDir})
			if len(tt.want) == 0 && len(got) > 0 {
				t.Fatalf("Validate = %q, want no problems", got)
			}
			all := strings.Join(got, "\n")
			for _, w := range tt.want {
				if !strings.Contains(all, w) {
					t.Errorf("problems %q lack %q", got, w)
				}
			}
			for _, secret := range []string{"pw-secret-1", "data-secret-1"} {
				if strings.Contains(all, secret) {
					t.Errorf("problems leak a secret: %q", got)
				}
			}
		})
	}
}

func TestActionErrors(t *testing.T) {
	e := newEnv(t, nil)
	p := plugin(map[string]any{"ok": map[string]any{"Url": "https://127.0.0.1:1/"}}, nil)
	tests := []struct {
		name   string
		params map[string]any
		code   string
		msg    string
	}{
		{"missing action", map[string]any{}, backend.EBADREQUEST, "Missing Parameter callback/action"},
		{"non-string action", map[string]any{ParamAction: 12.0}, backend.EBADREQUEST, "callback/action must be a string"},
		{"unknown callback", act("nope"), backend.ENOTFOUND, `Unknown callback "nope"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := do(t, e, p, tt.params)
			be := backend.AsError(err)
			if be.Code != tt.code || be.Type != "INVOKE" || !strings.Contains(be.Error(), tt.msg) {
				t.Errorf("err = %#v, want code %s INVOKE with %q", be, tt.code, tt.msg)
			}
		})
	}
	t.Run("misconfigured callback", func(t *testing.T) {
		p := plugin(map[string]any{"bad": map[string]any{"Url": "ftp://x"}}, nil)
		_, err := do(t, e, p, act("bad"))
		if backend.ErrorCode(err) != backend.ECONFLICT {
			t.Errorf("err = %v, want ECONFLICT", err)
		}
	})
}

func TestRequestShaping(t *testing.T) {
	rc := newReceiver(t, nil)
	tests := []struct {
		name  string
		cb    map[string]any
		check func(t *testing.T, r recorded)
	}{
		{"defaults", map[string]any{"Url": rc.URL + "/hook/{{.Machine.Name}}"}, func(t *testing.T, r recorded) {
			if r.Method != "POST" || r.Path != "/hook/node1.example.com" {
				t.Errorf("got %s %s", r.Method, r.Path)
			}
			if r.Header.Get("Content-Type") != "application/json" || r.Header.Get("Accept") != "application/json" || r.Header.Get("User-Agent") != "provgate-callback" {
				t.Errorf("headers %v", r.Header)
			}
			var m map[string]any
			if err := json.Unmarshal(r.Body, &m); err != nil {
				t.Fatal(err)
			}
			if _, ok := m["Secret"]; ok || bytes.Contains(r.Body, []byte("machine-secret-value")) {
				t.Error("body carries the machine Secret")
			}
			params := m["Params"].(map[string]any)
			if params["own/param"] != "own" || params["profile/param"] != nil {
				t.Errorf("params %v", params)
			}
			if bytes.Contains(r.Body, []byte(securePlain)) {
				t.Error("secure param decoded without Decode")
			}
		}},
		{"aggregate decode exclude", map[string]any{"Url": rc.URL, "Aggregate": true, "Decode": true, "ExcludeParams": []any{"big/param"}}, func(t *testing.T, r recorded) {
			var m struct{ Params map[string]any }
			_ = json.Unmarshal(r.Body, &m)
			if m.Params["profile/param"] != "from-profile" || m.Params["secure/param"] != securePlain {
				t.Errorf("params %v", m.Params)
			}
			if _, ok := m.Params["big/param"]; ok {
				t.Error("excluded param sent")
			}
		}},
		{"no body", map[string]any{"Url": rc.URL, "Method": "GET", "NoBody": true}, func(t *testing.T, r recorded) {
			if r.Method != "GET" || len(r.Body) != 0 || r.Header.Get("Content-Type") != "" {
				t.Errorf("got %s body %q ct %q", r.Method, r.Body, r.Header.Get("Content-Type"))
			}
		}},
		{"headers as given", map[string]any{"Url": rc.URL, "Method": "PUT", "Headers": map[string]any{"X-Custom": "v", "Content-Type": "text/plain"}}, func(t *testing.T, r recorded) {
			if r.Method != "PUT" || r.Header.Get("X-Custom") != "v" || r.Header.Get("Content-Type") != "text/plain" {
				t.Errorf("got %s %v", r.Method, r.Header)
			}
		}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, nil)
			name := fmt.Sprintf("c%d", i)
			if _, err := do(t, e, plugin(map[string]any{name: tt.cb}, nil), act(name)); err != nil {
				t.Fatalf("Do: %v", err)
			}
			reqs := rc.requests()
			tt.check(t, reqs[len(reqs)-1])
		})
	}
}

func TestDataOverride(t *testing.T) {
	rc := newReceiver(t, nil)
	tests := []struct {
		name     string
		cb       map[string]any
		override any
		want     string
		code     string
	}{
		{"object JSON-encoded", nil, map[string]any{"a": 1.0, "s": "{{.Machine.Name}}"}, `{"a":1,"s":"{{.Machine.Name}}"}`, ""},
		{"empty object", nil, map[string]any{}, `{}`, ""},
		{"array", nil, []any{1.0, "x"}, `[1,"x"]`, ""},
		{"number", nil, 42.0, `42`, ""},
		{"string rendered and sent as is", nil, `{"name":"{{.Machine.Name}}","p":{{.ParamAsJSON "profile/param"}}}`, `{"name":"node1.example.com","p":"from-profile"}`, ""},
		{"string secure param without Decode", nil, `{{.Param "secure/param" | toJson}}`, `{"Key":"k","Nonce":"n","Payload":"encrypted"}`, ""},
		{"string secure param with Decode", map[string]any{"Decode": true}, `{{.Param "secure/param"}}`, securePlain, ""},
		{"GetAuthString refused", nil, `{{.GetAuthString "x"}}`, "", backend.EBADREQUEST},
		{"GenerateToken refused", nil, `{{.GenerateToken}}`, "", backend.EBADREQUEST},
		{"hostile template bounded", nil, `{{range 100000000000}}{{end}}`, "", backend.EBADREQUEST},
		{"NoBody ignores override", map[string]any{"NoBody": true}, "x", "", ""},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, nil)
			cb := map[string]any{"Url": rc.URL}
			for k, v := range tt.cb {
				cb[k] = v
			}
			name := fmt.Sprintf("d%d", i)
			before := len(rc.requests())
			_, err := do(t, e, plugin(map[string]any{name: cb}, nil), map[string]any{ParamAction: name, ParamDataOverride: tt.override})
			if tt.code != "" {
				if backend.ErrorCode(err) != tt.code {
					t.Fatalf("err = %v, want %s", err, tt.code)
				}
				if len(rc.requests()) != before {
					t.Error("request sent despite the error")
				}
				return
			}
			if err != nil {
				t.Fatalf("Do: %v", err)
			}
			reqs := rc.requests()
			if got := string(reqs[len(reqs)-1].Body); got != tt.want {
				t.Errorf("body %q, want %q", got, tt.want)
			}
		})
	}
}

func TestResponses(t *testing.T) {
	tests := []struct {
		name string
		body string
		cb   map[string]any
		want string
		code string
	}{
		{"base64 default", `{"x":1}`, nil, `"` + base64.StdEncoding.EncodeToString([]byte(`{"x":1}`)) + `"`, ""},
		{"base64 empty", ``, nil, `""`, ""},
		{"json", "{\"x\": [1, 2]}\n", map[string]any{"JsonResponse": true}, `{"x":[1,2]}`, ""},
		{"json wins over string", `[1]`, map[string]any{"JsonResponse": true, "StringResponse": true}, `[1]`, ""},
		{"json empty is null", ``, map[string]any{"JsonResponse": true}, `null`, ""},
		{"json invalid", `<html>`, map[string]any{"JsonResponse": true}, ``, backend.ECONFLICT},
		{"string", "hello \"world\"", map[string]any{"StringResponse": true}, `"hello \"world\""`, ""},
		{"too large", strings.Repeat("a", 2048), nil, ``, backend.ECONFLICT},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rc := newReceiver(t, func(w http.ResponseWriter, _ *http.Request, _ int) { _, _ = w.Write([]byte(tt.body)) })
			e := newEnv(t, func(o *Options) { o.MaxResponseBytes = 1024 })
			cb := map[string]any{"Url": rc.URL}
			for k, v := range tt.cb {
				cb[k] = v
			}
			name := fmt.Sprintf("r%d", i)
			got, err := do(t, e, plugin(map[string]any{name: cb}, nil), act(name))
			if tt.code != "" {
				if backend.ErrorCode(err) != tt.code {
					t.Fatalf("err = %v, want %s", err, tt.code)
				}
				return
			}
			if err != nil {
				t.Fatalf("Do: %v", err)
			}
			if string(got) != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
}

func TestRetries(t *testing.T) {
	tests := []struct {
		name      string
		fail      int // the first fail requests answer status
		status    int
		retry     int
		wantReqs  int
		wantCode  string
		wantInMsg string
	}{
		{"recovers after 5xx", 2, 503, 2, 3, "", ""},
		{"429 retried", 1, 429, 1, 2, "", ""},
		{"408 retried", 1, 408, 1, 2, "", ""},
		{"5xx exhausted", 10, 500, 2, 3, backend.EUNAVAILABLE, "Callback API returned 500"},
		{"404 not retried", 10, 404, 3, 1, backend.ECONFLICT, "Callback API returned 404"},
		{"400 not retried", 10, 400, 3, 1, backend.EBADREQUEST, "Callback API returned 400"},
		{"422 bad request", 10, 422, 0, 1, backend.EBADREQUEST, "Callback API returned 422"},
		{"403 no more auths", 10, 403, 3, 1, backend.ECONFLICT, "Callback API returned 403"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rc := newReceiver(t, func(w http.ResponseWriter, _ *http.Request, n int) {
				if n <= tt.fail {
					w.WriteHeader(tt.status)
					_, _ = w.Write([]byte("nope"))
					return
				}
				_, _ = w.Write([]byte("fine"))
			})
			e := newEnv(t, nil)
			_, err := do(t, e, plugin(map[string]any{"c": map[string]any{"Url": rc.URL, "Retry": tt.retry}}, nil), act("c"))
			if got := len(rc.requests()); got != tt.wantReqs {
				t.Errorf("requests = %d, want %d", got, tt.wantReqs)
			}
			if got := len(e.attempts()); got != tt.wantReqs {
				t.Errorf("recorded attempts = %d, want %d", got, tt.wantReqs)
			}
			if tt.wantCode == "" {
				if err != nil {
					t.Fatalf("Do: %v", err)
				}
				return
			}
			be := backend.AsError(err)
			if be.Code != tt.wantCode || be.Messages[0] != tt.wantInMsg || be.Type != "INVOKE" {
				t.Errorf("err = %#v, want %s %q", be, tt.wantCode, tt.wantInMsg)
			}
		})
	}
}

func TestTimeoutBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("measures seconds")
	}
	tests := []struct {
		name    string
		handler func(w http.ResponseWriter, r *http.Request, n int)
		max     time.Duration
	}{
		{"hanging target bounded per attempt", func(w http.ResponseWriter, r *http.Request, _ int) {
			select {
			case <-r.Context().Done():
			case <-time.After(10 * time.Second):
			}
		}, 3 * time.Second},
		{"failing target bounded in total", func(w http.ResponseWriter, _ *http.Request, _ int) {
			w.WriteHeader(500)
		}, 3 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rc := newReceiver(t, tt.handler)
			e := newEnv(t, nil)
			start := time.Now()
			_, err := do(t, e, plugin(map[string]any{"c": map[string]any{"Url": rc.URL, "Retry": 5, "Delay": 1, "Timeout": 2}}, nil), act("c"))
			d := time.Since(start)
			if err == nil {
				t.Fatal("want an error")
			}
			if backend.ErrorCode(err) != backend.EUNAVAILABLE {
				t.Errorf("err = %v, want EUNAVAILABLE", err)
			}
			if d > tt.max {
				t.Errorf("took %v, want ≤ %v (Timeout 2s is the total budget)", d, tt.max)
			}
			t.Logf("took %v, %d requests", d, len(rc.requests()))
		})
	}
}

func TestRedirects(t *testing.T) {
	other := newReceiver(t, nil)
	same := newReceiver(t, nil)
	same.respond = func(w http.ResponseWriter, r *http.Request, _ int) {
		switch r.URL.Path {
		case "/cross":
			http.Redirect(w, r, other.URL+"/landed", http.StatusTemporaryRedirect)
		case "/local":
			http.Redirect(w, r, "/landed", http.StatusTemporaryRedirect)
		case "/loop":
			http.Redirect(w, r, "/loop", http.StatusFound)
		default:
			_, _ = w.Write([]byte("ok"))
		}
	}
	auths := map[string]any{"b": map[string]any{"AuthType": "basic", "Username": "u", "Password": "redirect-pw"}}
	cb := func(path string) map[string]any {
		return map[string]any{"Url": same.URL + path, "Auth": "b", "Headers": map[string]any{"X-Api-Token": "hdr-secret"}}
	}
	t.Run("cross host strips credentials", func(t *testing.T) {
		e := newEnv(t, nil)
		if _, err := do(t, e, plugin(map[string]any{"c": cb("/cross")}, auths), act("c")); err != nil {
			t.Fatal(err)
		}
		reqs := other.requests()
		if len(reqs) != 1 {
			t.Fatalf("other host got %d requests", len(reqs))
		}
		if reqs[0].Header.Get("Authorization") != "" || reqs[0].Header.Get("X-Api-Token") != "" {
			t.Errorf("credentials forwarded: %v", reqs[0].Header)
		}
	})
	t.Run("same host keeps them", func(t *testing.T) {
		e := newEnv(t, nil)
		if _, err := do(t, e, plugin(map[string]any{"c": cb("/local")}, auths), act("c")); err != nil {
			t.Fatal(err)
		}
		reqs := same.requests()
		last := reqs[len(reqs)-1]
		if last.Path != "/landed" || last.Header.Get("Authorization") == "" || last.Header.Get("X-Api-Token") != "hdr-secret" {
			t.Errorf("got %s %v", last.Path, last.Header)
		}
	})
	t.Run("hops limited", func(t *testing.T) {
		e := newEnv(t, nil)
		_, err := do(t, e, plugin(map[string]any{"c": cb("/loop")}, auths), act("c"))
		if err == nil || !strings.Contains(err.Error(), "redirects") {
			t.Errorf("err = %v", err)
		}
	})
}

// tokenServer hands out tok-1, tok-2, ... and counts requests.
func tokenServer(t *testing.T, duration bool) (*receiver, *atomic.Int32) {
	var n atomic.Int32
	rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		k := n.Add(1)
		body := map[string]any{"access_token": fmt.Sprintf("tok-%d", k)}
		if duration {
			body["expires_in"] = 3600
		}
		_ = json.NewEncoder(w).Encode(body)
	})
	return rc, &n
}

func TestJSONToken(t *testing.T) {
	auth := func(url string, duration bool) map[string]any {
		a := map[string]any{"AuthType": "json-token", "Url": url, "Method": "POST", "Data": `{"client_secret":"json-data-secret"}`,
			"Query": "grant=client", "TokenField": "access_token"}
		if duration {
			a["DurationField"] = "expires_in"
		}
		return a
	}
	t.Run("cached with DurationField", func(t *testing.T) {
		ts, n := tokenServer(t, true)
		target := newReceiver(t, nil)
		e := newEnv(t, nil)
		p := plugin(map[string]any{"c": map[string]any{"Url": target.URL, "Auth": "j"}, "d": map[string]any{"Url": target.URL, "Auths": []any{"j"}}}, map[string]any{"j": auth(ts.URL, true)})
		for _, c := range []string{"c", "d", "c"} {
			if _, err := do(t, e, p, act(c)); err != nil {
				t.Fatal(err)
			}
		}
		if n.Load() != 1 {
			t.Errorf("token fetched %d times, want 1 (shared cache)", n.Load())
		}
		tr := ts.requests()[0]
		if tr.Method != "POST" || tr.Query != "grant=client" || !strings.Contains(string(tr.Body), "json-data-secret") {
			t.Errorf("token request %+v", tr)
		}
		if h := tr.Header; h.Get("Content-Type") != "application/json" || h.Get("Accept") != "application/json" || h.Get("User-Agent") != userAgent {
			t.Errorf("token request headers %v", h)
		}
		for _, r := range target.requests() {
			if r.Header.Get("Authorization") != "Bearer tok-1" {
				t.Errorf("Authorization %q", r.Header.Get("Authorization"))
			}
		}
	})
	t.Run("not cached without DurationField", func(t *testing.T) {
		ts, n := tokenServer(t, false)
		target := newReceiver(t, nil)
		e := newEnv(t, nil)
		p := plugin(map[string]any{"c": map[string]any{"Url": target.URL, "Auth": "j"}}, map[string]any{"j": auth(ts.URL, false)})
		for range 2 {
			if _, err := do(t, e, p, act("c")); err != nil {
				t.Fatal(err)
			}
		}
		if n.Load() != 2 {
			t.Errorf("token fetched %d times, want 2", n.Load())
		}
	})
	t.Run("GET without Data", func(t *testing.T) {
		ts, _ := tokenServer(t, false)
		target := newReceiver(t, nil)
		e := newEnv(t, nil)
		p := plugin(map[string]any{"c": map[string]any{"Url": target.URL, "Auth": "j"}},
			map[string]any{"j": map[string]any{"AuthType": "json-token", "Url": ts.URL, "TokenField": "access_token"}})
		if _, err := do(t, e, p, act("c")); err != nil {
			t.Fatal(err)
		}
		tr := ts.requests()[0]
		if tr.Method != "GET" || len(tr.Body) != 0 || tr.Header.Get("Content-Type") != "" || tr.Header.Get("Accept") != "application/json" {
			t.Errorf("token request %s, body %q, headers %v", tr.Method, tr.Body, tr.Header)
		}
		if got := target.requests()[0].Header.Get("Authorization"); got != "Bearer tok-1" {
			t.Errorf("Authorization %q", got)
		}
	})
	t.Run("401 drops the cached token and refetches once", func(t *testing.T) {
		ts, n := tokenServer(t, true)
		target := newReceiver(t, func(w http.ResponseWriter, r *http.Request, _ int) {
			if r.Header.Get("Authorization") != "Bearer tok-2" {
				w.WriteHeader(401)
				return
			}
			_, _ = w.Write([]byte("ok"))
		})
		e := newEnv(t, nil)
		p := plugin(map[string]any{"c": map[string]any{"Url": target.URL, "Auth": "j"}}, map[string]any{"j": auth(ts.URL, true)})
		// First call: tok-1 is fresh, refused, and not refetched (a fresh
		// token being refused is a real denial).
		if _, err := do(t, e, p, act("c")); err == nil {
			t.Fatal("want a 401 error")
		}
		// Second call: tok-1 comes from the cache, is refused, tok-2 fetched.
		if _, err := do(t, e, p, act("c")); err != nil {
			t.Fatalf("Do: %v", err)
		}
		if n.Load() != 2 {
			t.Errorf("token fetched %d times, want 2", n.Load())
		}
	})
	t.Run("config change resets the cache", func(t *testing.T) {
		ts, n := tokenServer(t, true)
		target := newReceiver(t, nil)
		e := newEnv(t, nil)
		p := plugin(map[string]any{"c": map[string]any{"Url": target.URL, "Auth": "j"}}, map[string]any{"j": auth(ts.URL, true)})
		_, _ = do(t, e, p, act("c"))
		p.Params[ParamCallbacks].(map[string]any)["c"].(map[string]any)["Retry"] = 1
		e.svc.Configure(p)
		_, _ = do(t, e, p, act("c"))
		if n.Load() != 2 {
			t.Errorf("token fetched %d times, want 2", n.Load())
		}
	})
	t.Run("falls back to the next auth", func(t *testing.T) {
		bad := newReceiver(t, func(w http.ResponseWriter, _ *http.Request, _ int) { w.WriteHeader(500) })
		target := newReceiver(t, nil)
		e := newEnv(t, nil)
		p := plugin(map[string]any{"c": map[string]any{"Url": target.URL, "Auth": "j", "Auths": []any{"b"}}},
			map[string]any{"j": auth(bad.URL, true), "b": map[string]any{"AuthType": "basic", "Username": "u", "Password": "p"}})
		if _, err := do(t, e, p, act("c")); err != nil {
			t.Fatal(err)
		}
		if u, pw, ok := (&http.Request{Header: target.requests()[0].Header}).BasicAuth(); !ok || u != "u" || pw != "p" {
			t.Errorf("basic auth not used")
		}
	})
	t.Run("403 moves to the next auth", func(t *testing.T) {
		target := newReceiver(t, func(w http.ResponseWriter, r *http.Request, _ int) {
			if u, _, _ := r.BasicAuth(); u != "second" {
				w.WriteHeader(403)
			}
		})
		e := newEnv(t, nil)
		p := plugin(map[string]any{"c": map[string]any{"Url": target.URL, "Auth": "a1", "Auths": []any{"a2"}, "Retry": 3}},
			map[string]any{"a1": map[string]any{"AuthType": "basic", "Username": "first"}, "a2": map[string]any{"AuthType": "basic", "Username": "second"}})
		if _, err := do(t, e, p, act("c")); err != nil {
			t.Fatal(err)
		}
		if got := len(target.requests()); got != 2 {
			t.Errorf("requests = %d, want 2 (403 is not retried with the same auth)", got)
		}
	})
}

func TestExecAuth(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "token.sh")
	// The script proves the environment is scrubbed: it prints RS_TOKEN, which
	// the test process has, only if it leaked.
	body := "#!/bin/sh\necho \"  exec-token-${RS_TOKEN}  \"\necho noise >&2\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("RS_TOKEN", "LEAKED")
	outsideDir := t.TempDir()
	outside := filepath.Join(outsideDir, "token.sh")
	if err := os.WriteFile(outside, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	target := newReceiver(t, nil)
	t.Run("bearer from stdout", func(t *testing.T) {
		e := newEnv(t, func(o *Options) { o.ExecDir = dir })
		p := plugin(map[string]any{"c": map[string]any{"Url": target.URL, "Auth": "x"}}, map[string]any{"x": map[string]any{"AuthType": "exec", "Path": script}})
		if errs := e.svc.Configure(p); len(errs) > 0 {
			t.Fatal(errs)
		}
		if _, err := do(t, e, p, act("c")); err != nil {
			t.Fatal(err)
		}
		reqs := target.requests()
		if got := reqs[len(reqs)-1].Header.Get("Authorization"); got != "Bearer exec-token-" {
			t.Errorf("Authorization %q", got)
		}
	})
	t.Run("GetAuthString in Url", func(t *testing.T) {
		e := newEnv(t, func(o *Options) { o.ExecDir = dir })
		p := plugin(map[string]any{"c": map[string]any{"Url": target.URL + `/k/{{.GetAuthString "x"}}`}}, map[string]any{"x": map[string]any{"AuthType": "exec", "Path": script}})
		if _, err := do(t, e, p, act("c")); err != nil {
			t.Fatal(err)
		}
		reqs := target.requests()
		if got := reqs[len(reqs)-1].Path; got != "/k/exec-token-" {
			t.Errorf("path %q", got)
		}
	})
	t.Run("outside ExecDir refused", func(t *testing.T) {
		e := newEnv(t, func(o *Options) { o.ExecDir = dir })
		p := plugin(map[string]any{"c": map[string]any{"Url": target.URL, "Auth": "x"}}, map[string]any{"x": map[string]any{"AuthType": "exec", "Path": outside}})
		if errs := e.svc.Configure(p); len(errs) == 0 {
			t.Error("Configure accepted an exec path outside ExecDir")
		}
		before := len(target.requests())
		if _, err := do(t, e, p, act("c")); backend.ErrorCode(err) != backend.ECONFLICT {
			t.Errorf("err = %v, want ECONFLICT", err)
		}
		if len(target.requests()) != before {
			t.Error("request sent")
		}
	})
	t.Run("timeout", func(t *testing.T) {
		slow := filepath.Join(dir, "slow.sh")
		if err := os.WriteFile(slow, []byte("#!/bin/sh\nexec sleep 10\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		e := newEnv(t, func(o *Options) { o.ExecDir = dir; o.ExecTimeout = 200 * time.Millisecond })
		p := plugin(map[string]any{"c": map[string]any{"Url": target.URL, "Auth": "x"}}, map[string]any{"x": map[string]any{"AuthType": "exec", "Path": slow}})
		start := time.Now()
		_, err := do(t, e, p, act("c"))
		if err == nil || !strings.Contains(err.Error(), "timed out") {
			t.Errorf("err = %v", err)
		}
		if time.Since(start) > 3*time.Second {
			t.Errorf("took %v", time.Since(start))
		}
	})
}

func TestTLSVerification(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("tls")) }))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake is expected
	srv.StartTLS()
	t.Cleanup(srv.Close)
	e := newEnv(t, nil)
	p := plugin(map[string]any{
		"verified": map[string]any{"Url": srv.URL},
		"insecure": map[string]any{"Url": srv.URL, "InsecureSkipVerify": true, "StringResponse": true},
	}, nil)
	if _, err := do(t, e, p, act("verified")); err == nil || backend.ErrorCode(err) != backend.EUNAVAILABLE {
		t.Errorf("self-signed target accepted by default: %v", err)
	}
	got, err := do(t, e, p, act("insecure"))
	if err != nil || string(got) != `"tls"` {
		t.Errorf("opt-out: %s %v", got, err)
	}
}

// syncBuffer collects log output from concurrent goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestNoSecretsInErrorsOrLogs(t *testing.T) {
	secrets := []string{"basic-password-1", "json-data-secret", "query-secret-9", "hdr-secret-value", "tok-1", securePlain}
	ts, _ := tokenServer(t, true)
	// The target echoes every request header and the body back in a 500.
	target := newReceiver(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		w.WriteHeader(500)
		_ = r.Header.Write(w)
		_, _ = w.Write([]byte(r.Header.Get("Authorization")))
	})
	basicTarget := newReceiver(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		w.WriteHeader(401)
		_ = r.Header.Write(w)
	})
	var logs syncBuffer
	e := newEnv(t, func(o *Options) {
		o.Logger = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		o.Debug = func() bool { return true }
	})
	p := plugin(map[string]any{
		"tok": map[string]any{"Url": target.URL, "Auth": "j", "Debug": true, "Decode": true,
			"Headers": map[string]any{"X-Api-Token": "hdr-secret-value"}},
		"basic": map[string]any{"Url": basicTarget.URL, "Auth": "b", "Debug": true, "Retry": 1},
	}, map[string]any{
		"j": map[string]any{"AuthType": "json-token", "Url": ts.URL, "Data": "json-data-secret", "Query": "q=query-secret-9",
			"TokenField": "access_token", "DurationField": "expires_in", "Debug": true},
		"b": map[string]any{"AuthType": "basic", "Username": "u", "Password": "basic-password-1", "Debug": true},
	})
	var errText strings.Builder
	for _, c := range []string{"tok", "basic"} {
		_, err := do(t, e, p, act(c))
		if err == nil {
			t.Fatalf("%s: want an error", c)
		}
		errText.WriteString(err.Error() + "\n")
	}
	for _, a := range e.attempts() {
		errText.WriteString(a.Error + "\n")
	}
	if !strings.Contains(logs.String(), "callback request") {
		t.Fatalf("debug logging did not run: %s", logs.String())
	}
	for _, s := range secrets {
		if strings.Contains(errText.String(), s) {
			t.Errorf("secret %q in errors: %s", s, errText.String())
		}
		if strings.Contains(logs.String(), s) {
			t.Errorf("secret %q in logs", s)
		}
	}
	basicB64 := base64.StdEncoding.EncodeToString([]byte("u:basic-password-1"))
	if strings.Contains(errText.String(), basicB64) || strings.Contains(logs.String(), basicB64) {
		t.Error("basic credentials leaked in base64")
	}

	t.Run("debug off without the server preference", func(t *testing.T) {
		var quiet syncBuffer
		e := newEnv(t, func(o *Options) {
			o.Logger = slog.New(slog.NewJSONHandler(&quiet, &slog.HandlerOptions{Level: slog.LevelDebug}))
			o.Debug = func() bool { return false }
		})
		_, _ = do(t, e, p, act("basic"))
		if strings.Contains(quiet.String(), "callback request") {
			t.Error("debug logged although rs-debug-enable is off")
		}
	})
}

func TestAttemptsRecorded(t *testing.T) {
	rc := newReceiver(t, func(w http.ResponseWriter, _ *http.Request, n int) {
		if n == 1 {
			w.WriteHeader(502)
		}
	})
	e := newEnv(t, nil)
	if _, err := do(t, e, plugin(map[string]any{"c": map[string]any{"Url": rc.URL, "Retry": 1}}, nil), act("c")); err != nil {
		t.Fatal(err)
	}
	got := e.attempts()
	if len(got) != 2 {
		t.Fatalf("attempts %+v", got)
	}
	want := []struct{ n, status int }{{1, 502}, {2, 200}}
	for i, w := range want {
		a := got[i]
		if a.Plugin != "cb" || a.Callback != "c" || a.Machine != testMachine().Uuid || a.Source != backend.SourceAction || a.Attempt != w.n || a.Status != w.status {
			t.Errorf("attempt %d = %+v", i, a)
		}
	}
	if got[0].Error == "" || got[1].Error != "" {
		t.Errorf("errors %q %q", got[0].Error, got[1].Error)
	}
}

// testJob is job-1 of the test machine in state; "" gives nil (no previous
// state).
func testJob(state string) *backend.Job {
	if state == "" {
		return nil
	}
	return &backend.Job{Uuid: "job-1", Machine: testMachine().Uuid, Task: "install", State: state}
}

func TestJobFail(t *testing.T) {
	t.Run("edge-triggered enqueue and exactly-once delivery", func(t *testing.T) {
		rc := newReceiver(t, nil)
		e := newEnv(t, nil)
		e.plugins.list = []*backend.Plugin{
			plugin(map[string]any{JobFail: map[string]any{"Url": rc.URL + "/failed/{{.Machine.Name}}"}}, nil),
			{Name: "other", Provider: ProviderName, Params: map[string]any{ParamCallbacks: map[string]any{"x": map[string]any{"Url": rc.URL}}}},
			{Name: "foreign", Provider: "ipmi", Params: map[string]any{ParamCallbacks: map[string]any{JobFail: map[string]any{"Url": rc.URL}}}},
		}
		ctx := context.Background()
		changes := [][2]string{ // old state, new state
			{backend.JobCreated, backend.JobRunning},
			{backend.JobRunning, backend.JobFailed},
			{backend.JobFailed, backend.JobFailed}, // repeated save
			{"", backend.JobFailed},                // the same job again: queued once
		}
		for _, c := range changes {
			if err := e.svc.JobChanged(ctx, testJob(c[0]), testJob(c[1])); err != nil {
				t.Fatal(err)
			}
		}
		if len(e.store.deliveries) != 1 {
			t.Fatalf("deliveries = %d, want 1", len(e.store.deliveries))
		}
		d := e.store.deliveries[0]
		var pl JobFailPayload
		_ = json.Unmarshal(d.Payload, &pl)
		if d.Plugin != "cb" || d.Job != "job-1" || pl.Task != "install" || pl.State != backend.JobFailed {
			t.Errorf("delivery %+v payload %+v", d, pl)
		}
		for range 3 {
			if _, err := e.svc.WorkOnce(ctx); err != nil {
				t.Fatal(err)
			}
		}
		reqs := rc.requests()
		if len(reqs) != 1 {
			t.Fatalf("receiver got %d requests, want 1", len(reqs))
		}
		r := reqs[0]
		if r.Path != "/failed/node1.example.com" || r.Header.Get("X-Provgate-Job") != "job-1" || r.Header.Get("X-Provgate-Event") != JobFail {
			t.Errorf("request %s %v", r.Path, r.Header)
		}
		var m backend.Machine
		if err := json.Unmarshal(r.Body, &m); err != nil || m.Uuid != testMachine().Uuid {
			t.Errorf("body is not the machine: %v", err)
		}
		if d.State != backend.DeliveryDone {
			t.Errorf("state %q", d.State)
		}
		at := e.attempts()
		if len(at) != 1 || at[0].Source != backend.SourceJobFail {
			t.Errorf("attempts %+v", at)
		}
	})
	t.Run("retried later, then failed after N tries", func(t *testing.T) {
		rc := newReceiver(t, func(w http.ResponseWriter, _ *http.Request, _ int) { w.WriteHeader(503) })
		now := time.Now()
		var mu sync.Mutex
		clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
		e := newEnv(t, func(o *Options) { o.Now = clock; o.MaxDeliveryAttempts = 3 })
		e.store.now = clock
		e.plugins.list = []*backend.Plugin{plugin(map[string]any{JobFail: map[string]any{"Url": rc.URL}}, nil)}
		ctx := context.Background()
		if err := e.svc.JobChanged(ctx, testJob(backend.JobRunning), testJob(backend.JobFailed)); err != nil {
			t.Fatal(err)
		}
		d := e.store.deliveries[0]
		for i := 1; i <= 3; i++ {
			if n, _ := e.svc.WorkOnce(ctx); n != 1 {
				t.Fatalf("round %d claimed %d", i, n)
			}
			if n, _ := e.svc.WorkOnce(ctx); n != 0 {
				t.Fatalf("round %d: claimed again before NextAt", i)
			}
			if i < 3 && (d.State != backend.DeliveryPending || !d.NextAt.After(clock())) {
				t.Fatalf("round %d: %+v", i, d)
			}
			mu.Lock()
			now = now.Add(2 * time.Hour)
			mu.Unlock()
		}
		if d.State != backend.DeliveryFailed || !strings.Contains(d.LastError, "503") {
			t.Errorf("final %+v", d)
		}
		if got := len(rc.requests()); got != 3 {
			t.Errorf("requests %d, want 3", got)
		}
	})
	t.Run("4xx fails at once", func(t *testing.T) {
		rc := newReceiver(t, func(w http.ResponseWriter, _ *http.Request, _ int) { w.WriteHeader(410) })
		e := newEnv(t, nil)
		e.plugins.list = []*backend.Plugin{plugin(map[string]any{JobFail: map[string]any{"Url": rc.URL}}, nil)}
		ctx := context.Background()
		_ = e.svc.JobChanged(ctx, nil, testJob(backend.JobFailed))
		_, _ = e.svc.WorkOnce(ctx)
		if d := e.store.deliveries[0]; d.State != backend.DeliveryFailed {
			t.Errorf("%+v", d)
		}
	})
	t.Run("a worker stopped between claim and send hands the delivery back", func(t *testing.T) {
		rc := newReceiver(t, nil)
		worker, stop := context.WithCancel(context.Background())
		claims := &stopOnClaim{stop: stop}
		e := newEnv(t, func(o *Options) {
			claims.fakeStore = o.Store.(*fakeStore)
			o.Store = claims
		})
		e.plugins.list = []*backend.Plugin{plugin(map[string]any{JobFail: map[string]any{"Url": rc.URL}}, nil)}
		if err := e.svc.JobChanged(context.Background(), testJob(backend.JobRunning), testJob(backend.JobFailed)); err != nil {
			t.Fatal(err)
		}
		if _, err := e.svc.WorkOnce(worker); err != nil && worker.Err() == nil {
			t.Fatal(err)
		}
		if n := len(rc.requests()); n != 0 {
			t.Fatalf("the stopped worker sent %d requests", n)
		}
		d := e.store.deliveries[0]
		if d.State != backend.DeliveryPending || d.LeaseUntil.After(time.Now()) || d.NextAt.After(time.Now()) {
			t.Fatalf("after the stopped worker's claim: state %s, leased until %s, due %s; want pending, unleased, due now",
				d.State, d.LeaseUntil, d.NextAt)
		}
		// The restarted server's worker sends it at once, not after the
		// lease.
		claims.stop = func() {}
		if n, err := e.svc.WorkOnce(context.Background()); n != 1 || err != nil {
			t.Fatalf("the next claim took %d deliveries (%v), want 1", n, err)
		}
		if n := len(rc.requests()); n != 1 || d.State != backend.DeliveryDone {
			t.Fatalf("%d requests, delivery %s; want 1, done", n, d.State)
		}
	})
	t.Run("a stopping worker lets the sends it started finish, within its grace", func(t *testing.T) {
		for _, tc := range []struct {
			name  string
			grace time.Duration
			done  bool
		}{{"within the grace", time.Minute, true}, {"past the grace", 100 * time.Millisecond, false}} {
			t.Run(tc.name, func(t *testing.T) {
				started, answer := make(chan struct{}), make(chan struct{})
				rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request, _ int) {
					close(started)
					select {
					case <-answer:
					case <-r.Context().Done():
					}
				})
				defer close(answer)
				e := newEnv(t, func(o *Options) { o.StopGrace = tc.grace })
				e.plugins.list = []*backend.Plugin{plugin(map[string]any{JobFail: map[string]any{"Url": rc.URL}}, nil)}
				if err := e.svc.JobChanged(context.Background(), testJob(backend.JobRunning), testJob(backend.JobFailed)); err != nil {
					t.Fatal(err)
				}
				worker, stop := context.WithCancel(context.Background())
				go func() {
					<-started
					stop()
					if tc.done {
						time.Sleep(200 * time.Millisecond)
						answer <- struct{}{}
					}
				}()
				if n, _ := e.svc.WorkOnce(worker); n != 1 {
					t.Fatalf("claimed %d, want 1", n)
				}
				d := e.store.deliveries[0]
				if tc.done && d.State != backend.DeliveryDone {
					t.Fatalf("a send answered 200 ms after the stop, within a %s grace: delivery %s (%s), want done", tc.grace, d.State, d.LastError)
				}
				if !tc.done && (d.State != backend.DeliveryPending || d.NextAt.After(time.Now())) {
					t.Fatalf("a send cut short by the end of the grace: delivery %s due %s, want pending, due now", d.State, d.NextAt)
				}
			})
		}
	})
	t.Run("RunWorker stops with ctx", func(t *testing.T) {
		rc := newReceiver(t, nil)
		e := newEnv(t, nil)
		e.plugins.list = []*backend.Plugin{plugin(map[string]any{JobFail: map[string]any{"Url": rc.URL}}, nil)}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { e.svc.RunWorker(ctx, 10*time.Millisecond); close(done) }()
		_ = e.svc.JobChanged(ctx, testJob(backend.JobRunning), testJob(backend.JobFailed))
		deadline := time.Now().Add(30 * time.Second)
		for len(rc.requests()) == 0 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		// A whole round after the delivery sends nothing again; Rounds
		// counts the finished rounds.
		want := e.svc.Rounds() + 2
		for e.svc.Rounds() < want && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		cancel()
		<-done
		if len(rc.requests()) != 1 {
			t.Errorf("requests %d", len(rc.requests()))
		}
		if got := e.svc.Rounds(); got < want {
			t.Errorf("%d rounds finished, want at least %d", got, want)
		}
	})
}

func TestProviderAndContent(t *testing.T) {
	p := Provider()
	if p.Name != "callback" || len(p.AvailableActions) != 1 {
		t.Fatalf("%+v", p)
	}
	a := p.AvailableActions[0]
	if a.Command != "callbackDo" || a.Model != "machines" || a.RequiredParams[0] != ParamAction || a.OptionalParams[0] != ParamDataOverride {
		t.Errorf("%+v", a)
	}
	if p.RequiredParams[0] != ParamCallbacks || p.OptionalParams[0] != ParamAuths {
		t.Errorf("%+v", p)
	}
	tasks, params, stages := Content()
	if len(tasks) != 1 || len(stages) != 1 || stages[0].Params[ParamAction] != "complete" || stages[0].Tasks[0] != "callback-task" {
		t.Fatalf("content %+v %+v", tasks, stages)
	}
	byName := map[string]*backend.Param{}
	for _, p := range params {
		byName[p.Name] = p
	}
	for _, n := range []string{ParamAction, ParamPlugin, ParamSkip, ParamDataOverride, ParamCallbacks, ParamAuths} {
		if byName[n] == nil {
			t.Errorf("param %s missing", n)
		}
	}
	if !byName[ParamAuths].Secure {
		t.Error("callback/auths must be Secure")
	}
	if !byName[ParamCallbacks].Secure {
		t.Error("callback/callbacks must be Secure: header values and URLs carry credentials")
	}

	script := tasks[0].Templates[0].Contents
	render1 := func(params map[string]any) (string, error) {
		m := testMachine()
		env := render.Env{Machine: m, Info: render.Info{Address: "10.0.0.1", ApiPort: 8092},
			Params: func(_ context.Context, k string) (any, bool, error) { v, ok := params[k]; return v, ok, nil },
			Tokens: tokens{}}
		return render.Render(context.Background(), render.Task, "callback-task.sh", script, env, render.Limits{})
	}
	tests := []struct {
		name   string
		params map[string]any
		want   []string
		not    []string
	}{
		{"runs the action", map[string]any{ParamAction: "complete"}, []string{
			`drpcli machines runaction "$RS_UUID" callbackDo`, `--plugin 'callback'`, `callback/action '"complete"'`,
			`export RS_TOKEN='machine-token'`, `export RS_ENDPOINT='https://10.0.0.1:8092'`}, []string{"skipping"}},
		{"quotes hostile values", map[string]any{ParamAction: `x'; rm -rf / #`, ParamPlugin: "p$(id)"}, []string{
			`callback/action '"x'\''; rm -rf / #"'`, `--plugin 'p$(id)'`}, nil},
		{"skip", map[string]any{ParamAction: "complete", ParamSkip: true}, []string{"skipping", "exit 0"}, []string{"drpcli"}},
		{"no action", map[string]any{}, []string{"callback/action is not set", "exit 1"}, []string{"drpcli"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := render1(tt.params)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("script lacks %q:\n%s", w, out)
				}
			}
			for _, n := range tt.not {
				if strings.Contains(out, n) {
					t.Errorf("script has %q:\n%s", n, out)
				}
			}
		})
	}
}

type tokens struct{}

func (tokens) GenerateToken(context.Context, *backend.Machine) (string, error) {
	return "machine-token", nil
}
func (tokens) GenerateInfiniteToken(context.Context, *backend.Machine) (string, error) {
	return "infinite-token", nil
}

func TestTokenFetchedOnceUnderConcurrency(t *testing.T) {
	ts, n := tokenServer(t, true)
	target := newReceiver(t, nil)
	e := newEnv(t, nil)
	p := plugin(map[string]any{"c": map[string]any{"Url": target.URL, "Auth": "j"}},
		map[string]any{"j": map[string]any{"AuthType": "json-token", "Url": ts.URL, "TokenField": "access_token", "DurationField": "expires_in"}})
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if _, err := do(t, e, p, act("c")); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n.Load() != 1 {
		t.Errorf("token fetched %d times, want 1", n.Load())
	}
}
