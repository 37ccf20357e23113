package callback

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/provgate/provgate/backend"
	"github.com/provgate/provgate/backend/render"
)

// Defaults of Options.
const (
	DefaultMaxResponseBytes    = 1 << 20
	DefaultExecTimeout         = 10 * time.Second
	DefaultMaxRedirects        = 5
	DefaultDeliveryLease       = 10 * time.Minute
	DefaultMaxDeliveryAttempts = 8
	DefaultWorkerBatch         = 16
	userAgent                  = "provgate-callback"
)

// Options configure a Service. Zero values take the defaults.
type Options struct {
	Logger *slog.Logger
	// Transport sends every request (nil: a clone of http.DefaultTransport,
	// TLS verified). A callback or auth with InsecureSkipVerify gets a clone
	// of it with verification off, when it is an *http.Transport. An
	// *http.Transport is cloned and dials only what Destinations allows;
	// another RoundTripper is used as it is.
	Transport   http.RoundTripper
	ExecDir     string        // --callback-exec-dir; empty disables exec auths
	ExecTimeout time.Duration // bound of one exec auth run
	Store       Store         // attempts and the delivery queue; nil records nothing
	// Objects reads machines and plugins, Params their params (the object
	// service); Machines and Plugins default to views of them, and plugin
	// actions (Actions) need both.
	Objects  Objects
	Params   Params
	Machines Machines
	Plugins  Plugins
	Info     func() render.Info
	// Debug reports the server preference rs-debug-enable: a callback's or
	// auth's Debug logs only when this also says true.
	Debug            func() bool
	MaxResponseBytes int64
	MaxRedirects     int
	Now              func() time.Time
	// backend.Delivery queue tuning for the jobfail worker.
	DeliveryLease       time.Duration
	MaxDeliveryAttempts int
	WorkerBatch         int
	// StopGrace is how long a stopping worker lets the sends it has
	// started finish before it cuts them short (0: it cuts them at once).
	StopGrace time.Duration

	// Destinations are the addresses callbacks and token requests may
	// reach; the zero value refuses loopback, link-local, unspecified and
	// multicast addresses (docs/design.md §12.6).
	Destinations Destinations
}

// Service runs callbacks for every plugin whose Provider is "callback".
type Service struct {
	opts     Options
	log      *slog.Logger
	secure   http.RoundTripper
	insecure http.RoundTripper

	attempts *attemptLog // nil without a Store

	mu     sync.Mutex
	states map[string]*pluginState
	// opened keeps plugins' opened params for Actions (objects.go).
	opened *openedCache
	// rounds counts the jobfail worker's finished rounds (Rounds).
	rounds atomic.Uint64

	// attemptCounts and deliveryCounts count outcomes for the metrics
	// (Counts).
	attemptCounts, deliveryCounts backend.Counts
}

// Counts returns the callback attempts made by outcome (ok, client_error,
// server_error, error: no answer) and the jobfail deliveries finished by
// outcome (done, retry, failed) since the start (docs/design.md §15.4).
func (s *Service) Counts() (attempts, deliveries map[string]uint64) {
	return s.attemptCounts.Snapshot(), s.deliveryCounts.Snapshot()
}

// Rounds is the number of rounds the jobfail worker (RunWorker) has
// finished: each claimed the due deliveries and finished every one, so a
// round that began after a change has seen it (provgate_jobfail_worker_rounds_total).
func (s *Service) Rounds() uint64 { return s.rounds.Load() }

// pluginState is one plugin's parsed configuration and its token cache; a
// configuration change replaces the whole state, which drops cached tokens.
type pluginState struct {
	name   string
	hash   [32]byte
	cfg    *Config
	errs   []string
	tokens *tokenCache
	redact []string // secrets of the configuration, masked wherever text leaves the service
}

// positiveOr returns v, or def when v is not positive (an option left
// unset).
func positiveOr[T ~int | ~int64](v, def T) T {
	var zero T
	if v <= zero {
		return def
	}
	return v
}

// New builds a Service.
func New(opts Options) *Service {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	opts.ExecTimeout = positiveOr(opts.ExecTimeout, DefaultExecTimeout)
	opts.MaxResponseBytes = positiveOr(opts.MaxResponseBytes, DefaultMaxResponseBytes)
	opts.MaxRedirects = positiveOr(opts.MaxRedirects, DefaultMaxRedirects)
	if opts.Now == nil {
		opts.Now = time.Now
	}
	opts.DeliveryLease = positiveOr(opts.DeliveryLease, DefaultDeliveryLease)
	opts.MaxDeliveryAttempts = positiveOr(opts.MaxDeliveryAttempts, DefaultMaxDeliveryAttempts)
	opts.WorkerBatch = positiveOr(opts.WorkerBatch, DefaultWorkerBatch)
	if opts.Objects != nil {
		src := objectSource{o: opts.Objects, p: opts.Params}
		if opts.Machines == nil {
			opts.Machines = src
		}
		if opts.Plugins == nil {
			opts.Plugins = src
		}
	}
	s := &Service{opts: opts, log: opts.Logger, states: map[string]*pluginState{},
		opened: &openedCache{m: map[string]openedParams{}}}
	if opts.Store != nil {
		s.attempts = newAttemptLog(opts.Store, opts.Logger)
	}
	s.secure = opts.Transport
	if s.secure == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		// Callbacks go to a few receivers, often many at once: the default
		// of 2 idle connections per host would open a new connection (and
		// TLS handshake) for most calls.
		t.MaxIdleConnsPerHost = 64
		t.MaxIdleConns = 256
		s.secure = t
	}
	if t, ok := s.secure.(*http.Transport); ok {
		t = t.Clone()
		opts.Destinations.guard(t)
		s.secure = t
	}
	if t, ok := s.secure.(*http.Transport); ok {
		it := t.Clone()
		if it.TLSClientConfig == nil {
			it.TLSClientConfig = &tls.Config{}
		}
		it.TLSClientConfig.InsecureSkipVerify = true
		s.insecure = it
	}
	return s
}

// Configure (re)loads a plugin's configuration, dropping cached tokens when
// it changed, and returns its validation problems for the plugin's Errors.
func (s *Service) Configure(p *backend.Plugin) []string {
	return s.state(p).errs
}

// Forget drops a destroyed plugin's state.
func (s *Service) Forget(name string) {
	s.mu.Lock()
	delete(s.states, name)
	s.mu.Unlock()
	s.opened.mu.Lock()
	delete(s.opened.m, name)
	s.opened.mu.Unlock()
}

// Validate checks a plugin's params with this service's operator settings.
func (s *Service) Validate(params map[string]any) []string {
	return Validate(params, ValidateOptions{ExecDir: s.opts.ExecDir})
}

func (s *Service) state(p *backend.Plugin) *pluginState {
	b, err := json.Marshal([]any{p.Params[ParamCallbacks], p.Params[ParamAuths], p.Params[ParamDataOverride] != nil, s.opts.ExecDir})
	h := sha256.Sum256(b)
	s.mu.Lock()
	defer s.mu.Unlock()
	if st, ok := s.states[p.Name]; ok && st.hash == h && err == nil {
		return st
	}
	cfg, errs := Parse(p.Params, ValidateOptions{ExecDir: s.opts.ExecDir})
	st := &pluginState{name: p.Name, hash: h, cfg: cfg, errs: errs, tokens: newTokenCache()}
	st.redact = configSecrets(cfg)
	if err == nil {
		// Params that do not encode (they never do, coming from JSON) have
		// no hash to find them by: their state is built at every use.
		s.states[p.Name] = st
	}
	return st
}

func configSecrets(cfg *Config) []string {
	var out []string
	for _, a := range cfg.Auths {
		out = append(out, a.Password, a.Data, a.Query)
		out = append(out, urlSecrets(a.Url)...)
	}
	for _, c := range cfg.Callbacks {
		for h, v := range c.Headers {
			if !plainHeaders[http.CanonicalHeaderKey(h)] {
				out = append(out, v)
			}
		}
		out = append(out, urlSecrets(c.Url)...)
	}
	return out
}

// plainHeaders are configured headers whose values describe the content
// rather than grant anything; masking them would only garble replies.
var plainHeaders = map[string]bool{"Accept": true, "Content-Type": true, "User-Agent": true}

func invokeError(code, plugin string, msgs ...string) *backend.Error {
	return &backend.Error{Code: code, Type: "INVOKE", Model: "plugins", Key: plugin, Messages: msgs}
}

// Do runs the machine action callbackDo: the callback named by the action
// param callback/action, sent for machine m. It returns the response as the
// callback's JsonResponse/StringResponse settings say (default: a JSON
// string holding the base64 of the body).
//
// Error codes (the gateway maps them to statuses): missing or non-string
// callback/action, bad data-override → EBADREQUEST; unknown callback →
// ENOTFOUND; a misconfigured callback → ECONFLICT; the remote answered
// ≥ 400 → see statusCode; no answer within the budget → EUNAVAILABLE.
func (s *Service) Do(ctx context.Context, plugin *backend.Plugin, m *backend.Machine, actionParams map[string]any, source backend.AttemptSource) (json.RawMessage, error) {
	st := s.state(plugin)
	raw, ok := actionParams[ParamAction]
	if !ok || raw == nil {
		return nil, invokeError(backend.EBADREQUEST, plugin.Name, "Missing Parameter "+ParamAction)
	}
	name, ok := raw.(string)
	if !ok {
		return nil, invokeError(backend.EBADREQUEST, plugin.Name, ParamAction+" must be a string")
	}
	cb := st.cfg.Callbacks[name]
	if cb == nil {
		return nil, invokeError(backend.ENOTFOUND, plugin.Name, fmt.Sprintf("Unknown callback %q in %s of plugin %s", name, ParamCallbacks, plugin.Name))
	}
	if errs := st.problemsOf(name, cb); len(errs) > 0 {
		return nil, invokeError(backend.ECONFLICT, plugin.Name, append([]string{fmt.Sprintf("Callback %q is misconfigured", name)}, errs...)...)
	}
	if m == nil {
		return nil, invokeError(backend.EBADREQUEST, plugin.Name, "callbackDo needs a machine")
	}
	if source == "" {
		source = backend.SourceAction
	}
	override, hasOverride := actionParams[ParamDataOverride]
	if override == nil {
		hasOverride = false
	}
	return s.run(ctx, st, name, cb, m, override, hasOverride, source, nil)
}

// problemsOf returns the validation problems that concern callback name or
// the auths it uses, so that one broken entry does not disable the others.
func (st *pluginState) problemsOf(name string, cb *Callback) []string {
	prefixes := []string{fmt.Sprintf("callback %q", name), fmt.Sprintf("%s %q", ParamCallbacks, name)}
	for _, a := range authList(cb) {
		prefixes = append(prefixes, fmt.Sprintf("auth %q", a), fmt.Sprintf("%s %q", ParamAuths, a))
	}
	var out []string
	for _, e := range st.errs {
		for _, p := range prefixes {
			if strings.HasPrefix(e, p) {
				out = append(out, e)
				break
			}
		}
	}
	return out
}

// FlushAttempts returns once every attempt record made so far is in the
// store (docs/design.md §12.8).
func (s *Service) FlushAttempts() {
	if s.attempts != nil {
		s.attempts.flush()
	}
}

func (s *Service) debug() bool { return s.opts.Debug != nil && s.opts.Debug() }

func (s *Service) info() render.Info {
	if s.opts.Info == nil {
		return render.Info{}
	}
	return s.opts.Info()
}
