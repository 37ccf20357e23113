package callback

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v5"

	"github.com/provgate/provgate/backend"
	"github.com/provgate/provgate/backend/render"
)

const excerptBytes = 512

// request is one callback ready to send: everything rendered once, before
// the first attempt, and reused by every retry.
type request struct {
	st      *pluginState
	name    string
	cb      *Callback
	machine string
	source  backend.AttemptSource
	method  string
	url     *url.URL
	body    []byte
	headers http.Header
	red     *redactor
}

// outcome is what the last attempt ended with.
type outcome struct {
	status int
	body   []byte
	err    string // transport or read failure, redacted
	tooBig bool
	// refused: the destination is one Destinations refuses.
	refused bool

	retryAfter time.Duration
}

var (
	errDenied = errors.New("denied")       // 401/403: try the next auth method
	errFinal  = errors.New("final status") // a status retrying cannot change
	errRetry  = errors.New("retryable status")
)

type authFailure struct{ msg string }

func (e *authFailure) Error() string { return e.msg }

// run builds the callback's request for machine m and sends it under the
// callback's budget.
func (s *Service) run(ctx context.Context, st *pluginState, name string, cb *Callback, m *backend.Machine, override any, hasOverride bool, source backend.AttemptSource, extra http.Header) (json.RawMessage, error) {
	req, err := s.build(ctx, st, name, cb, m, override, hasOverride, source, extra)
	if err != nil {
		return nil, err
	}
	out, err := s.send(ctx, req)
	if err != nil {
		return nil, err
	}
	return s.response(req, out, s.callerRedactor(ctx, req))
}

// callerRedactor masks, in what the action returns, the secrets the caller
// could not read itself: configuration secrets without "plugins getSecure
// <plugin>", the machine's decoded secure values without "machines
// getSecure <machine>" (the claims that govern ?decode=true on GET of the
// plugin and of the machine). System work (jobfail) returns its result to
// no one; a policy error, or a ctx that declares no access, masks.
func (s *Service) callerRedactor(ctx context.Context, r *request) *redactor {
	if backend.IsSystem(ctx) {
		return newRedactor()
	}
	may := func(c secretClass, claim backend.Claim) bool {
		if !r.red.has(c) {
			return true
		}
		ok, err := backend.Can(ctx, claim)
		if err != nil {
			s.log.Warn("callback: checking getSecure failed; the reply is masked", "plugin", r.st.name, "err", err)
			return false
		}
		return ok
	}
	config := may(configSecret, backend.Claim{Scope: "plugins", Action: "getSecure", Specific: r.st.name})
	machine := may(machineSecret, backend.Claim{Scope: "machines", Action: "getSecure", Specific: r.machine})
	return r.red.only(func(c secretClass) bool {
		return (c == configSecret && !config) || (c == machineSecret && !machine)
	})
}

// callerMayDecode reports whether the caller of the current request holds
// machines getSecure on machine; server-internal work (a jobfail delivery,
// whose plugin's writer held it over every machine) may. A policy error
// leaves the values sealed.
func (s *Service) callerMayDecode(ctx context.Context, plugin, machine string) bool {
	a := backend.AccessFrom(ctx)
	if a == nil {
		return true
	}
	ok, err := a.Can(ctx, backend.Claim{Scope: "machines", Action: "getSecure", Specific: machine})
	if err != nil {
		s.log.Warn("callback: checking getSecure failed; secure values stay sealed", "plugin", plugin, "err", err)
		return false
	}
	return ok
}

func (s *Service) build(ctx context.Context, st *pluginState, name string, cb *Callback, m *backend.Machine, override any, hasOverride bool, source backend.AttemptSource, extra http.Header) (*request, error) {
	r := &request{st: st, name: name, cb: cb, machine: m.Uuid, source: source, method: cb.Method, red: newRedactor(st.redact)}
	if r.method == "" {
		r.method = DefaultMethod
	}
	fail := func(code string, msgs ...string) error { return invokeError(code, st.name, msgs...) }
	if s.opts.Machines == nil {
		return nil, fail(backend.EINTERNAL, "callback service has no machine reader")
	}
	// Decoded values reach the body and the Url only for a caller who may
	// read them itself: the plugin's writer chose where they go, the caller
	// chose the machine (docs/design.md §12.3).
	decode := cb.Decode && s.callerMayDecode(ctx, st.name, m.Uuid)
	params, err := s.opts.Machines.MachineParams(ctx, m, cb.Aggregate, decode)
	if err != nil {
		return nil, err
	}
	shaped := *m
	shaped.Sanitize()
	shaped.Params = make(map[string]any, len(params))
	for k, v := range params {
		shaped.Params[k] = v
	}
	for _, k := range cb.ExcludeParams {
		delete(shaped.Params, k)
	}
	// .Param always sees the full hierarchy, as on the server; secure values
	// only in the clear when the callback opted into Decode.
	var once sync.Once
	var all map[string]any
	var allErr error
	load := func(ctx context.Context) {
		once.Do(func() { all, allErr = s.opts.Machines.MachineParams(ctx, m, true, decode) })
	}
	if decode {
		// Every value decoding opens may reach the body, the Url or the
		// reply: note them all as the machine's secrets.
		load(ctx)
		if allErr != nil {
			return nil, allErr
		}
		sealed, err := s.opts.Machines.MachineParams(ctx, m, true, false)
		if err != nil {
			return nil, err
		}
		for k, v := range all {
			if !reflect.DeepEqual(sealed[k], v) {
				r.red.addClass(machineSecret, secretStrings(v)...)
			}
		}
	}
	lookup := func(ctx context.Context, k string) (any, bool, error) {
		load(ctx)
		if allErr != nil {
			return nil, false, allErr
		}
		v, ok := all[k]
		return v, ok, nil
	}
	env := render.Env{Machine: &shaped, Params: lookup, Info: s.info()}
	cfgEnv := env
	authString := s.authString(st)
	cfgEnv.AuthString = func(ctx context.Context, name string) (string, error) {
		out, err := authString(ctx, name)
		if err == nil {
			r.red.add(out)
		}
		return out, err
	}

	rawURL, err := render.Render(ctx, render.Config, "url", cb.Url, cfgEnv, render.Limits{})
	if err != nil {
		return nil, fail(backend.ECONFLICT, fmt.Sprintf("Callback %q: rendering Url: %s", name, r.red.String(err.Error())))
	}
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fail(backend.ECONFLICT, fmt.Sprintf("Callback %q: rendered Url is not an absolute http(s) URL", name))
	}
	r.url = u
	if pw, ok := u.User.Password(); ok {
		r.red.add(pw)
	}

	switch {
	case cb.NoBody:
	case hasOverride:
		if str, ok := override.(string); ok {
			out, err := render.Render(ctx, render.Caller, ParamDataOverride, str, env, render.Limits{})
			if err != nil {
				return nil, fail(backend.EBADREQUEST, ParamDataOverride+": "+err.Error())
			}
			r.body = []byte(out)
		} else {
			b, err := json.Marshal(override)
			if err != nil {
				return nil, fail(backend.EBADREQUEST, ParamDataOverride+" cannot be encoded as JSON")
			}
			r.body = b
		}
	default:
		b, err := json.Marshal(&shaped)
		if err != nil {
			return nil, fail(backend.EINTERNAL, "cannot encode the machine")
		}
		r.body = b
	}

	r.headers = http.Header{}
	for k, v := range extra {
		r.headers[k] = v
	}
	for k, v := range cb.Headers {
		r.headers.Set(k, v)
	}
	if r.body != nil && r.headers.Get("Content-Type") == "" {
		r.headers.Set("Content-Type", "application/json")
	}
	if r.headers.Get("Accept") == "" {
		r.headers.Set("Accept", "application/json")
	}
	if r.headers.Get("User-Agent") == "" {
		r.headers.Set("User-Agent", userAgent)
	}
	return r, nil
}

// send runs the attempts. Timeout is one budget for everything (all auth
// methods, retries, delays and token requests) and, being a context
// deadline, it also bounds each single attempt. Per auth method, up to
// Retry extra attempts follow transport errors, 408, 429 and 5xx, Delay
// seconds apart (or as Retry-After asks); 401 and 403 move on to the next
// auth method, after one refetch when the refused token came from the cache.
func (s *Service) send(ctx context.Context, r *request) (*outcome, error) {
	timeout := r.cb.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	budget := time.Duration(timeout) * time.Second
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	deadline, _ := ctx.Deadline()

	names := authList(r.cb)
	if len(names) == 0 {
		names = []string{""}
	}
	attempt := 0
	var last *outcome
	var authErrs []string
	for i, an := range names {
		a := r.st.cfg.Auths[an]
		op := func() (*outcome, error) {
			cr, err := s.credential(ctx, r.st, an, a, false)
			if err != nil {
				return nil, backoff.Permanent(&authFailure{r.red.String(err.Error())})
			}
			r.red.add(cr.token)
			attempt++
			out := s.attempt(ctx, r, cr, attempt)
			if out.status == http.StatusUnauthorized && cr.cached {
				r.st.forget(an)
				if cr, err = s.credential(ctx, r.st, an, a, true); err != nil {
					return nil, backoff.Permanent(&authFailure{r.red.String(err.Error())})
				}
				r.red.add(cr.token)
				attempt++
				out = s.attempt(ctx, r, cr, attempt)
			}
			last = out
			switch {
			case out.err != "":
				if out.tooBig || out.refused {
					return out, backoff.Permanent(errFinal)
				}
				return out, errors.New(out.err)
			case out.status < 400:
				return out, nil
			case out.status == http.StatusUnauthorized || out.status == http.StatusForbidden:
				return out, backoff.Permanent(errDenied)
			case retryable(out.status):
				if d := retryAfter(out); d > time.Duration(r.cb.Delay)*time.Second {
					return out, &backoff.RetryAfterError{Duration: d}
				}
				return out, errRetry
			}
			return out, backoff.Permanent(errFinal)
		}
		out, err := backoff.Retry(ctx, op,
			backoff.WithBackOff(backoff.NewConstantBackOff(time.Duration(r.cb.Delay)*time.Second)),
			backoff.WithMaxTries(uint(r.cb.Retry)+1),
			backoff.WithMaxElapsedTime(time.Until(deadline)))
		if err == nil {
			return out, nil
		}
		var af *authFailure
		switch {
		case errors.As(err, &af):
			authErrs = append(authErrs, fmt.Sprintf("auth %d (%s) failed: %s", i+1, an, af.msg))
			continue
		case errors.Is(err, errDenied) && i < len(names)-1:
			continue
		}
		break
	}
	name := r.name
	if last == nil {
		msgs := append([]string{fmt.Sprintf("Callback %q: every auth method failed", name)}, authErrs...)
		return nil, invokeError(backend.EUNAVAILABLE, r.st.name, msgs...)
	}
	switch {
	case last.tooBig:
		return nil, invokeError(backend.ECONFLICT, r.st.name, fmt.Sprintf("Callback %q: response exceeds %d bytes", name, s.opts.MaxResponseBytes))
	case last.refused:
		return nil, invokeError(backend.ECONFLICT, r.st.name, fmt.Sprintf("Callback %q: %s", name, last.err))
	case last.err != "":
		msg := "Failed to callback API"
		if ctx.Err() != nil {
			msg = fmt.Sprintf("Timeout of callback call (%ds)", timeout)
		}
		return nil, invokeError(backend.EUNAVAILABLE, r.st.name, msg, last.err)
	case last.status >= 400:
		msgs := []string{fmt.Sprintf("Callback API returned %d", last.status)}
		if ex := r.red.excerpt(last.body, excerptBytes); ex != "" {
			msgs = append(msgs, ex)
		}
		msgs = append(msgs, authErrs...)
		return nil, invokeError(statusCode(last.status), r.st.name, msgs...)
	}
	return last, nil
}

// statusCode maps a remote status ≥ 400 onto the error vocabulary:
// 408, 429 and 5xx (the remote is unwell; try later) → EUNAVAILABLE (503);
// 400, 413, 415 and 422 (the remote rejected the payload, which callers shape
// through data-override) → EBADREQUEST (400); every other 4xx, 401 and 403
// included → ECONFLICT (409), because the remote's refusal is not the
// caller's own authentication or a missing provgate object, which 401, 403
// and 404 would suggest. The remote status is always in Messages[0].
func statusCode(status int) string {
	switch {
	case retryable(status):
		return backend.EUNAVAILABLE
	case status == 400 || status == 413 || status == 415 || status == 422:
		return backend.EBADREQUEST
	}
	return backend.ECONFLICT
}

func retryable(status int) bool {
	return status == http.StatusRequestTimeout || status == http.StatusTooManyRequests || status >= 500
}

// retryAfter honours a Retry-After header given in seconds.
func retryAfter(out *outcome) time.Duration {
	return out.retryAfter
}

// attemptOutcome is the metrics label of an attempt answered with status
// (0: no answer).
func attemptOutcome(status int) string {
	switch {
	case status == 0:
		return "error"
	case status >= 500:
		return "server_error"
	case status >= 400:
		return "client_error"
	}
	return "ok"
}

// attempt sends the request once and records it.
func (s *Service) attempt(ctx context.Context, r *request, cr credential, n int) *outcome {
	start := time.Now()
	out := s.exchange(ctx, r, cr)
	a := backend.CallbackAttempt{
		Plugin: r.st.name, Callback: r.name, Machine: r.machine, Source: r.source,
		Attempt: n, Status: out.status, DurationMs: time.Since(start).Milliseconds(),
		Error: out.err, At: s.opts.Now(),
	}
	if a.Error == "" && out.status >= 400 {
		a.Error = fmt.Sprintf("Callback API returned %d", out.status)
	}
	s.attemptCounts.Add(attemptOutcome(out.status))
	if s.attempts != nil {
		// Recorded even when the budget just ran out, off the request
		// path (attemptLog).
		s.attempts.add(a)
	}
	return out
}

func (s *Service) exchange(ctx context.Context, r *request, cr credential) *outcome {
	req, err := newRequest(ctx, r.method, r.url.String(), r.headers, r.body)
	if err != nil {
		return &outcome{err: "cannot build the request"}
	}
	// A configured Authorization header wins over the auth method, as in DRP.
	if cr.header != "" && req.Header.Get("Authorization") == "" {
		req.Header.Set("Authorization", cr.header)
	}
	dbg := r.cb.Debug && s.debug()
	if dbg {
		s.log.Info("callback request", "plugin", r.st.name, "callback", r.name, "machine", r.machine,
			"method", r.method, "url", safeURL(r.url), "headers", headerLog(req.Header, r.cb.Headers), "body", s.bodyLog(r, r.body))
	}
	resp, b, err := roundTrip(s.client(r.cb.InsecureSkipVerify, r.cb.Headers), req, s.opts.MaxResponseBytes)
	if resp == nil {
		if de, ok := refusedDestination(err); ok {
			// Not retried: the same address is refused again.
			return &outcome{err: "callback " + de.Error(), refused: true}
		}
		return &outcome{err: r.red.String(transportError(err))}
	}
	out := &outcome{status: resp.StatusCode, body: b}
	if v := resp.Header.Get("Retry-After"); v != "" {
		if secs, err := strconv.Atoi(v); err == nil && secs > 0 {
			out.retryAfter = time.Duration(secs) * time.Second
		}
	}
	switch {
	case err != nil:
		out.err = "reading the response: " + r.red.String(transportError(err))
	case int64(len(b)) > s.opts.MaxResponseBytes:
		out.err, out.tooBig = fmt.Sprintf("response exceeds %d bytes", s.opts.MaxResponseBytes), true
		out.body = b[:s.opts.MaxResponseBytes]
	}
	if dbg {
		s.log.Info("callback response", "plugin", r.st.name, "callback", r.name, "machine", r.machine,
			"status", resp.StatusCode, "headers", headerLog(resp.Header, r.cb.Headers), "body", r.red.excerpt(out.body, 4096))
	}
	return out
}

// bodyLog is what a debug log shows of a request body: nothing when the
// callback decodes secure params, whose clear values must not reach logs.
func (s *Service) bodyLog(r *request, b []byte) string {
	if r.cb.Decode {
		return fmt.Sprintf("[%d bytes withheld: Decode is on]", len(b))
	}
	return r.red.excerpt(b, 4096)
}

// client returns an HTTP client whose redirects never carry credentials or
// configured headers to another host or from https to http.
func (s *Service) client(insecure bool, configured map[string]string) *http.Client {
	t := s.secure
	if insecure && s.insecure != nil {
		t = s.insecure
	}
	max := s.opts.MaxRedirects
	return &http.Client{
		Transport: t,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= max {
				return fmt.Errorf("stopped after %d redirects", max)
			}
			// An address literal is refused here, with the redirect named;
			// every dial is checked as well (docs/design.md §12.6).
			if err := s.opts.Destinations.checkHost(req.URL.Hostname()); err != nil {
				return err
			}
			orig := via[0].URL
			if req.URL.Host != orig.Host || req.URL.Scheme != orig.Scheme {
				for _, h := range []string{"Authorization", "Proxy-Authorization", "Authentication", "Cookie"} {
					req.Header.Del(h)
				}
				for h := range configured {
					req.Header.Del(h)
				}
			}
			return nil
		},
	}
}

// response turns a successful exchange into the action's value (docs/design.md
// §12.7): JsonResponse → the parsed JSON (an empty body is
// null); StringResponse → a JSON string of the body; else a JSON string of
// the body's base64. The secrets of hide are masked first: in every JSON
// string of a JsonResponse, in the text of the others (before encoding).
func (s *Service) response(r *request, out *outcome, hide *redactor) (json.RawMessage, error) {
	switch {
	case r.cb.JsonResponse:
		b := bytes.TrimSpace(out.body)
		if len(b) == 0 {
			return json.RawMessage("null"), nil
		}
		if !json.Valid(b) {
			return nil, invokeError(backend.ECONFLICT, r.st.name,
				fmt.Sprintf("Callback %q: response is not valid JSON (JsonResponse is set)", r.name), r.red.excerpt(b, excerptBytes))
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, b); err != nil {
			return nil, invokeError(backend.ECONFLICT, r.st.name, fmt.Sprintf("Callback %q: response is not valid JSON", r.name))
		}
		masked, err := hide.json(buf.Bytes())
		if err != nil {
			return nil, invokeError(backend.ECONFLICT, r.st.name, fmt.Sprintf("Callback %q: response is not valid JSON", r.name))
		}
		return masked, nil
	case r.cb.StringResponse:
		return json.Marshal(hide.String(string(out.body)))
	}
	return json.Marshal([]byte(hide.String(string(out.body))))
}
