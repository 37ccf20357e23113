package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// The access explorer's page in a real browser (docs/design.md §9.10):
// Debian's chromium driven by chromedp loads each view, reads what a person
// reads there, fails on any console error, exception or Content-Security-
// Policy violation, loads one view with JavaScript disabled, and keeps a
// screenshot of each view under test-artifacts/ui (PROVGATE_TEST_ARTIFACTS
// overrides the directory). .ci/run installs chromium.

// artifactsDir is where the browser tests keep their screenshots.
func artifactsDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("PROVGATE_TEST_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("..", "..", "test-artifacts")
	}
	dir = filepath.Join(dir, "ui")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// browser is one chromium tab and every console message it got.
type browser struct {
	t    *testing.T
	ctx  context.Context
	mu   sync.Mutex
	msgs []chromedp.ConsoleMessage
}

func newBrowser(t *testing.T, authz string) *browser {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("chromium is not installed (apt-get install chromium; .ci/run installs it): %v", err)
	}
	opts := append([]chromedp.ExecAllocatorOption{}, chromedp.DefaultExecAllocatorOptions[:]...)
	opts = append(opts, chromedp.ExecPath(path), chromedp.IgnoreCertErrors, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.WindowSize(1280, 900))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(func() { cancelTimeout(); cancel(); cancelAlloc() })
	b := &browser{t: t, ctx: ctx}
	// Start the browser, then listen to its console from the first page on.
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	if _, err := chromedp.Call(ctx, cdplog.Enable, cdp.Empty{}); err != nil {
		t.Fatal(err)
	}
	msgs := chromedp.Console(ctx)
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			b.mu.Lock()
			b.msgs = append(b.msgs, m)
			b.mu.Unlock()
		}
	}()
	if authz != "" {
		if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
			t.Fatal(err)
		}
		if _, err := chromedp.Call(ctx, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{
			Headers: network.Headers{"Authorization": authz}}); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

// problems are the console errors, exceptions and CSP violations so far.
func (b *browser) problems() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, m := range b.msgs {
		if m.IsException() || m.Type == chromedp.ConsoleType("error") || strings.Contains(m.Text, "Content Security Policy") {
			out = append(out, fmt.Sprintf("%s %s (%s)", m.Type, m.Text, m.URL))
		}
	}
	return out
}

// visit loads u, waits for the page, checks that it reads all of want,
// takes a screenshot named name, and fails on any console problem.
func (b *browser) visit(u, name string, want ...string) string {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, chromedp.Navigate(u), chromedp.WaitReady(chromedp.CSS("main"))); err != nil {
		b.t.Fatalf("%s: %v", name, err)
	}
	text, err := chromedp.Run(b.ctx, chromedp.Text(chromedp.CSS("body")))
	if err != nil {
		b.t.Fatalf("%s: %v", name, err)
	}
	for _, w := range want {
		if !strings.Contains(text, w) {
			b.t.Errorf("%s: the page does not read %q:\n%s", name, w, text)
		}
	}
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("%s: screenshot: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(artifactsDir(b.t), name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	// Console messages arrive asynchronously: give the last ones a moment
	// by round-tripping one evaluation, then check.
	if _, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool]("true")); err != nil {
		b.t.Fatal(err)
	}
	if p := b.problems(); len(p) > 0 {
		b.t.Errorf("%s: console problems: %v", name, p)
	}
	return text
}

func TestE2EExplorerPageInBrowser(t *testing.T) {
	t.Parallel()
	logPath := filepath.Join(t.TempDir(), "decisions.jsonl")
	s := startE2E(t, dbCase{Name: "sqlite"}, append(licenseArgs(t), "--decision-log", logPath)...)
	w := explorerSetup(t, s)
	root := strings.TrimSuffix(s.Base, "/api/v3")
	// A refusal for the denials view.
	s.Must(403, "PATCH", "/pools/x-p2", jsonPatch("replace", "/Description", "d"), basic("x-olga", "olga-pw-1"))
	adminAuth := "Basic " + base64.StdEncoding.EncodeToString([]byte("rocketskates:"+e2eAdminPassword))
	b := newBrowser(t, adminAuth)

	q := url.Values{"user": {"x-olga"}, "method": {"PATCH"}, "path": {"/pools/x-p2"},
		"body": {`[{"op":"replace","path":"/Description","value":"d"}]`}}
	b.visit(root+"/ui/", "home", "provgate access explorer", "signed in as rocketskates", "Explain a request", "Recent denials")
	text := b.visit(root+"/ui/explain?"+q.Encode(), "explain",
		"PATCH /api/v3/pools/x-p2 as x-olga: refused (403)", "not covered by any claim of the user", "granted by roles", "superuser")
	if !strings.Contains(text, "Hide passing steps") {
		t.Errorf("with JavaScript on, the page's script adds its toggle:\n%s", text)
	}
	b.visit(root+"/ui/users?name=x-olga", "matrix", "What x-olga can do", "pools", "x-p1", "machines")
	b.visit(root+"/ui/who?scope=machines&action=get&key="+w.m1, "who", "Who may machines get", "x-olga", "x-tina", "operations")
	b.visit(root+"/ui/tenants?name=x-t1", "tenant", "What tenant x-t1 sees", w.m1, "unrestricted", "x-tina")
	b.visit(root+"/ui/roles?a=mreader&b=poolop", "roles", "Only in mreader", "machines get *", "Only in poolop", "pools delete x-p1")
	escalationSetup(t, s)
	b.visit(root+"/ui/escalation", "escalation", "Who can hand out authority", "x-hd", "users' Roles", "users create *",
		"explicit delegation", "roles bind helpdesk-granted", "helpdesk")
	// The denials view lists the refusal, whose decision id links to its
	// explanation, replayed from the log.
	var denials string
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		denials = b.visit(root+"/ui/denials", "denials", "Recent denials")
		if strings.Contains(denials, "/api/v3/pools/x-p2") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !strings.Contains(denials, "x-olga") || !strings.Contains(denials, "Requires: pools update:/Description x-p2") {
		t.Fatalf("denials view:\n%s", denials)
	}
	if err := chromedp.Do(b.ctx, chromedp.Click(chromedp.CSS("table.denials a")), chromedp.WaitReady(chromedp.CSS("table.steps"))); err != nil {
		t.Fatalf("following the decision link: %v", err)
	}
	replayed, err := chromedp.Run(b.ctx, chromedp.Text(chromedp.CSS("main")))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(replayed, "replayed from the decision log") || !strings.Contains(replayed, "refused (403)") {
		t.Errorf("explanation of the logged refusal:\n%s", replayed)
	}
	if p := b.problems(); len(p) > 0 {
		t.Errorf("console problems: %v", p)
	}

	// The checks above would see a CSP violation: content from elsewhere is
	// refused, and the refusal is reported.
	if _, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](`(function(){var i=document.createElement("img");i.src="https://example.invalid/x.png";document.body.appendChild(i);return true})()`)); err != nil {
		t.Fatal(err)
	}
	found := false
	for end := time.Now().Add(10 * time.Second); !found && time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		for _, p := range b.problems() {
			found = found || strings.Contains(p, "Content Security Policy")
		}
	}
	if !found {
		t.Errorf("a CSP violation went unreported: %v", b.msgs)
	}

	// One view with JavaScript disabled: the same answer, without the
	// script's toggle.
	nojs := newBrowser(t, adminAuth)
	if _, err := chromedp.Call(nojs.ctx, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true}); err != nil {
		t.Fatal(err)
	}
	text = nojs.visit(root+"/ui/explain?"+q.Encode(), "explain-nojs", "refused (403)", "not covered by any claim of the user")
	if strings.Contains(text, "Hide passing steps") {
		t.Errorf("with JavaScript off, no script ran, yet the toggle is there")
	}

}

// The page without credentials, with bad ones and with a session cookie,
// through plain HTTP on every database: anonymous callers get a Basic
// challenge and no data; a Basic login gets a Secure, HttpOnly,
// SameSite=Strict session cookie that signs the next request in; every
// reply carries the CSP.
func TestE2EExplorerPageAuth(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, s *tserver) {
		explorerSetup(t, s)
		root := strings.TrimSuffix(s.Base, "/api/v3")
		get := func(u, authz string, hdrs ...string) resp {
			t.Helper()
			r, err := s.SendURL("GET", root+u, nil, authz, hdrs...)
			if err != nil {
				t.Fatal(err)
			}
			if csp := r.Header.Get("Content-Security-Policy"); csp != "default-src 'self'" {
				t.Errorf("%s: Content-Security-Policy %q", u, csp)
			}
			return r
		}
		for _, authz := range []string{"", basic("x-olga", "wrong-password")} {
			r := get("/ui/users?name=x-olga", authz)
			if r.Status != 401 || !strings.HasPrefix(r.Header.Get("WWW-Authenticate"), "Basic realm=") ||
				strings.Contains(string(r.Body), "x-p1") || strings.Contains(string(r.Body), "mreader") {
				t.Errorf("credentials %q: %d %v\n%s", authz, r.Status, r.Header, r.Body)
			}
		}
		r := get("/ui/users?name=x-olga", basic("x-olga", "olga-pw-1"))
		if r.Status != 200 || !strings.Contains(string(r.Body), "x-p1") {
			t.Fatalf("olga's own matrix: %s", r)
		}
		cookie := r.Header.Get("Set-Cookie")
		for _, attr := range []string{"provgate_session=", "secure", "httponly", "samesite=strict", "path=/ui/"} {
			if !strings.Contains(strings.ToLower(cookie), attr) {
				t.Errorf("session cookie %q lacks %s", cookie, attr)
			}
		}
		session := strings.SplitN(cookie, ";", 2)[0]
		if r := get("/ui/users?name=x-olga", "", "Cookie", session); r.Status != 200 || !strings.Contains(string(r.Body), "x-p1") {
			t.Errorf("with the session cookie: %s", r)
		}
		// The page asks what its API route asks: olga may not see tina.
		if r := get("/ui/users?name=x-tina", basic("x-olga", "olga-pw-1")); r.Status != 403 || !strings.Contains(string(r.Body), "Requires: users get x-tina") {
			t.Errorf("olga asking about tina: %s", r)
		}
		// Read-only: no form that changes anything.
		for _, u := range []string{"/ui/", "/ui/explain", "/ui/users", "/ui/who", "/ui/tenants", "/ui/roles", "/ui/denials", "/ui/escalation"} {
			body := string(get(u, admin()).Body)
			if strings.Contains(strings.ToLower(body), `method="post"`) || strings.Contains(body, "<script>") || strings.Contains(body, "style=") {
				t.Errorf("%s has a state-changing form or inline script or style", u)
			}
		}
	}, licenseArgs(t)...)
}
