package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// hit is one request a receiver got.
type hit struct {
	Method  string
	Path    string
	Query   string
	Header  http.Header
	Body    []byte
	Aborted bool // the sender went away before the answer
}

// receiver is an httptest server that records every request and answers
// through a per-path handler (default: 200 {"ok":true}).
type receiver struct {
	*httptest.Server
	mu       sync.Mutex
	hits     []hit
	handlers map[string]func(w http.ResponseWriter, r *http.Request) bool
}

func newReceiver(t testing.TB) *receiver { return newReceiverOn(t, "127.0.0.1") }

// newReceiverOn is newReceiver listening on ip (any of 127.0.0.0/8 on
// Linux), for tests that tell allowed and refused callback destinations
// apart.
func newReceiverOn(t testing.TB, ip string) *receiver {
	t.Helper()
	rc := &receiver{handlers: map[string]func(http.ResponseWriter, *http.Request) bool{}}
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatalf("listen on %s: %v", ip, err)
	}
	rc.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		h := rc.handlers[r.URL.Path]
		rc.mu.Unlock()
		aborted := false
		if h != nil {
			aborted = h(w, r)
		} else {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"ok":true}`))
		}
		rc.mu.Lock()
		rc.hits = append(rc.hits, hit{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery,
			Header: r.Header.Clone(), Body: b, Aborted: aborted})
		rc.mu.Unlock()
	}))
	rc.Server.Listener = l
	rc.Server.Start()
	t.Cleanup(rc.Close)
	return rc
}

// handle sets the handler of path; it returns true when it saw the sender
// give up.
func (rc *receiver) handle(path string, h func(w http.ResponseWriter, r *http.Request) bool) {
	rc.mu.Lock()
	rc.handlers[path] = h
	rc.mu.Unlock()
}

// on returns the requests to path so far.
func (rc *receiver) on(path string) []hit {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var out []hit
	for _, h := range rc.hits {
		if h.Path == path {
			out = append(out, h)
		}
	}
	return out
}

// waitFor waits until path got n requests, failing after timeout.
func (rc *receiver) waitFor(t testing.TB, path string, n int, timeout time.Duration) []hit {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		got := rc.on(path)
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s got %d requests within %s, want %d", path, len(got), timeout, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func mkPlugin(t testing.TB, s *tserver, name string, callbacks, auths map[string]any) map[string]any {
	t.Helper()
	params := map[string]any{"callback/callbacks": callbacks}
	if auths != nil {
		params["callback/auths"] = auths
	}
	r := s.Must(201, "POST", "/plugins", map[string]any{"Name": name, "Provider": "callback", "Params": params}, admin())
	return r.Map(t)
}

// runCallback posts callbackDo for machine key through plugin.
func runCallback(s *tserver, key, plugin string, params any) resp {
	s.t.Helper()
	return s.Do("POST", "/machines/"+key+"/actions/callbackDo?plugin="+plugin, params, admin())
}

const execToken = "exec-token-7731"

// TestE2ECallback drives the callback plugin over HTTP against local
// receivers (docs/design.md §12).
func TestE2ECallback(t *testing.T) {
	t.Parallel()
	execDir := t.TempDir()
	script := filepath.Join(execDir, "token.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho '  "+execToken+"  '\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(t.TempDir(), "outside.sh")
	if err := os.WriteFile(outside, []byte("#!/bin/sh\necho x\n"), 0o755); err != nil {
		t.Fatal(err)
	}

	forEachDB(t, func(t *testing.T, s *tserver) {
		rc := newReceiver(t)
		other := newReceiver(t) // a second host, for redirects
		tokenCalls := 0
		var tokMu sync.Mutex
		rc.handle("/token", func(w http.ResponseWriter, r *http.Request) bool {
			tokMu.Lock()
			tokenCalls++
			n := tokenCalls
			tokMu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"access_token":"tok-%d","expires_in":3600}`, n)
			return false
		})
		// The json-token target refuses the first token once issued.
		rc.handle("/tokened", func(w http.ResponseWriter, r *http.Request) bool {
			if r.Header.Get("Authorization") == "Bearer tok-1" && len(rc.on("/tokened")) >= 2 {
				w.WriteHeader(401)
				return false
			}
			_, _ = w.Write([]byte("fine"))
			return false
		})
		rc.handle("/fail500", func(w http.ResponseWriter, r *http.Request) bool {
			w.WriteHeader(500)
			_, _ = w.Write([]byte("remote trouble"))
			return false
		})
		rc.handle("/slow", func(w http.ResponseWriter, r *http.Request) bool {
			select {
			case <-r.Context().Done():
				return true
			case <-time.After(10 * time.Second):
			}
			return false
		})
		rc.handle("/redirect", func(w http.ResponseWriter, r *http.Request) bool {
			http.Redirect(w, r, other.URL+"/landed", http.StatusTemporaryRedirect)
			return false
		})
		rc.handle("/text", func(w http.ResponseWriter, r *http.Request) bool {
			_, _ = w.Write([]byte("plain text reply"))
			return false
		})

		const pw = "basic-Pa55word-secret"
		callbacks := map[string]any{
			"plain":     map[string]any{"Url": rc.URL + "/hook/{{.Machine.Name}}"},
			"headers":   map[string]any{"Url": rc.URL + "/headers", "Method": "PUT", "Headers": map[string]any{"X-Custom": "yes"}},
			"nobody":    map[string]any{"Url": rc.URL + "/nobody", "NoBody": true},
			"override":  map[string]any{"Url": rc.URL + "/override"},
			"json":      map[string]any{"Url": rc.URL + "/json", "Method": "GET", "JsonResponse": true},
			"string":    map[string]any{"Url": rc.URL + "/text", "StringResponse": true},
			"base64":    map[string]any{"Url": rc.URL + "/text"},
			"retry":     map[string]any{"Url": rc.URL + "/fail500", "Retry": 2},
			"slow":      map[string]any{"Url": rc.URL + "/slow", "Timeout": 1},
			"basic":     map[string]any{"Url": rc.URL + "/basic", "Auth": "basic-auth"},
			"tokened":   map[string]any{"Url": rc.URL + "/tokened", "Auths": []string{"tok"}},
			"exec":      map[string]any{"Url": rc.URL + "/exec", "Auth": "exec-auth"},
			"redirect":  map[string]any{"Url": rc.URL + "/redirect", "Auth": "basic-auth", "Headers": map[string]any{"X-Api-Key": "key-material-1"}},
			"debugged":  map[string]any{"Url": rc.URL + "/debugged?k=v", "Auth": "basic-auth", "Debug": true},
			"fromparam": map[string]any{"Url": rc.URL + "/fromparam"},
		}
		auths := map[string]any{
			"basic-auth": map[string]any{"AuthType": "basic", "Username": "cbuser", "Password": pw},
			"tok": map[string]any{"AuthType": "json-token", "Url": rc.URL + "/token", "Method": "POST",
				"Data": `{"client":"provgate"}`, "TokenField": "access_token", "DurationField": "expires_in"},
			"exec-auth": map[string]any{"AuthType": "exec", "Path": script},
		}

		t.Run("plugin_create", func(t *testing.T) {
			s := s.On(t)
			p := mkPlugin(t, s, "cb", callbacks, auths)
			if p["Available"] != true || len(p["Errors"].([]any)) != 0 {
				t.Fatalf("valid plugin: Available %v Errors %v", p["Available"], p["Errors"])
			}
			r := s.Must(200, "GET", "/plugins/cb", nil, admin())
			if strings.Contains(string(r.Body), pw) {
				t.Fatalf("plugin read shows the basic password: %s", r.Body)
			}
		})

		m1 := s.On(t).AddMachine("cbm1", map[string]any{"Address": "10.0.0.7", "Params": map[string]any{"team": "blue"}})

		t.Run("invalid_configs", func(t *testing.T) {
			s := s.On(t)
			cases := []struct {
				name      string
				callbacks map[string]any
				auths     map[string]any
				want      []string
			}{
				{"bad_url", map[string]any{"x": map[string]any{"Url": "ftp://example.com/x"}}, nil, []string{`callback "x"`, "scheme"}},
				{"no_url", map[string]any{"x": map[string]any{"Method": "POST"}}, nil, []string{`callback "x": Url is required`}},
				{"bad_method", map[string]any{"x": map[string]any{"Url": "http://127.0.0.1/x", "Method": "FETCH"}}, nil, []string{"invalid Method"}},
				{"retries_typo", map[string]any{"x": map[string]any{"Url": "http://127.0.0.1/x", "Retries": 3}}, nil, []string{`unknown field "Retries"`, `"Retry"`}},
				{"endless_retries", map[string]any{"x": map[string]any{"Url": "http://127.0.0.1/x", "Retry": 1000000}}, nil, []string{`callback "x": Retry 1000000 is more than 100`}},
				{"missing_auth", map[string]any{"x": map[string]any{"Url": "http://127.0.0.1/x", "Auth": "nope"}}, nil, []string{`auth "nope" is not defined`}},
				{"exec_outside_dir", map[string]any{"x": map[string]any{"Url": "http://127.0.0.1/x", "Auth": "ex"}},
					map[string]any{"ex": map[string]any{"AuthType": "exec", "Path": outside}}, []string{`auth "ex"`, "exec Path is not an executable file inside the allowed exec directory"}},
				{"several_problems", map[string]any{
					"a1": map[string]any{"Url": "not a url", "Method": "get"},
					"b2": map[string]any{"Url": "http://127.0.0.1/x", "Auths": []string{"basic-nopw", "gone"}}},
					map[string]any{"basic-nopw": map[string]any{"AuthType": "basic", "Password": pw}},
					[]string{`callback "a1": Url`, `callback "a1": invalid Method`, `auth "gone" is not defined`, `auth "basic-nopw": basic auth needs Username`}},
			}
			for i, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					s := s.On(t)
					name := fmt.Sprintf("bad-plugin-%d", i)
					p := mkPlugin(t, s, name, c.callbacks, c.auths)
					if p["Available"] != false {
						t.Fatalf("invalid plugin is Available: %v", p)
					}
					errs := fmt.Sprint(p["Errors"])
					for _, w := range c.want {
						if !strings.Contains(errs, w) {
							t.Fatalf("Errors %s do not mention %q", errs, w)
						}
					}
					if strings.Contains(errs, pw) {
						t.Fatalf("Errors leak the password: %s", errs)
					}
					// Saved: it reads back with the same verdict.
					got := s.Must(200, "GET", "/plugins/"+name, nil, admin()).Map(t)
					if got["Available"] != false || strings.Contains(fmt.Sprint(got), pw) {
						t.Fatalf("stored invalid plugin: %v", got)
					}
					// Its action refuses to run, naming the problem.
					e := wantDRPError(t, runCallback(s, m1, name, map[string]any{"callback/action": firstKey(c.callbacks)}), 409, "", "")
					if strings.Contains(e.messages(), pw) {
						t.Fatalf("action error leaks the password: %v", e)
					}
				})
			}
		})

		t.Run("actions_list", func(t *testing.T) {
			s := s.On(t)
			var acts []map[string]any
			s.Must(200, "GET", "/machines/"+m1+"/actions", nil, admin()).JSON(t, &acts)
			found := false
			for _, a := range acts {
				if a["Command"] == "callbackDo" && a["Model"] == "machines" {
					found = true
					if fmt.Sprint(a["RequiredParams"]) != "[callback/action]" {
						t.Fatalf("callbackDo RequiredParams %v", a["RequiredParams"])
					}
				}
			}
			if !found {
				t.Fatalf("actions %v lack callbackDo", acts)
			}
			s.Must(200, "GET", "/machines/"+m1+"/actions/callbackDo", nil, admin())
		})

		t.Run("callbackDo", func(t *testing.T) {
			b64 := base64.StdEncoding.EncodeToString([]byte("plain text reply"))
			cases := []struct {
				name   string
				params any
				path   string
				check  func(t *testing.T, h hit, reply []byte)
			}{
				{"default_post_machine_body", map[string]any{"callback/action": "plain"}, "/hook/cbm1",
					func(t *testing.T, h hit, reply []byte) {
						var m map[string]any
						if h.Method != "POST" || json.Unmarshal(h.Body, &m) != nil {
							t.Fatalf("got %s %s", h.Method, h.Body)
						}
						if m["Uuid"] != m1 || m["Name"] != "cbm1" || m["Params"].(map[string]any)["team"] != "blue" {
							t.Fatalf("body is not the machine: %s", h.Body)
						}
						if _, ok := m["Secret"]; ok {
							t.Fatalf("machine Secret sent: %s", h.Body)
						}
						if ct := h.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
							t.Fatalf("Content-Type %q", ct)
						}
						// Default reply: base64 of the body, as a JSON string.
						want, _ := json.Marshal(base64.StdEncoding.EncodeToString([]byte(`{"ok":true}`)))
						if string(reply) != string(want) {
							t.Fatalf("reply %s, want %s", reply, want)
						}
					}},
				{"headers_and_method", map[string]any{"callback/action": "headers"}, "/headers",
					func(t *testing.T, h hit, _ []byte) {
						if h.Method != "PUT" || h.Header.Get("X-Custom") != "yes" {
							t.Fatalf("got %s X-Custom=%q", h.Method, h.Header.Get("X-Custom"))
						}
					}},
				{"nobody", map[string]any{"callback/action": "nobody"}, "/nobody",
					func(t *testing.T, h hit, _ []byte) {
						if len(h.Body) != 0 {
							t.Fatalf("NoBody sent %q", h.Body)
						}
					}},
				{"override_object", map[string]any{"callback/action": "override", "callback/data-override": map[string]any{"a": 1, "b": []int{2}}}, "/override",
					func(t *testing.T, h hit, _ []byte) {
						if string(h.Body) != `{"a":1,"b":[2]}` {
							t.Fatalf("body %s", h.Body)
						}
					}},
				{"override_string_template", map[string]any{"callback/action": "override", "callback/data-override": `{"who":"{{.Machine.Name}}","team":"{{.Param "team"}}"}`}, "/override",
					func(t *testing.T, h hit, _ []byte) {
						if string(h.Body) != `{"who":"cbm1","team":"blue"}` {
							t.Fatalf("body %s", h.Body)
						}
					}},
				{"override_empty_object", map[string]any{"callback/action": "override", "callback/data-override": map[string]any{}}, "/override",
					func(t *testing.T, h hit, _ []byte) {
						if string(h.Body) != `{}` {
							t.Fatalf("body %s", h.Body)
						}
					}},
				{"json_response", map[string]any{"callback/action": "json"}, "/json",
					func(t *testing.T, h hit, reply []byte) {
						if h.Method != "GET" || string(reply) != `{"ok":true}` {
							t.Fatalf("got %s, reply %s", h.Method, reply)
						}
						if !strings.Contains(string(h.Body), m1) {
							t.Fatalf("GET without the machine body: %q", h.Body)
						}
					}},
				{"string_response", map[string]any{"callback/action": "string"}, "/text",
					func(t *testing.T, _ hit, reply []byte) {
						if string(reply) != `"plain text reply"` {
							t.Fatalf("reply %s", reply)
						}
					}},
				{"base64_response", map[string]any{"callback/action": "base64"}, "/text",
					func(t *testing.T, _ hit, reply []byte) {
						if string(reply) != `"`+b64+`"` {
							t.Fatalf("reply %s", reply)
						}
					}},
				{"basic_auth", map[string]any{"callback/action": "basic"}, "/basic",
					func(t *testing.T, h hit, _ []byte) {
						if u, p, ok := (&http.Request{Header: h.Header}).BasicAuth(); !ok || u != "cbuser" || p != pw {
							t.Fatalf("Authorization %q", h.Header.Get("Authorization"))
						}
					}},
				{"exec_auth", map[string]any{"callback/action": "exec"}, "/exec",
					func(t *testing.T, h hit, _ []byte) {
						if got := h.Header.Get("Authorization"); got != "Bearer "+execToken {
							t.Fatalf("Authorization %q", got)
						}
					}},
				{"cross_host_redirect", map[string]any{"callback/action": "redirect"}, "/redirect",
					func(t *testing.T, h hit, _ []byte) {
						if h.Header.Get("Authorization") == "" {
							t.Fatal("first hop lacks Authorization")
						}
						landed := other.waitFor(t, "/landed", 1, 5*time.Second)
						last := landed[len(landed)-1]
						if a := last.Header.Get("Authorization"); a != "" {
							t.Fatalf("Authorization forwarded across hosts: %q", a)
						}
						if k := last.Header.Get("X-Api-Key"); k != "" {
							t.Fatalf("configured secret header forwarded across hosts: %q", k)
						}
					}},
			}
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					before := len(rc.on(c.path))
					r := runCallback(s, m1, "cb", c.params)
					if r.Status != 200 {
						t.Fatalf("callbackDo: %s", r)
					}
					hits := rc.on(c.path)
					if len(hits) != before+1 {
						t.Fatalf("%s got %d requests, want 1", c.path, len(hits)-before)
					}
					c.check(t, hits[len(hits)-1], r.Body)
				})
			}
		})

		t.Run("action_from_machine_params", func(t *testing.T) {
			s := s.On(t)
			m2 := s.On(t).AddMachine("cbm2", map[string]any{"Params": map[string]any{"callback/action": "fromparam"}})
			r := runCallback(s, m2, "cb", map[string]any{})
			if r.Status != 200 {
				t.Fatalf("callbackDo with the action from params: %s", r)
			}
			hits := rc.on("/fromparam")
			if len(hits) != 1 || !strings.Contains(string(hits[0].Body), m2) {
				t.Fatalf("fromparam hits %v", hits)
			}
			// A body value wins over the machine's param.
			before := len(rc.on("/nobody"))
			s.Must(200, "POST", "/machines/"+m2+"/actions/callbackDo?plugin=cb", map[string]any{"callback/action": "nobody"}, admin())
			if len(rc.on("/nobody")) != before+1 || len(rc.on("/fromparam")) != 1 {
				t.Fatal("the body's callback/action did not win")
			}
		})

		t.Run("unknown_callback", func(t *testing.T) {
			wantDRPError(t, runCallback(s, m1, "cb", map[string]any{"callback/action": "no-such-cb"}), 404, "INVOKE", "no-such-cb")
			wantDRPError(t, runCallback(s, m1, "no-such-plugin", map[string]any{"callback/action": "plain"}), 400, "INVOKE", "no-such-plugin")
			wantDRPError(t, runCallback(s, m1, "cb", map[string]any{}), 400, "", "callback/action")
			wantDRPError(t, runCallback(s, "Name:ghost", "cb", map[string]any{"callback/action": "plain"}), 404, "", "")
		})

		t.Run("retry_then_error", func(t *testing.T) {
			r := runCallback(s, m1, "cb", map[string]any{"callback/action": "retry"})
			if r.Status < 400 {
				t.Fatalf("failing remote answered %s", r)
			}
			wantDRPError(t, r, r.Status, "", "500")
			if n := len(rc.on("/fail500")); n != 3 {
				t.Fatalf("Retry 2 made %d attempts, want 3", n)
			}
		})

		t.Run("timeout", func(t *testing.T) {
			start := time.Now()
			r := runCallback(s, m1, "cb", map[string]any{"callback/action": "slow"})
			d := time.Since(start)
			if r.Status < 400 {
				t.Fatalf("slow remote answered %s", r)
			}
			wantDRPError(t, r, r.Status, "", "")
			// The remote answers after 10s: an answer well before that is
			// the 1s Timeout's, with room for a loaded machine.
			if d < 900*time.Millisecond || d > 8*time.Second {
				t.Fatalf("Timeout 1 answered after %s", d)
			}
		})

		t.Run("json_token_cache_and_refetch", func(t *testing.T) {
			s := s.On(t)
			for i := 0; i < 2; i++ {
				s.Must(200, "POST", "/machines/"+m1+"/actions/callbackDo?plugin=cb", map[string]any{"callback/action": "tokened"}, admin())
			}
			tokMu.Lock()
			calls := tokenCalls
			tokMu.Unlock()
			if calls != 1 {
				t.Fatalf("token fetched %d times for two calls, want 1 (cached)", calls)
			}
			// The target now refuses tok-1: one refetch, then success.
			s.Must(200, "POST", "/machines/"+m1+"/actions/callbackDo?plugin=cb", map[string]any{"callback/action": "tokened"}, admin())
			tokMu.Lock()
			calls = tokenCalls
			tokMu.Unlock()
			hits := rc.on("/tokened")
			if calls != 2 || len(hits) != 4 || hits[3].Header.Get("Authorization") != "Bearer tok-2" {
				t.Fatalf("after a 401: %d token fetches, %d target hits", calls, len(hits))
			}
			tok := rc.on("/token")
			if tok[0].Method != "POST" || string(tok[0].Body) != `{"client":"provgate"}` {
				t.Fatalf("token request %s %s", tok[0].Method, tok[0].Body)
			}
		})

		t.Run("attempts", func(t *testing.T) {
			s := s.On(t)
			var at []map[string]any
			s.Must(200, "GET", "/plugins/cb/attempts?machine="+m1, nil, admin()).JSON(t, &at)
			n500 := 0
			for _, a := range at {
				if a["Callback"] == "retry" {
					n500++
					if a["Status"] != float64(500) || a["Machine"] != m1 || a["Source"] != "action" {
						t.Fatalf("retry attempt %v", a)
					}
				}
				if strings.Contains(fmt.Sprint(a), pw) {
					t.Fatalf("attempt leaks the password: %v", a)
				}
			}
			if n500 != 3 {
				t.Fatalf("%d attempts of retry recorded, want 3: %v", n500, at)
			}
			wantDRPError(t, s.Do("GET", "/plugins/no-such-plugin/attempts", nil, admin()), 404, "", "")
		})

		t.Run("debug_log_masks_secrets", func(t *testing.T) {
			s := s.On(t)
			// Without the preference, Debug logs nothing.
			s.Must(200, "POST", "/machines/"+m1+"/actions/callbackDo?plugin=cb", map[string]any{"callback/action": "debugged"}, admin())
			if strings.Contains(s.Stderr.String(), `"callback request"`) {
				t.Fatal("Debug logged without rs-debug-enable")
			}
			s.Must(200, "POST", "/prefs", map[string]any{"rs-debug-enable": "true"}, admin())
			s.Must(200, "POST", "/machines/"+m1+"/actions/callbackDo?plugin=cb", map[string]any{"callback/action": "debugged"}, admin())
			logs := s.Stderr.String()
			if !strings.Contains(logs, `"callback request"`) || !strings.Contains(logs, `"callback response"`) {
				t.Fatalf("no debug request/response log:\n%s", logs)
			}
			basicTok := base64.StdEncoding.EncodeToString([]byte("cbuser:" + pw))
			if strings.Contains(logs, pw) || strings.Contains(logs, basicTok) {
				t.Fatal("the debug log shows the basic credentials")
			}
			if !strings.Contains(logs, `"Authorization":"[REDACTED]"`) {
				t.Fatalf("Authorization not shown masked in the debug log")
			}
			s.Must(200, "POST", "/prefs", map[string]any{"rs-debug-enable": "false"}, admin())
		})
	}, append([]string{"--callback-exec-dir", execDir}, receiverArgs...)...)
}

func firstKey(m map[string]any) string {
	for k := range m {
		return k
	}
	return ""
}

// jobfailPlugin creates a plugin whose jobfail callback posts to rc.
func jobfailPlugin(t testing.TB, s *tserver, rc *receiver) {
	t.Helper()
	mkPlugin(t, s, "cb-jobfail", map[string]any{
		"jobfail": map[string]any{"Url": rc.URL + "/jobfail"},
	}, nil)
}

// failJob gives machine uuid a job and fails it.
func failJob(t testing.TB, s *tserver, uuid string) string {
	t.Helper()
	j := nextTaskJob(t, s, uuid)
	id := j["Uuid"].(string)
	setJobState(t, s, id, "running")
	setJobState(t, s, id, "failed")
	return id
}

// jobMachine creates a machine with a one-task workflow, ready for a job.
func jobMachine(t testing.TB, s *tserver, name string) string {
	t.Helper()
	if s.Do("GET", "/workflows/wf-jf", nil, admin()).Status == 404 {
		mkWorkflow(t, s, "wf-jf", "t-jf")
	}
	return s.On(t).AddMachine(name, map[string]any{"Workflow": "wf-jf"})
}

// TestE2ECallbackJobfail: a failed job sends the jobfail callback exactly
// once, across restarts and across servers sharing a database (docs/design.md §12.9).
func TestE2ECallbackJobfail(t *testing.T) {
	t.Parallel()
	t.Run("once", func(t *testing.T) {
		forEachDB(t, func(t *testing.T, s *tserver) {
			rc := newReceiver(t)
			jobfailPlugin(t, s, rc)
			u := jobMachine(t, s, "jf1")
			job := failJob(t, s, u)
			hits := rc.waitFor(t, "/jobfail", 1, 10*time.Second)
			var m map[string]any
			if err := json.Unmarshal(hits[0].Body, &m); err != nil || m["Uuid"] != u || hits[0].Method != "POST" {
				t.Fatalf("jobfail request %s %s", hits[0].Method, hits[0].Body)
			}
			if _, ok := m["Secret"]; ok {
				t.Fatal("jobfail sent the machine Secret")
			}
			if got := hits[0].Header.Get("X-Provgate-Job"); got != job {
				t.Fatalf("X-Provgate-Job %q, want %q", got, job)
			}
			// Saving the failed job again is no new failure.
			s.Must(200, "PATCH", "/jobs/"+job, `[{"op":"replace","path":"/ExitState","value":"failed"}]`, admin())
			s.WorkerRounds(t)
			if n := len(rc.on("/jobfail")); n != 1 {
				t.Fatalf("jobfail sent %d times, want 1", n)
			}
		}, receiverArgs...)
	})

	t.Run("across_restart", func(t *testing.T) {
		for _, db := range databases(t) {
			t.Run(db.Name, func(t *testing.T) {
				t.Parallel()
				rc := newReceiver(t)
				inFlight := make(chan struct{}, 1)
				first := true
				var mu sync.Mutex
				// The first delivery hangs until the server goes away.
				rc.handle("/jobfail", func(w http.ResponseWriter, r *http.Request) bool {
					mu.Lock()
					hang := first
					first = false
					mu.Unlock()
					if hang {
						inFlight <- struct{}{}
						<-r.Context().Done()
						return true
					}
					return false
				})
				dir := t.TempDir()
				s := startE2EIn(t, db, dir, receiverArgs...)
				jobfailPlugin(t, s, rc)
				u := jobMachine(t, s, "jf-restart")
				failJob(t, s, u)
				select {
				case <-inFlight:
				case <-time.After(10 * time.Second):
					t.Fatal("the jobfail delivery never started")
				}
				s.Stop()
				s2 := startE2EIn(t, db, dir, receiverArgs...)
				delivered := func() int {
					n := 0
					for _, h := range rc.on("/jobfail") {
						if !h.Aborted {
							n++
						}
					}
					return n
				}
				deadline := time.Now().Add(10 * time.Second)
				for delivered() < 1 {
					if time.Now().After(deadline) {
						t.Fatalf("jobfail not delivered after the restart; stderr:\n%s", s2.Stderr.String())
					}
					time.Sleep(50 * time.Millisecond)
				}
				s2.WorkerRounds(t)
				if n := delivered(); n != 1 {
					t.Fatalf("jobfail delivered %d times after the restart, want 1", n)
				}
				if h := rc.on("/jobfail"); !strings.Contains(string(h[len(h)-1].Body), u) {
					t.Fatalf("jobfail body %s", h[len(h)-1].Body)
				}
			})
		}
	})

	t.Run("stop_right_after_failure", func(t *testing.T) {
		for _, db := range databases(t) {
			t.Run(db.Name, func(t *testing.T) {
				t.Parallel()
				rc := newReceiver(t)
				dir := t.TempDir()
				s := startE2EIn(t, db, dir, receiverArgs...)
				jobfailPlugin(t, s, rc)
				u := jobMachine(t, s, "jf-stop")
				failJob(t, s, u)
				s.Stop()
				s2 := startE2EIn(t, db, dir, receiverArgs...)
				deadline := time.Now().Add(10 * time.Second)
				for len(rc.on("/jobfail")) < 1 {
					if time.Now().After(deadline) {
						t.Fatalf("jobfail not delivered within 10s of the restart\nfirst server's stderr:\n%s\nrestarted server's stderr:\n%s",
							s.Stderr.String(), s2.Stderr.String())
					}
					time.Sleep(20 * time.Millisecond)
				}
				s2.WorkerRounds(t)
				if n := len(rc.on("/jobfail")); n != 1 {
					t.Fatalf("jobfail sent %d times, want 1", n)
				}
			})
		}
	})

	t.Run("two_servers_postgres", func(t *testing.T) {
		var pg *dbCase
		for _, db := range databases(t) {
			if db.DSN != "" {
				pg = &db
			}
		}
		if pg == nil {
			t.Skip("PROVGATE_TEST_DATABASE not set")
		}
		rc := newReceiver(t)
		s1 := startE2E(t, *pg, receiverArgs...)
		s2 := startE2E(t, *pg, receiverArgs...)
		jobfailPlugin(t, s1, rc)
		const n = 6
		jobs := map[string]bool{}
		for i := 0; i < n; i++ {
			s := []*tserver{s1, s2}[i%2]
			u := jobMachine(t, s, fmt.Sprintf("jf2-%d", i))
			jobs[failJob(t, s, u)] = true
		}
		rc.waitFor(t, "/jobfail", n, 15*time.Second)
		s1.WorkerRounds(t)
		s2.WorkerRounds(t)
		hits := rc.on("/jobfail")
		seen := map[string]int{}
		for _, h := range hits {
			seen[h.Header.Get("X-Provgate-Job")]++
		}
		if len(hits) != n || len(seen) != n {
			t.Fatalf("%d jobfail requests for %d jobs: %v", len(hits), n, seen)
		}
		for j := range jobs {
			if seen[j] != 1 {
				t.Fatalf("job %s sent %d times", j, seen[j])
			}
		}
	})
}
