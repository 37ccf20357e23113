package main

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/provgate/provgate/backend"
)

// badCase is one hostile request and the 4xx it is documented to get.
type badCase struct {
	name   string
	method string
	path   string // relative to /api/v3, sent as written
	body   any    // nil, string or []byte
	hdrs   []string
	authz  string // "" is the admin token
	raw    string // when set, sent as is over TLS instead of method/path/body
	large  int    // when set, a body of this many bytes is announced (see doLarge)
	want   int
	// mayClose: the server may refuse by closing the connection while the
	// client still writes (a request head over the limit), so the client
	// sees a reset or a broken pipe instead of the reply. Either outcome
	// passes if the server then answers as before.
	mayClose bool
}

const badUUID = "3e7031fe-3062-45f1-835c-92541bc9cbd3"

// badCases builds the table. m1 is the fixture machine's UUID.
func badCases(m1 string) []badCase {
	var cs []badCase
	add := func(c badCase) { cs = append(cs, c) }
	big := `{"Name":"big","Description":"` + strings.Repeat("x", 5<<20) + `"}`
	deep := strings.Repeat("[", 100000) + strings.Repeat("]", 100000)
	named := map[string]string{ // kind → key field of the name rule
		"profiles": "Name", "workflows": "Name", "stages": "Name", "tasks": "Name", "bootenvs": "Name",
		"pools": "Id", "roles": "Name", "tenants": "Name", "users": "Name", "machines": "Name",
		"params": "Name", "plugins": "Name",
	}
	existing := map[string]string{ // an existing object per kind, for PUT/PATCH
		"profiles": "p1", "workflows": "w1", "stages": "s1", "tasks": "t1", "bootenvs": "be1",
		"pools": "pa", "roles": "ops", "tenants": "tn1", "users": "bob", "machines": m1,
		"params": "sec/val", "plugins": "cb", "reservations": "192.0.2.9",
	}
	kinds := []string{"profiles", "workflows", "stages", "tasks", "bootenvs", "pools", "roles", "tenants", "users",
		"machines", "params", "plugins", "reservations"}

	// Malformed, wrong-typed and oversized bodies on every create, replace
	// and patch route.
	for _, k := range kinds {
		key := existing[k]
		add(badCase{name: k + "/create-truncated", method: "POST", path: "/" + k, body: `{"Name":`, want: 400})
		add(badCase{name: k + "/create-array", method: "POST", path: "/" + k, body: `[1,2]`, want: 400})
		add(badCase{name: k + "/create-string", method: "POST", path: "/" + k, body: `"x"`, want: 400})
		add(badCase{name: k + "/create-deep", method: "POST", path: "/" + k, body: deep, want: 400})
		add(badCase{name: k + "/create-too-large", method: "POST", path: "/" + k, large: len(big), want: 413})
		add(badCase{name: k + "/put-not-json", method: "PUT", path: "/" + k + "/" + key, body: `{nope}`, want: 400})
		add(badCase{name: k + "/put-too-large", method: "PUT", path: "/" + k + "/" + key, large: len(big), want: 413})
		add(badCase{name: k + "/patch-object", method: "PATCH", path: "/" + k + "/" + key, body: `{"op":"replace"}`, want: 400})
		add(badCase{name: k + "/patch-bad-op", method: "PATCH", path: "/" + k + "/" + key, body: `[{"op":"frobnicate","path":"/Description"}]`, want: 400})
		add(badCase{name: k + "/patch-bad-pointer", method: "PATCH", path: "/" + k + "/" + key, body: `[{"op":"replace","path":"Description","value":"x"}]`, want: 400})
		add(badCase{name: k + "/patch-failed-test", method: "PATCH", path: "/" + k + "/" + key, body: `[{"op":"test","path":"/Description","value":"not this"},{"op":"replace","path":"/Description","value":"x"}]`, want: 409})
		add(badCase{name: k + "/patch-missing-path", method: "PATCH", path: "/" + k + "/" + key, body: `[{"op":"remove","path":"/NoSuchField/x"}]`, want: 409})
		add(badCase{name: k + "/patch-wrong-type", method: "PATCH", path: "/" + k + "/" + key, body: `[{"op":"replace","path":"/Meta","value":[1,2]}]`, want: 422})
		add(badCase{name: k + "/get-missing", method: "GET", path: "/" + k + "/nosuch-object-xyz", want: 404})
		add(badCase{name: k + "/delete-missing", method: "DELETE", path: "/" + k + "/nosuch-object-xyz", want: 404})
		add(badCase{name: k + "/list-negative-limit", method: "GET", path: "/" + k + "?limit=-1", want: 406})
		add(badCase{name: k + "/list-sort-injection", method: "GET", path: "/" + k + "?sort=" + url.QueryEscape("Name;DROP TABLE "+k), want: 406})
		add(badCase{name: k + "/list-unknown-filter", method: "GET", path: "/" + k + "?" + url.QueryEscape("1=1;--") + "=x", want: 406})
	}
	// Wrong JSON types for fields.
	for _, c := range []struct{ k, body string }{
		{"profiles", `{"Name":5}`}, {"profiles", `{"Name":"pt","Params":[]}`}, {"machines", `{"Name":"mt","Profiles":"p1"}`},
		{"machines", `{"Name":"mt","Params":"x"}`}, {"users", `{"Name":"ut","Roles":"superuser"}`}, {"roles", `{"Name":"rt","Claims":{}}`},
		{"tenants", `{"Name":"tt","Members":[]}`}, {"pools", `{"Id":"pt","EnterActions":"x"}`}, {"params", `{"Name":"pt/x","Schema":7,"Secure":"yes"}`},
		{"workflows", `{"Name":"wt","Stages":"s1"}`}, {"stages", `{"Name":"st","Tasks":{"a":1}}`}, {"plugins", `{"Name":"pt","Params":"x"}`},
	} {
		add(badCase{name: c.k + "/wrong-type " + c.body, method: "POST", path: "/" + c.k, body: c.body, want: 400})
	}
	// Names with unicode and control characters.
	for k, f := range named {
		for _, n := range []struct{ label, v string }{
			{"rtl-override", "ab\u202ecd"}, {"nul", "ab\x00cd"}, {"newline", "ab\ncd"}, {"emoji", "ab\U0001F600cd"},
			{"10k", strings.Repeat("a", 10000)}, {"empty", ""}, {"dotdot", "../../etc/passwd"},
		} {
			b, _ := json.Marshal(map[string]any{f: n.v})
			want := 422
			if n.v == "" && k != "machines" {
				want = 400 // DRP: Empty key not allowed (a machine's key is its Uuid)
			}
			add(badCase{name: k + "/name-" + n.label, method: "POST", path: "/" + k, body: string(b), want: want})
		}
	}
	// Bad keys in paths.
	for _, p := range []struct {
		label, path string
		want        int
	}{
		{"unknown-index", "/machines/Bogus:x", 404}, {"nul-index", "/machines/Name:%00", 404}, {"nul", "/profiles/%00", 404},
		{"dotdot-encoded", "/profiles/%2e%2e%2f%2e%2e%2fetc", 404}, {"params-traversal", "/params/../../etc/passwd", 404},
		{"params-traversal-enc", "/params/%2e%2e/%2e%2e/etc/passwd", 404}, {"long-key", "/profiles/" + strings.Repeat("k", 10000), 404},
		{"long-index", "/machines/Name:" + strings.Repeat("k", 10000), 404}, {"no-route", "/nosuchkind", 404}, {"no-route-deep", "/machines/" + m1 + "/frobs/x", 404}, {"sql-key", "/profiles/x'%20OR%20'1'='1", 404},
		{"meta-unknown-kind", "/meta/nosuch/x", 404}, {"indexes-unknown", "/indexes/nosuch", 404}, {"param-of-missing", "/machines/nosuch/params", 404},
		{"pool-status-bad", "/pools/%00/status", 404}, {"job-log-missing", "/jobs/" + badUUID + "/log", 404},
	} {
		add(badCase{name: "key/" + p.label, method: "GET", path: p.path, want: p.want})
	}
	add(badCase{name: "key/header-too-large", method: "GET", path: "/profiles/" + strings.Repeat("k", 20000), want: 431, mayClose: true})
	// Injection in filters.
	for _, q := range []string{
		"Name=Re([)", "Name=Between(a)", "Name=Eq(x", "limit=abc", "offset=-3", "reverse=perhaps", "sort=Params",
		"Available=" + url.QueryEscape("true' OR '1'='1"), "CurrentTask=Gt(" + url.QueryEscape("1; DROP TABLE machines") + ")",
		"sort=" + url.QueryEscape("Name DESC; DELETE FROM machines"), url.QueryEscape("Name') OR 1=1 --") + "=x",
		"Uuid=Between(a,b,c)", "Locked=Eq(1)", "Name=%00", "Name=In(a,%00)", "Meta.color=Ne(%00)",
	} {
		add(badCase{name: "filter/" + q, method: "GET", path: "/machines?" + q, want: 406})
	}
	// Roles with unknown scopes and actions, and bad update pointers.
	for _, c := range []string{
		`{"scope":"nosuch","action":"get","specific":"*"}`, `{"scope":"machines","action":"frob","specific":"*"}`,
		`{"scope":"machines,nosuch","action":"get","specific":"*"}`, `{"scope":"machines","action":"update:Params","specific":"*"}`,
		`{"scope":"machines","action":"update:/a~2","specific":"*"}`, `{"scope":"` + strings.Repeat("x", 5000) + `","action":"*","specific":"*"}`,
	} {
		add(badCase{name: "role-claim " + c[:min(len(c), 60)], method: "POST", path: "/roles", body: `{"Name":"rc","Claims":[` + c + `]}`, want: 422})
		add(badCase{name: "role-claim-patch " + c[:min(len(c), 60)], method: "PATCH", path: "/roles/ops", body: `[{"op":"add","path":"/Claims/-","value":` + c + `}]`, want: 422})
	}
	// Pool operation bodies.
	for _, b := range []string{
		`{"pool/count":"x"}`, `{"pool/count":-1}`, `{"pool/unknown":1}`, `{"pool/wait-timeout":"forever"}`, `[]`, `{"pool/machine-list":"m1"}`,
		`{"pool/minimum":5,"pool/count":1}`, `{"pool/add-parameters":{"":1}}`, `{"pool/filter":[""]}`, deep,
	} {
		add(badCase{name: "pool-op " + b[:min(len(b), 40)], method: "POST", path: "/pools/pa/addMachines", body: b, want: 400})
	}
	add(badCase{name: "pool-op too large", method: "POST", path: "/pools/pa/allocateMachines", large: len(big), want: 413})
	// Users, tokens, passwords.
	add(badCase{name: "token bad ttl", method: "GET", path: "/users/rocketskates/token?ttl=forever", want: 400})
	add(badCase{name: "token negative ttl", method: "GET", path: "/users/rocketskates/token?ttl=-5", want: 400})
	add(badCase{name: "token missing user", method: "GET", path: "/users/nosuch/token", want: 404})
	add(badCase{name: "password not json", method: "PUT", path: "/users/bob/password", body: `pw`, want: 400})
	add(badCase{name: "password empty", method: "PUT", path: "/users/bob/password", body: `{"password":""}`, want: 400})
	add(badCase{name: "password nul", method: "PUT", path: "/users/bob/password", body: `{"password":"pw\u0000"}`, want: 400})
	add(badCase{name: "user bad role type", method: "PATCH", path: "/users/bob", body: `[{"op":"replace","path":"/Roles","value":"superuser"}]`, want: 422})
	// Authentication.
	add(badCase{name: "auth malformed basic", method: "GET", path: "/profiles", authz: "Basic !!!", want: 401})
	add(badCase{name: "auth unknown scheme", method: "GET", path: "/profiles", authz: "Digest x", want: 401})
	add(badCase{name: "auth none", method: "GET", path: "/profiles", authz: "-", want: 401})
	add(badCase{name: "auth bad bearer", method: "GET", path: "/profiles", authz: "Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiJyb2NrZXRza2F0ZXMifQ.", want: 403})
	add(badCase{name: "auth bob cannot create", method: "POST", path: "/profiles", body: `{"Name":"bobs"}`, authz: "bob", want: 403})
	add(badCase{name: "auth bob cannot patch secret", method: "PATCH", path: "/machines/" + m1, body: `[{"op":"replace","path":"/Secret","value":"x"}]`, authz: "bob", want: 403})
	// Params sub-resources.
	add(badCase{name: "params not object", method: "POST", path: "/machines/" + m1 + "/params", body: `[1]`, want: 400})
	add(badCase{name: "params bad name", method: "PUT", path: "/machines/" + m1 + "/params/%00", body: `1`, want: 422})
	add(badCase{name: "params schema violation", method: "PUT", path: "/machines/" + m1 + "/params/count/it", body: `"x"`, want: 422})
	add(badCase{name: "params patch bad", method: "PATCH", path: "/machines/" + m1 + "/params", body: `{"a":1}`, want: 400})
	add(badCase{name: "params too large", method: "POST", path: "/profiles/p1/params", large: len(big), want: 413})
	// Jobs.
	add(badCase{name: "job no machine", method: "POST", path: "/jobs", body: `{}`, want: 400})
	add(badCase{name: "job wrong type", method: "POST", path: "/jobs", body: `{"Machine":5}`, want: 400})
	add(badCase{name: "job missing machine", method: "POST", path: "/jobs", body: `{"Machine":"` + badUUID + `"}`, want: 422})
	// Prefs and events.
	add(badCase{name: "prefs not object", method: "POST", path: "/prefs", body: `["x"]`, want: 400})
	add(badCase{name: "prefs wrong type", method: "POST", path: "/prefs", body: `{"rs-debug-enable":{"a":1}}`, want: 400})
	add(badCase{name: "event not json", method: "POST", path: "/events", body: `{`, want: 400})
	// Hostile templates: data-override and plugin config.
	for _, tpl := range []string{
		`{{range $i := until 100000000}}x{{end}}`, `{{repeat 100000000 "x"}}`,
		"{{" + strings.Repeat("(", 11000) + "1" + strings.Repeat(")", 11000) + "}}",
		`{{define "a"}}{{template "a" .}}{{end}}{{template "a" .}}`, `{{.Machine.Secret`, strings.Repeat("{{.Machine.Name}}", 20000),
	} {
		b, _ := json.Marshal(map[string]any{"callback/action": "hook", "callback/data-override": tpl})
		add(badCase{name: "data-override " + tpl[:min(len(tpl), 40)], method: "POST", path: "/machines/" + m1 + "/actions/callbackDo?plugin=cb", body: string(b), want: 400})
	}
	add(badCase{name: "callbackDo unknown callback", method: "POST", path: "/machines/" + m1 + "/actions/callbackDo?plugin=cb", body: `{"callback/action":"nosuch"}`, want: 404})
	add(badCase{name: "callbackDo bad body", method: "POST", path: "/machines/" + m1 + "/actions/callbackDo?plugin=cb", body: `[`, want: 400})
	add(badCase{name: "action unknown", method: "POST", path: "/machines/" + m1 + "/actions/nosuch", body: `{}`, want: 400})
	// Content types, methods and headers.
	add(badCase{name: "method not routed", method: "PATCH", path: "/info", body: `[]`, want: 404})
	add(badCase{name: "delete prefs", method: "DELETE", path: "/prefs", want: 404})
	// Header injection: a CR or LF inside X-Request-Id must not come back
	// as a header of the reply. Without credentials the answer is 401.
	add(badCase{name: "header injection cr", raw: "GET /api/v3/profiles HTTP/1.1\r\nHost: x\r\nX-Request-Id: a\rB: injected\r\n\r\n", want: 401})
	add(badCase{name: "header injection lf", raw: "GET /api/v3/profiles HTTP/1.1\r\nHost: x\r\nX-Request-Id: a\nB: injected\r\n\r\n", want: 401})
	add(badCase{name: "header injection encoded", method: "GET", path: "/profiles", authz: "-", hdrs: []string{"X-Request-Id", "a%0d%0aB: injected"}, want: 401})
	add(badCase{name: "request line injection", raw: "GET /api/v3/profiles\r\nX: y HTTP/1.1\r\nHost: x\r\n\r\n", want: 401})
	return cs
}

// badSnapshot reads every collection as the admin: the store's visible
// state, which no refused request may change.
func badSnapshot(t *testing.T, s *tserver, tok string) map[string]string {
	t.Helper()
	out := map[string]string{}
	paths := []string{"/prefs", "/plugins/cb/attempts"}
	for _, p := range backend.NewCatalog().Prefixes() {
		paths = append(paths, "/"+p)
	}
	for _, p := range paths {
		r := s.Do("GET", p, nil, bearer(tok))
		if r.Status != 200 {
			t.Fatalf("snapshot %s: %s", p, r)
		}
		out[p] = string(r.Body)
	}
	return out
}

// rawTLS sends req as written and reads one response.
func rawTLS(t *testing.T, s *tserver, req string) resp {
	t.Helper()
	u, _ := url.Parse(s.Base)
	conn, err := tls.Dial("tcp", u.Host, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // test server
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := conn.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("read response: %v", err)
	}
	defer res.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(res.Body)
	return resp{Status: res.StatusCode, Header: res.Header, Body: b.Bytes()}
}

// doLarge sends a request whose body is over the limit the way a careful
// client does (Expect: 100-continue), so that the server's refusal arrives
// before the body is written: a server that answers 413 and closes while a
// client is still writing resets the connection, and the client may never
// read the answer.
func doLarge(t *testing.T, s *tserver, method, path, authz string, size int) resp {
	t.Helper()
	u, _ := url.Parse(s.Base)
	conn, err := tls.Dial("tcp", u.Host, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // test server
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	req := fmt.Sprintf("%s %s%s HTTP/1.1\r\nHost: %s\r\nAuthorization: %s\r\nContent-Type: application/json\r\n"+
		"Content-Length: %d\r\nExpect: 100-continue\r\n\r\n", method, u.Path, path, u.Host, authz, size)
	if _, err := conn.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	for {
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("read response: %v", err)
		}
		if res.StatusCode == http.StatusContinue {
			continue
		}
		defer res.Body.Close()
		var b bytes.Buffer
		_, _ = b.ReadFrom(res.Body)
		return resp{Status: res.StatusCode, Header: res.Header, Body: b.Bytes()}
	}
}

// TestE2EBadInput sends hostile requests to every route family and checks
// each gets exactly its documented 4xx as a DRP error object, never a 5xx,
// and leaves the store as it was.
func TestE2EBadInput(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, s *tserver) {
		tok := s.Token("rocketskates", admin(), "?ttl=3600")
		adm := bearer(tok)
		var m map[string]any
		s.Must(201, "POST", "/machines", map[string]any{"Name": "m1", "Address": "192.0.2.5"}, adm).JSON(t, &m)
		m1 := m["Uuid"].(string)
		for _, c := range []struct{ path, body string }{
			{"/bootenvs", `{"Name":"be1"}`}, {"/tasks", `{"Name":"t1"}`}, {"/stages", `{"Name":"s1","BootEnv":"be1","Tasks":["t1"]}`},
			{"/workflows", `{"Name":"w1","Stages":["s1"]}`}, {"/params", `{"Name":"count/it","Schema":{"type":"integer"}}`},
			{"/params", `{"Name":"sec/val","Secure":true,"Schema":{"type":"string"}}`}, {"/profiles", `{"Name":"p1","Params":{"count/it":2}}`},
			{"/pools", `{"Id":"pa"}`}, {"/roles", `{"Name":"ops","Claims":[{"scope":"profiles","action":"get,list","specific":"*"}]}`},
			{"/users", `{"Name":"bob","Password":"bob-Pa55","Roles":["ops"]}`}, {"/tenants", `{"Name":"tn1"}`},
			{"/reservations", `{"Addr":"192.0.2.9","Token":"aa:bb:cc:dd:ee:ff","Strategy":"MAC"}`},
			{"/plugins", `{"Name":"cb","Provider":"callback","Params":{"callback/callbacks":{"hook":{"Url":"http://127.0.0.1:1/x","Timeout":1}}}}`},
		} {
			s.Must(201, "POST", c.path, c.body, adm)
		}
		bob := basic("bob", "bob-Pa55")
		cases := badCases(m1)
		if len(cases) < 200 {
			t.Fatalf("only %d cases", len(cases))
		}
		before := badSnapshot(t, s, tok)
		fivexx := 0
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				s := s.On(t)
				var r resp
				switch {
				case c.raw != "":
					r = rawTLS(t, s, c.raw)
				case c.large > 0:
					r = doLarge(t, s, c.method, c.path, adm, c.large)
				default:
					authz := adm
					switch c.authz {
					case "":
					case "-":
						authz = ""
					case "bob":
						authz = bob
					default:
						authz = c.authz
					}
					if !c.mayClose {
						r = s.Do(c.method, c.path, c.body, authz, c.hdrs...)
						break
					}
					var err error
					if r, err = s.Send(c.method, c.path, c.body, authz, c.hdrs...); err != nil {
						if !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, syscall.EPIPE) && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
							t.Fatalf("neither a reply nor a closed connection: %v", err)
						}
						// Refused by closing: the server stays up and the
						// store unchanged.
						t.Logf("the server closed the connection: %v", err)
						s.Must(200, "GET", "/info", nil, adm)
						after := badSnapshot(t, s, tok)
						for p, b := range before {
							if after[p] != b {
								t.Errorf("store changed at %s:\nbefore %.500s\nafter  %.500s", p, b, after[p])
							}
						}
						return
					}
				}
				if r.Status >= 500 {
					fivexx++
				}
				if r.Header.Get("B") != "" || strings.ContainsAny(r.Header.Get("X-Request-Id"), "\r\n") {
					t.Errorf("request header leaked into the reply: %v", r.Header)
				}
				if ct := r.Header.Get("Content-Type"); ct != "application/json" {
					t.Errorf("Content-Type %q", ct)
				}
				after := badSnapshot(t, s, tok)
				for p, b := range before {
					if after[p] != b {
						t.Errorf("store changed at %s:\nbefore %.500s\nafter  %.500s", p, b, after[p])
					}
				}
				before = after
				// Last, as it ends the case on a wrong status.
				wantDRPError(t, r, c.want, "", "")
			})
		}
		t.Logf("%s: %d bad-input cases, %d answered 5xx", s.Name, len(cases), fivexx)
		if fivexx != 0 {
			t.Errorf("%d cases answered 5xx", fivexx)
		}
	}, licenseArgs(t)...)
}
