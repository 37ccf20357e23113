package main

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/scrypt"
)

// The one test client of the end-to-end suites. A *tserver is bound to the
// test that started it; s.On(t) is the same server with failures reported to
// t (a subtest), so helpers called from a subtest fail that subtest.
//
//	r := s.Do("GET", "/machines/"+uuid, nil, admin())        // any status
//	s.Must(201, "POST", "/profiles", body, admin())           // fails unless 201
//	wantDRPError(t, r, 403, "AUTH", "Requires: machines get") // a DRP error reply
//	r, err := s.Send("GET", "/machines", nil, authz)          // from goroutines
//	ch := s.Go("GET", path, nil, authz, "Prefer", "wait=20s")  // in the background
//	r := await(t, ch, 30*time.Second, "the long poll")        // its reply
//
// Only Send, SendURL, rawDo and Go may be called from goroutines other than
// the test's: every other method can end the test with t.Fatal, which must
// run on the test's own goroutine.

// Auth values for requests.
func basic(user, pw string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pw))
}
func bearer(tok string) string { return "Bearer " + tok }

// admin is the Authorization of the bootstrap superuser.
func admin() string { return basic("rocketskates", e2eAdminPassword) }

type resp struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body into v, failing the test on error.
func (r resp) JSON(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("decode %q: %v", r.Body, err)
	}
}

// Map decodes a JSON object body.
func (r resp) Map(t testing.TB) map[string]any {
	t.Helper()
	m := map[string]any{}
	r.JSON(t, &m)
	return m
}

func (r resp) String() string { return fmt.Sprintf("%d %s", r.Status, r.Body) }

// On returns s with its failures reported to t.
func (s *tserver) On(t testing.TB) *tserver {
	c := *s
	c.t = t
	return &c
}

// Send sends one request and returns transport errors instead of failing a
// test: it is the call for goroutines. body may be nil, a string or []byte
// (sent as is), or any other value (sent as JSON). path is relative to
// /api/v3; hdrs are name, value pairs.
func (s *tserver) Send(method, path string, body any, authz string, hdrs ...string) (resp, error) {
	return s.SendURL(method, s.Base+path, body, authz, hdrs...)
}

// SendURL is Send for a full URL.
func (s *tserver) SendURL(method, u string, body any, authz string, hdrs ...string) (resp, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			return resp{}, err
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, u, rd)
	if err != nil {
		return resp{}, err
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	for i := 0; i+1 < len(hdrs); i += 2 {
		req.Header.Set(hdrs[i], hdrs[i+1])
	}
	res, err := s.client.Do(req)
	if err != nil {
		return resp{}, fmt.Errorf("%s %s: %w", method, u, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return resp{}, fmt.Errorf("%s %s: reading the reply: %w", method, u, err)
	}
	return resp{Status: res.StatusCode, Header: res.Header, Body: b}, nil
}

// rawDo is Send without a body, for callers that need only the status and
// the body of the reply; like Send, it is safe from goroutines.
func (s *tserver) rawDo(method, path, authz string) (int, []byte, error) {
	r, err := s.Send(method, path, nil, authz)
	return r.Status, r.Body, err
}

// Do sends one request (see Send), failing the test on transport errors.
func (s *tserver) Do(method, path string, body any, authz string, hdrs ...string) resp {
	s.t.Helper()
	return s.DoURL(s.t, method, s.Base+path, body, authz, hdrs...)
}

// DoURL is Do for a full URL, failing t (which may be a subtest) on
// transport errors.
func (s *tserver) DoURL(t testing.TB, method, u string, body any, authz string, hdrs ...string) resp {
	t.Helper()
	r, err := s.SendURL(method, u, body, authz, hdrs...)
	if err != nil {
		t.Fatal(err)
	}
	wantJSONType(t, method, u, r)
	return r
}

// jobLog is the path of a job log, the one API reply that is not JSON.
var jobLog = regexp.MustCompile(`/api/v3/jobs/[^/]+/log$`)

// wantJSONType checks the Content-Type every DRP client relies on
// (docs/design.md §3.3): application/json on every reply that is neither
// HEAD nor 304, except a job log download and /metrics.
func wantJSONType(t testing.TB, method, u string, r resp) {
	t.Helper()
	if method == http.MethodHead || r.Status == http.StatusNotModified {
		return
	}
	path := u
	if pu, err := url.Parse(u); err == nil {
		path = pu.Path
	}
	if path == "/metrics" || (r.Status == http.StatusOK && method == http.MethodGet && jobLog.MatchString(path)) {
		return
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("%s %s: %d with Content-Type %q, want application/json", method, u, r.Status, ct)
	}
}

// Must sends a request and fails the test unless the status is want.
func (s *tserver) Must(want int, method, path string, body any, authz string, hdrs ...string) resp {
	s.t.Helper()
	r := s.Do(method, path, body, authz, hdrs...)
	if r.Status != want {
		s.t.Fatalf("%s %s: got %d %s, want %d", method, path, r.Status, r.Body, want)
	}
	return r
}

// Token gets a token for user with the given credentials and query.
func (s *tserver) Token(user, authz, query string) string {
	s.t.Helper()
	r := s.Must(200, "GET", "/users/"+user+"/token"+query, nil, authz)
	var out struct{ Token string }
	r.JSON(s.t, &out)
	if out.Token == "" {
		s.t.Fatalf("empty token in %s", r.Body)
	}
	return out.Token
}

// AddUser creates a user with a password and roles (as the admin). The
// user is created with a PasswordHash (as `drpcli users create` may send)
// made at the lowest scrypt cost the server accepts: the suites create
// hundreds of fixture users, and at the default cost each creation and
// first login is half a second of CPU under the race detector. Logins still
// run the server's real scrypt check on that hash; hashing a "Password" is
// tested where it is the subject (access_e2e_test.go, users).
func (s *tserver) AddUser(name, pw string, roles ...string) {
	s.t.Helper()
	if roles == nil {
		roles = []string{}
	}
	s.Must(201, "POST", "/users", map[string]any{"Name": name, "PasswordHash": fixtureHash(s.t, pw), "Roles": roles}, admin())
}

// fixtureHash is a scrypt hash of pw in the simple-scrypt form the server
// stores (N$r$p$salt-hex$key-hex) with N=1024, r=8, p=1: the smallest N
// the server accepts (gateway/auth/password.go).
func fixtureHash(t testing.TB, pw string) []byte {
	t.Helper()
	salt := make([]byte, 16)
	if _, err := rand.Read(salt); err != nil {
		t.Fatal(err)
	}
	const n, r, p = 1 << 10, 8, 1
	key, err := scrypt.Key([]byte(pw), salt, n, r, p, 32)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Appendf(nil, "%d$%d$%d$%x$%x", n, r, p, salt, key)
}

// AddRole creates a role (as the admin; needs the rbac license).
func (s *tserver) AddRole(name string, claims ...[3]string) {
	s.t.Helper()
	cs := []map[string]string{}
	for _, c := range claims {
		cs = append(cs, map[string]string{"scope": c[0], "action": c[1], "specific": c[2]})
	}
	s.Must(201, "POST", "/roles", map[string]any{"Name": name, "Claims": cs}, admin())
}

// drpError is DRP's error object (docs/design.md §3.2).
type drpError struct {
	Model, Key, Type string
	Messages         []string
	Code             int
}

// wantDRPError is the one assertion for error replies: r has the given
// status and a DRP error object with all five fields, Code equal to the
// status, at least one message, Type typ ("" for any) and a message
// containing msg ("" for any). It returns the object for further checks.
func wantDRPError(t testing.TB, r resp, status int, typ, msg string) drpError {
	t.Helper()
	if r.Status != status {
		t.Fatalf("got %s, want status %d", r, status)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(r.Body, &fields); err != nil {
		t.Fatalf("error body %q is not a JSON object: %v", r.Body, err)
	}
	for _, f := range []string{"Model", "Key", "Type", "Messages", "Code"} {
		if _, ok := fields[f]; !ok {
			t.Errorf("error object lacks %s: %s", f, r.Body)
		}
	}
	var e drpError
	if err := json.Unmarshal(r.Body, &e); err != nil {
		t.Fatalf("error body %q is not a DRP error object: %v", r.Body, err)
	}
	if e.Code != status {
		t.Errorf("error Code %d, want the status %d: %s", e.Code, status, r.Body)
	}
	if typ != "" && e.Type != typ {
		t.Errorf("error Type %q, want %q: %s", e.Type, typ, r.Body)
	}
	if len(e.Messages) == 0 {
		t.Errorf("error without Messages: %s", r.Body)
	}
	if msg != "" && !slices.ContainsFunc(e.Messages, func(m string) bool { return strings.Contains(m, msg) }) {
		t.Errorf("no error message contains %q: %s", msg, r.Body)
	}
	return e
}

// about fails t unless the error names model and key ("*" for any).
func (e drpError) about(t testing.TB, model, key string) drpError {
	t.Helper()
	if model != "*" && e.Model != model {
		t.Errorf("error Model %q, want %q (%+v)", e.Model, model, e)
	}
	if key != "*" && e.Key != key {
		t.Errorf("error Key %q, want %q (%+v)", e.Key, key, e)
	}
	return e
}

// messages joins the error's messages for checks and failure reports.
func (e drpError) messages() string { return strings.Join(e.Messages, " | ") }

// reply is the outcome of a request sent in the background with Go.
type reply struct {
	resp
	Err  error
	Took time.Duration // from the call to Go until the reply was read
}

// Go sends a request (see Send) on its own goroutine and delivers the reply
// on the returned channel; transport errors are delivered, never fatal.
// Wait for the reply with await.
func (s *tserver) Go(method, path string, body any, authz string, hdrs ...string) <-chan reply {
	ch := make(chan reply, 1)
	start := time.Now()
	go func() {
		r, err := s.Send(method, path, body, authz, hdrs...)
		ch <- reply{resp: r, Err: err, Took: time.Since(start)}
	}()
	return ch
}

// await waits up to d for the reply of Go, failing t on a transport error or
// when no reply comes; what names the request in the failure.
func await(t testing.TB, ch <-chan reply, d time.Duration, what string) reply {
	t.Helper()
	select {
	case r := <-ch:
		if r.Err != nil {
			t.Fatalf("%s: %v", what, r.Err)
		}
		return r
	case <-time.After(d):
		t.Fatalf("%s: no reply within %s", what, d)
	}
	return reply{}
}
