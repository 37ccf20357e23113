package callback

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v5"
)

const maxTokenResponse = 64 << 10

// credential is what one auth method contributes to a request.
type credential struct {
	authName string
	header   string // Authorization value; empty for no auth
	token    string // the secret part, for redaction
	cached   bool   // json-token taken from the cache (a 401 earns one refetch)
}

// tokenCache holds json-token tokens of one plugin configuration. Each auth
// has its own one-slot semaphore, so concurrent callbacks needing the same
// token wait for a single fetch instead of all fetching, and a waiter whose
// context ends stops waiting.
type tokenCache struct {
	mu      sync.Mutex
	entries map[string]*tokenEntry
}

type tokenEntry struct {
	sem     chan struct{}
	token   string
	expires time.Time
}

func newTokenCache() *tokenCache { return &tokenCache{entries: map[string]*tokenEntry{}} }

func (c *tokenCache) entry(name string) *tokenEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[name]
	if e == nil {
		e = &tokenEntry{sem: make(chan struct{}, 1)}
		c.entries[name] = e
	}
	return e
}

// credential obtains auth method a's credential; force skips the cache.
func (s *Service) credential(ctx context.Context, st *pluginState, name string, a *Auth, force bool) (credential, error) {
	cr := credential{authName: name}
	if a == nil {
		return cr, nil
	}
	switch a.AuthType {
	case AuthBasic:
		cr.token = base64.StdEncoding.EncodeToString([]byte(a.Username + ":" + a.Password))
		cr.header = "Basic " + cr.token
		return cr, nil
	case AuthExec:
		tok, err := s.runExec(ctx, a)
		if err != nil {
			return cr, err
		}
		cr.token, cr.header = tok, "Bearer "+tok
		return cr, nil
	case AuthJSONToken:
		e := st.tokens.entry(name)
		select {
		case e.sem <- struct{}{}:
		case <-ctx.Done():
			return cr, ctx.Err()
		}
		defer func() { <-e.sem }()
		now := s.opts.Now()
		if !force && e.token != "" && now.Before(e.expires) {
			cr.token, cr.header, cr.cached = e.token, "Bearer "+e.token, true
			return cr, nil
		}
		e.token = ""
		tok, ttl, err := s.fetchToken(ctx, st, name, a)
		if err != nil {
			return cr, err
		}
		if ttl > 0 {
			e.token, e.expires = tok, now.Add(ttl)
		}
		cr.token, cr.header = tok, "Bearer "+tok
		return cr, nil
	}
	return cr, fmt.Errorf("auth %q: unknown AuthType", name)
}

// forget drops a cached json-token after the target refused it.
func (st *pluginState) forget(name string) {
	e := st.tokens.entry(name)
	select {
	case e.sem <- struct{}{}:
		e.token = ""
		<-e.sem
	default:
		// Someone is fetching a fresh token right now; it replaces this one.
	}
}

// fetchToken runs a json-token request under the auth's own Retry, Delay
// and Timeout (default 7200 s), inside whatever is left of ctx's budget.
// The token is cached for 3/4 of DurationField's lifetime, so that it is
// renewed before the issuer expires it; without DurationField it is not
// cached (docs/design.md §12.5).
func (s *Service) fetchToken(ctx context.Context, st *pluginState, name string, a *Auth) (string, time.Duration, error) {
	timeout := a.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, time.Duration(timeout)*time.Second)
	defer cancel()
	method := a.Method
	if method == "" {
		method = "GET"
		if a.Data != "" {
			method = "POST"
		}
	}
	u, err := url.Parse(a.Url)
	if err != nil {
		return "", 0, fmt.Errorf("auth %q: invalid Url", name)
	}
	if a.Query != "" {
		u.RawQuery = a.Query
	}
	red := newRedactor(st.redact)
	client := s.client(a.InsecureSkipVerify, nil)
	type result struct {
		token string
		ttl   time.Duration
	}
	header := http.Header{"Accept": {"application/json"}, "User-Agent": {userAgent}}
	var body []byte
	if a.Data != "" {
		header.Set("Content-Type", "application/json")
		body = []byte(a.Data)
	}
	op := func() (result, error) {
		req, err := newRequest(ctx, method, u.String(), header, body)
		if err != nil {
			return result{}, backoff.Permanent(fmt.Errorf("auth %q: cannot build the token request", name))
		}
		dbg := a.Debug && s.debug()
		if dbg {
			s.log.Info("callback auth request", "plugin", st.name, "auth", name, "method", method,
				"url", safeURL(u), "headers", headerLog(req.Header, nil), "data", maskedIf(a.Data))
		}
		resp, b, err := roundTrip(client, req, maxTokenResponse)
		if resp == nil {
			if de, ok := refusedDestination(err); ok {
				return result{}, backoff.Permanent(fmt.Errorf("auth %q: token request %s", name, de))
			}
			return result{}, fmt.Errorf("auth %q: token request failed: %s", name, red.String(transportError(err)))
		}
		if err != nil {
			return result{}, fmt.Errorf("auth %q: reading the token response: %s", name, transportError(err))
		}
		tokenRes, perr := parseToken(name, a, resp.StatusCode, b)
		if dbg {
			r2 := newRedactor(st.redact, []string{tokenRes.token})
			s.log.Info("callback auth response", "plugin", st.name, "auth", name, "status", resp.StatusCode,
				"headers", headerLog(resp.Header, nil), "body", r2.excerpt(b, 2048))
		}
		if perr != nil {
			if retryable(resp.StatusCode) {
				return result{}, perr
			}
			return result{}, backoff.Permanent(perr)
		}
		return result(tokenRes), nil
	}
	r, err := backoff.Retry(ctx, op,
		backoff.WithBackOff(backoff.NewConstantBackOff(time.Duration(a.Delay)*time.Second)),
		backoff.WithMaxTries(uint(a.Retry)+1),
		backoff.WithMaxElapsedTime(time.Duration(timeout)*time.Second))
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			return "", 0, fmt.Errorf("auth %q: timeout of the token request", name)
		}
		return "", 0, err
	}
	return r.token, r.ttl, nil
}

type tokenResult struct {
	token string
	ttl   time.Duration
}

func parseToken(name string, a *Auth, status int, b []byte) (tokenResult, error) {
	if status >= 400 {
		return tokenResult{}, fmt.Errorf("auth %q: token request returned %d", name, status)
	}
	if len(b) > maxTokenResponse {
		return tokenResult{}, fmt.Errorf("auth %q: token response too large", name)
	}
	var obj map[string]any
	if err := json.Unmarshal(b, &obj); err != nil {
		return tokenResult{}, fmt.Errorf("auth %q: token response is not a JSON object", name)
	}
	tok, ok := obj[a.TokenField].(string)
	if !ok || tok == "" {
		return tokenResult{}, fmt.Errorf("auth %q: token response has no string field %s", name, a.TokenField)
	}
	res := tokenResult{token: tok}
	if a.DurationField != "" {
		if v, present := obj[a.DurationField]; present {
			secs, ok := v.(float64)
			if !ok {
				return tokenResult{}, fmt.Errorf("auth %q: token response field %s is not a number", name, a.DurationField)
			}
			if secs > 0 {
				res.ttl = time.Duration(secs * float64(time.Second) * 3 / 4)
			}
		}
	}
	return res, nil
}

func maskedIf(s string) string {
	if s == "" {
		return ""
	}
	return masked
}

// runExec runs an exec auth: only a program under ExecDir (checked again
// now, since the file may have changed since validation), no shell, no
// arguments, a scrubbed environment (the server's own credentials never
// reach it), a timeout, and only stdout taken, trimmed.
func (s *Service) runExec(ctx context.Context, a *Auth) (string, error) {
	path, err := execPath(s.opts.ExecDir, a.Path)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.ExecTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path)
	cmd.Dir = s.opts.ExecDir
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C"}
	var out bytes.Buffer
	cmd.Stdout = &limitedBuffer{buf: &out, max: maxTokenResponse}
	cmd.Stderr = nil
	cmd.WaitDelay = time.Second
	if a.Debug && s.debug() {
		s.log.Info("callback exec auth", "path", path)
	}
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return "", errors.New("exec auth timed out")
		}
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return "", fmt.Errorf("exec auth exited with status %d", ee.ExitCode())
		}
		return "", errors.New("exec auth could not run")
	}
	tok := strings.TrimSpace(out.String())
	if tok == "" {
		return "", errors.New("exec auth printed nothing")
	}
	return tok, nil
}

type limitedBuffer struct {
	buf *bytes.Buffer
	max int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if l.buf.Len()+len(p) > l.max {
		return 0, errors.New("output too large")
	}
	return l.buf.Write(p)
}

// authString is GetAuthString for Url templates: exec auths only, run on
// each call, output inserted as is (docs/design.md §12.5).
func (s *Service) authString(st *pluginState) func(ctx context.Context, name string) (string, error) {
	return func(ctx context.Context, name string) (string, error) {
		a := st.cfg.Auths[name]
		if a == nil {
			return "", fmt.Errorf("GetAuthString: auth %q is not defined", name)
		}
		if a.AuthType != AuthExec {
			return "", fmt.Errorf("GetAuthString: auth %q is not an exec auth", name)
		}
		return s.runExec(ctx, a)
	}
}
