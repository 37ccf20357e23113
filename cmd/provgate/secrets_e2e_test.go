package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/provgate/provgate/backend"
	"github.com/provgate/provgate/backend/store"
)

// seen is every response the secrets test received.
type seen struct {
	mu    sync.Mutex
	resps []seenResp
}

type seenResp struct {
	req      string
	tokenEP  bool // the token endpoint's own reply may carry the token it issues
	header   http.Header
	body     []byte
	tokenOut string
}

func (v *seen) add(r seenResp) {
	v.mu.Lock()
	v.resps = append(v.resps, r)
	v.mu.Unlock()
}

// TestE2ESecrets runs the API under concurrent load with every debug switch
// on, then searches every log line, the decision log and every response for
// the secrets involved: passwords, user Secrets, issued tokens, callback
// auth passwords and json-token material, secure param values. None may
// appear, except a token in the token endpoint's own reply.
func TestE2ESecrets(t *testing.T) {
	t.Parallel()
	for _, db := range databases(t) {
		t.Run(db.Name, func(t *testing.T) {
			t.Parallel()
			decisions := filepath.Join(t.TempDir(), "decisions.jsonl")
			s := startE2E(t, db, append(append(licenseArgs(t), "--log-level", "debug", "--decision-log", decisions), receiverArgs...)...)
			testSecrets(t, s, decisions)
		})
	}
}

func testSecrets(t *testing.T, s *tserver, decisions string) {
	const (
		bobPW      = "bob-Pa55-sekrit-7d1e"
		alicePW    = "alice-Pa55-sekrit-91aa"
		alicePW2   = "alice-Pa55-changed-c3f0"
		cbBasicPW  = "cb-basic-sekrit-55b2"
		cbJSONData = "cb-json-data-sekrit-0e7a"
		cbJSONTok  = "cb-json-token-sekrit-a4d9"
		securePlan = "secure-plain-sekrit-6b3c"
	)
	var rec seen
	// do runs on the load goroutines too: a transport error is reported
	// with t.Errorf, which is safe there.
	do := func(method, path string, body any, authz string) resp {
		r, err := s.Send(method, path, body, authz)
		if err != nil {
			t.Errorf("%v", err)
			return r
		}
		sr := seenResp{req: method + " " + path, header: r.Header, body: r.Body,
			tokenEP: strings.Contains(path, "/token")}
		if sr.tokenEP && r.Status == 200 {
			var out struct{ Token string }
			_ = json.Unmarshal(r.Body, &out)
			sr.tokenOut = out.Token
		}
		rec.add(sr)
		return r
	}
	must := func(want int, method, path string, body any, authz string) resp {
		t.Helper()
		r := do(method, path, body, authz)
		if r.Status != want {
			t.Fatalf("%s %s: %s, want %d", method, path, r, want)
		}
		return r
	}

	rc := newReceiver(t)
	rc.handle("/token", func(w http.ResponseWriter, r *http.Request) bool {
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"access_token":%q,"expires_in":60}`, cbJSONTok)
		return false
	})
	adm := admin()
	must(200, "POST", "/prefs", map[string]any{"rs-debug-enable": "true"}, adm)
	must(201, "POST", "/roles", map[string]any{"Name": "reader", "Claims": []map[string]string{
		{"scope": "machines,profiles,params", "action": "get,list", "specific": "*"}}}, adm)
	must(201, "POST", "/users", map[string]any{"Name": "bob", "Password": bobPW, "Roles": []string{"reader"}}, adm)
	must(201, "POST", "/users", map[string]any{"Name": "alice", "Password": alicePW, "Roles": []string{"superuser"}}, adm)
	must(201, "POST", "/pools", map[string]any{"Id": "sp"}, adm)
	must(201, "POST", "/params", map[string]any{"Name": "sec/val", "Secure": true, "Schema": map[string]any{"type": "string"}}, adm)
	var m map[string]any
	must(201, "POST", "/machines", map[string]any{"Name": "sm1", "Address": "192.0.2.7"}, adm).JSON(t, &m)
	m1 := m["Uuid"].(string)
	must(200, "PUT", "/machines/"+m1+"/params/sec/val", `"`+securePlan+`"`, adm)
	must(201, "POST", "/plugins", map[string]any{"Name": "cb", "Provider": "callback", "Params": map[string]any{
		"callback/callbacks": map[string]any{
			"basic": map[string]any{"Url": rc.URL + "/basic", "Auth": "ba", "Debug": true},
			"json":  map[string]any{"Url": rc.URL + "/json", "Auths": []string{"jt"}, "Debug": true, "Decode": true},
		},
		"callback/auths": map[string]any{
			"ba": map[string]any{"AuthType": "basic", "Username": "cbuser", "Password": cbBasicPW, "Debug": true},
			"jt": map[string]any{"AuthType": "json-token", "Url": rc.URL + "/token", "Method": "POST",
				"Data": `{"client":"` + cbJSONData + `"}`, "TokenField": "access_token", "DurationField": "expires_in", "Debug": true},
		},
	}}, adm)

	// Load: a few hundred requests across routes, concurrently.
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			bobTok := ""
			for i := 0; i < 40; i++ {
				switch i % 10 {
				case 0:
					r := do("GET", "/users/bob/token?ttl=600", nil, basic("bob", bobPW))
					if r.Status == 200 {
						var out struct{ Token string }
						_ = json.Unmarshal(r.Body, &out)
						bobTok = out.Token
					}
				case 1:
					do("GET", "/machines", nil, bearer(bobTok))
				case 2:
					do("GET", "/machines/"+m1+"/params/sec/val", nil, basic("alice", alicePW))
				case 3:
					do("GET", "/machines/"+m1+"/params/sec/val?decode=true", nil, bearer(bobTok)) // 403: no getSecure
				case 4:
					do("POST", "/machines/"+m1+"/actions/callbackDo?plugin=cb", map[string]any{"callback/action": []string{"basic", "json"}[w%2]}, adm)
				case 5:
					do("GET", "/users", nil, adm)
					verb := []string{"addMachines", "removeMachines"}[(i/10)%2]
					do("POST", "/pools/sp/"+verb, map[string]any{"pool/count": 1, "pool/minimum": 0}, adm)
				case 6:
					do("GET", "/plugins/cb", nil, basic("alice", alicePW))
				case 7:
					do("PATCH", "/machines/"+m1, []map[string]any{{"op": "replace", "path": "/Description", "value": fmt.Sprintf("w%d-%d", w, i)}}, adm)
				case 8:
					do("GET", "/profiles", nil, basic("bob", "wrong-"+bobPW[:4])) // a failed login
				case 9:
					do("GET", "/users/alice/token", nil, basic("alice", alicePW))
				}
			}
		}(w)
	}
	wg.Wait()
	must(200, "PUT", "/users/alice/password", map[string]any{"password": alicePW2}, adm)
	must(200, "GET", "/users/alice", nil, basic("alice", alicePW2))
	if hits := rc.on("/json"); len(hits) == 0 {
		t.Fatalf("no json-token callback reached the receiver")
	}

	// The secrets: known ones, tokens issued, and user Secrets read from
	// the store itself.
	secrets := map[string]string{
		"admin password": e2eAdminPassword, "bob password": bobPW, "alice password": alicePW,
		"alice new password": alicePW2, "callback basic password": cbBasicPW, "json-token data": cbJSONData,
		"json-token token": cbJSONTok, "secure param value": securePlan,
	}
	rec.mu.Lock()
	for i, r := range rec.resps {
		if r.tokenOut != "" {
			secrets[fmt.Sprintf("token %d from %s", i, r.req)] = r.tokenOut
		}
	}
	rec.mu.Unlock()
	dsn := s.DSN
	if dsn == "" {
		dsn = filepath.Join(s.DataDir, "provgate.db")
	}
	st, err := store.Open(context.Background(), dsn, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	users, _, _, err := st.List(context.Background(), "users", backend.Query{Limit: -1})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range users {
		var v struct{ Name, Secret string }
		if err := json.Unmarshal(u.Data, &v); err != nil || v.Secret == "" {
			t.Fatalf("user record %s: no Secret (%v)", u.Key, err)
		}
		secrets["Secret of "+v.Name] = v.Secret
	}

	// The haystacks.
	dl, err := os.ReadFile(decisions)
	if err != nil || len(dl) == 0 {
		t.Fatalf("decision log: %v (%d bytes)", err, len(dl))
	}
	hay := map[string]string{"stdout": s.Stdout.String(), "stderr": s.Stderr.String(), "decision log": string(dl)}
	logs := hay["stdout"] + hay["stderr"]
	for _, want := range []string{`"level":"DEBUG"`, `"msg":"callback request"`, `"msg":"callback auth request"`} {
		// The search means something only if the debug output was there.
		if !strings.Contains(logs, want) {
			t.Errorf("no %s line logged: debug output is not on", want)
		}
	}
	rec.mu.Lock()
	for i, r := range rec.resps {
		var h strings.Builder
		for k, vs := range r.header {
			fmt.Fprintf(&h, "%s: %s\n", k, strings.Join(vs, ","))
		}
		body := string(r.body)
		if r.tokenOut != "" {
			// The token endpoint hands out exactly this token.
			body = strings.ReplaceAll(body, r.tokenOut, "<issued token>")
		}
		hay[fmt.Sprintf("response %d (%s) headers", i, r.req)] = h.String()
		hay[fmt.Sprintf("response %d (%s) body", i, r.req)] = body
	}
	n := len(rec.resps)
	rec.mu.Unlock()
	found := 0
	for what, sec := range secrets {
		for where, text := range hay {
			if strings.Contains(text, sec) {
				found++
				i := strings.Index(text, sec)
				t.Errorf("%s found in %s: ...%s...", what, where, text[max(0, i-200):min(len(text), i+len(sec)+100)])
			}
		}
	}
	t.Logf("%s: %d requests, %d secrets searched in %d log bytes, %d decision-log bytes and %d responses: %d found",
		s.Name, n, len(secrets), len(hay["stdout"])+len(hay["stderr"]), len(dl), n, found)
}
