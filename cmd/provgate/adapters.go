package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/provgate/provgate/backend"
	"github.com/provgate/provgate/backend/callback"
	"github.com/provgate/provgate/backend/license"
	"github.com/provgate/provgate/backend/objects"
	"github.com/provgate/provgate/backend/pools"
	"github.com/provgate/provgate/backend/render"
	"github.com/provgate/provgate/backend/store"
	"github.com/provgate/provgate/gateway"
	"github.com/provgate/provgate/gateway/auth"
	"github.com/provgate/provgate/policies"
	"github.com/provgate/provgate/policies/opa"
)

// Settings kept in the store.
const (
	settingSystemSecret = "system_secret"
	settingTokenKey     = "token_key"
	settingSecureKey    = "secure_param_key"
	// settingSecureSeal records that every secure param is sealed to its
	// object (objects.MigrateSecureParams has run to the end).
	settingSecureSeal = "secure_param_seal"
	settingLicense    = "license"
	prefPrefix        = "pref/"
)

// ensureSetting returns a setting, creating it with mk() when absent.
func ensureSetting(ctx context.Context, st *store.Store, name string, mk func() string) (string, error) {
	v, ok, err := st.GetSetting(ctx, name)
	if err != nil {
		return "", err
	}
	if ok && v != "" {
		return v, nil
	}
	v = mk()
	if err := st.SetSetting(ctx, name, v); err != nil {
		return "", err
	}
	return v, nil
}

func randomKey() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.StdEncoding.EncodeToString(b)
}

// secrets implements auth.Secrets over the store. The system secret, the
// token key and user records are cached in memory until reset, which the
// freshness tracker calls whenever the store revision moves (a local write
// or another replica's).
type secrets struct {
	st    *store.Store
	mu    sync.RWMutex
	sys   string
	key   []byte
	users map[string]auth.UserRecord
}

// maxCachedUsers bounds the user cache; beyond it users are read each time.
const maxCachedUsers = 10000

func (s *secrets) reset() {
	s.mu.Lock()
	s.sys, s.key, s.users = "", nil, nil
	s.mu.Unlock()
}

func (s *secrets) load(ctx context.Context) error {
	s.mu.RLock()
	ok := s.key != nil
	s.mu.RUnlock()
	if ok {
		return nil
	}
	sys, _, err := s.st.GetSetting(ctx, settingSystemSecret)
	if err != nil {
		return err
	}
	k, _, err := s.st.GetSetting(ctx, settingTokenKey)
	if err != nil {
		return err
	}
	key, err := base64.StdEncoding.DecodeString(k)
	if err != nil || len(key) < 32 {
		return fmt.Errorf("token key setting is corrupt")
	}
	s.mu.Lock()
	s.sys, s.key = sys, key
	s.mu.Unlock()
	return nil
}

func (s *secrets) SystemSecret(ctx context.Context) (string, error) {
	if err := s.load(ctx); err != nil {
		return "", err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.sys, nil
}

func (s *secrets) BaseKey(ctx context.Context) ([]byte, error) {
	if err := s.load(ctx); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.key, nil
}

func (s *secrets) User(ctx context.Context, name string) (auth.UserRecord, error) {
	s.mu.RLock()
	u, ok := s.users[name]
	s.mu.RUnlock()
	if ok {
		return u, nil
	}
	rec, err := s.st.Get(ctx, "users", name)
	if err != nil {
		return auth.UserRecord{}, err
	}
	var bu backend.User
	if err := json.Unmarshal(rec.Data, &bu); err != nil {
		return auth.UserRecord{}, err
	}
	u = auth.UserRecord{Name: bu.Name, Secret: bu.Secret, PasswordHash: bu.PasswordHash, Roles: bu.Roles}
	s.mu.Lock()
	if s.users == nil {
		s.users = map[string]auth.UserRecord{}
	}
	if len(s.users) < maxCachedUsers {
		s.users[name] = u
	}
	s.mu.Unlock()
	return u, nil
}

// freshness keeps every in-memory copy of users, roles, tenants, the
// license and the system secrets in step with the store. Writes to those
// bump the store revision; on PostgreSQL, where several replicas may share
// the database, each request reads the revision once and reloads when it
// moved, so a change made through one replica is enforced by the others on
// the very next request. On SQLite only this process writes the file, and
// local writes reload directly.
type freshness struct {
	st      *store.Store
	poll    bool
	secrets *secrets
	tokens  *tokenCache
	policy  *policySync
	// onReload runs after every reload (event streams re-authenticate).
	onReload func()
	mu       sync.Mutex
	seen     int64
}

// Check runs before each request.
func (f *freshness) Check(ctx context.Context) error {
	if !f.poll {
		return nil
	}
	rev, err := f.st.Revision(ctx)
	if err != nil {
		return err
	}
	f.mu.Lock()
	same := rev == f.seen
	f.mu.Unlock()
	if same {
		return nil
	}
	return f.reload(ctx, rev)
}

// Refresh reloads after a local change.
func (f *freshness) Refresh(ctx context.Context) error {
	rev, err := f.st.Revision(ctx)
	if err != nil {
		return err
	}
	return f.reload(ctx, rev)
}

func (f *freshness) reload(ctx context.Context, rev int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.secrets.reset()
	if f.tokens != nil {
		f.tokens.reset()
	}
	if err := f.policy.Refresh(ctx); err != nil {
		return err
	}
	f.seen = rev
	if f.onReload != nil {
		f.onReload()
	}
	return nil
}

// JobState gives job tokens their job's machine and state (auth.JobStates).
func (s *secrets) JobState(ctx context.Context, uuid string) (string, string, error) {
	rec, err := s.st.Get(ctx, "jobs", uuid)
	if err != nil {
		return "", "", err
	}
	var j backend.Job
	if err := json.Unmarshal(rec.Data, &j); err != nil {
		return "", "", err
	}
	return j.Machine, j.State, nil
}

func (s *secrets) MachineSecret(ctx context.Context, uuid string) (string, error) {
	rec, err := s.st.Get(ctx, "machines", uuid)
	if err != nil {
		return "", err
	}
	var m backend.Machine
	if err := json.Unmarshal(rec.Data, &m); err != nil {
		return "", err
	}
	return m.Secret, nil
}

// authenticator adapts auth.Authenticator to the gateway, with a cache of
// verified user tokens: verifying a token derives its key from three
// Secrets and checks the signature, which is most of a Bearer request's
// cost. Entries are keyed by a hash of the header, live at most a minute
// (never past the token's expiry) and are all dropped whenever users,
// roles, tenants or Secrets change (freshness), so a rotation still kills a
// token on the next request. Machine tokens are not cached: a machine's
// Secret can change without that signal.
type authenticator struct {
	a     *auth.Authenticator
	cache *tokenCache
}

func (x authenticator) Authenticate(ctx context.Context, header, ip string) (*gateway.Principal, error) {
	var key [sha256.Size]byte
	bearer := x.cache != nil && strings.HasPrefix(header, "Bearer ")
	if bearer {
		key = sha256.Sum256([]byte(header))
		if p, ok := x.cache.get(key); ok {
			return p, nil
		}
	}
	p, err := x.a.Authenticate(ctx, header, ip)
	if err != nil {
		return nil, err
	}
	gp := toGateway(p)
	if bearer && p.Kind == auth.KindUser && !p.ExpiresAt.IsZero() {
		x.cache.put(key, gp, p.ExpiresAt)
	}
	return gp, nil
}

// tokenCache holds verified user tokens (see authenticator).
type tokenCache struct {
	mu      sync.Mutex
	entries map[[sha256.Size]byte]tokenEntry
	max     int
	ttl     time.Duration
	now     func() time.Time
}

type tokenEntry struct {
	p       *gateway.Principal
	expires time.Time
}

func newTokenCache(max int, ttl time.Duration) *tokenCache {
	return &tokenCache{entries: map[[sha256.Size]byte]tokenEntry{}, max: max, ttl: ttl, now: time.Now}
}

func (c *tokenCache) get(k [sha256.Size]byte) (*gateway.Principal, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[k]
	if !ok {
		return nil, false
	}
	if !c.now().Before(e.expires) {
		delete(c.entries, k)
		return nil, false
	}
	// Callers may keep the principal; hand out a copy.
	cp := *e.p
	return &cp, true
}

func (c *tokenCache) put(k [sha256.Size]byte, p *gateway.Principal, tokenExpiry time.Time) {
	exp := c.now().Add(c.ttl)
	if tokenExpiry.Before(exp) {
		exp = tokenExpiry
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) >= c.max {
		// Full: start over rather than track recency; a miss only costs
		// one verification.
		c.entries = map[[sha256.Size]byte]tokenEntry{}
	}
	cp := *p
	c.entries[k] = tokenEntry{p: &cp, expires: exp}
}

func (c *tokenCache) reset() {
	c.mu.Lock()
	c.entries = map[[sha256.Size]byte]tokenEntry{}
	c.mu.Unlock()
}

func toGateway(p *auth.Principal) *gateway.Principal {
	return &gateway.Principal{Kind: p.Kind, Name: p.Name, Grantor: p.Grantor, Roles: p.Roles, TokenRoles: p.TokenRoles,
		RoleRestricted: p.RoleRestricted, Restrict: p.Restrict, MachineToken: p.MachineToken, Basic: p.Basic,
		ExpiresAt: p.ExpiresAt, Job: p.Job, Claims: p.Claims}
}

func toAuth(p *gateway.Principal) *auth.Principal {
	if p == nil {
		return nil
	}
	return &auth.Principal{Kind: p.Kind, Name: p.Name, Grantor: p.Grantor, Roles: p.Roles, TokenRoles: p.TokenRoles,
		RoleRestricted: p.RoleRestricted, Restrict: p.Restrict, MachineToken: p.MachineToken, Basic: p.Basic,
		ExpiresAt: p.ExpiresAt, Job: p.Job, Claims: p.Claims}
}

// resolver implements claims.Resolver over the object service.
type resolver struct{ o *objects.Service }

func (r resolver) NativeKey(ctx context.Context, prefix, key string) (string, error) {
	m, _, err := r.o.Get(ctx, prefix, key)
	if err != nil {
		return "", err
	}
	return m.Key(), nil
}

func (r resolver) JobMachine(ctx context.Context, key string) (string, error) {
	m, _, err := r.o.Get(ctx, "jobs", key)
	if err != nil {
		return "", err
	}
	return m.(*backend.Job).Machine, nil
}

func (r resolver) Current(ctx context.Context, prefix, key string) ([]byte, error) {
	m, _, err := r.o.Get(ctx, prefix, key)
	if err != nil {
		return nil, err
	}
	return json.Marshal(m)
}

// policySync loads roles, tenants and the license into the policy engine.
type policySync struct {
	st      *store.Store
	engine  *opa.Engine
	lic     *licenser
	mu      sync.Mutex
	tenants map[string]string
}

func listAll[T any](ctx context.Context, st *store.Store, prefix string) ([]T, error) {
	recs, _, _, err := st.List(ctx, prefix, backend.Query{Limit: -1})
	if err != nil {
		return nil, err
	}
	out := make([]T, 0, len(recs))
	for _, r := range recs {
		var v T
		if err := json.Unmarshal(r.Data, &v); err != nil {
			return nil, fmt.Errorf("%s/%s: %w", prefix, r.Key, err)
		}
		out = append(out, v)
	}
	return out, nil
}

// Refresh reloads everything the policies know (see freshness).
func (p *policySync) Refresh(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	roles, err := listAll[backend.Role](ctx, p.st, "roles")
	if err != nil {
		return err
	}
	tenants, err := listAll[backend.Tenant](ctx, p.st, "tenants")
	if err != nil {
		return err
	}
	st := p.lic.LicenseState(ctx)
	d := policies.NewData(roles, tenants, policies.LicenseData{Valid: st.Valid, Features: st.Features})
	if err := p.engine.SetData(ctx, d); err != nil {
		return err
	}
	p.tenants = d.UserTenant
	return nil
}

func (p *policySync) TenantOf(user string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.tenants[user]
}

// licenser verifies and keeps the license (ed25519, backend/license).
type licenser struct {
	st  *store.Store
	pub ed25519.PublicKey
	now func() time.Time
}

func (l *licenser) LicenseState(ctx context.Context) gateway.LicenseState {
	out := gateway.LicenseState{Features: []string{}}
	doc, ok, err := l.st.GetSetting(ctx, settingLicense)
	if err != nil {
		out.Error = "license could not be read"
		return out
	}
	if !ok || doc == "" {
		out.Error = "no license loaded"
		return out
	}
	if l.pub == nil {
		out.Error = "no license public key configured (--license-public-key)"
		return out
	}
	lic, err := license.Verify(l.pub, doc, l.now())
	if err != nil {
		out.Error = err.Error()
		return out
	}
	return gateway.LicenseState{Valid: true, Owner: lic.Owner, Features: append([]string{}, lic.Features...),
		Expires: lic.Expires.UTC().Format(time.RFC3339)}
}

func (l *licenser) LoadLicense(ctx context.Context, doc string) (gateway.LicenseState, error) {
	if l.pub == nil {
		return gateway.LicenseState{}, backend.NewError(backend.EBADREQUEST, "PUT", "license", "",
			"no license public key configured: start the server with --license-public-key")
	}
	if _, err := license.Verify(l.pub, doc, l.now()); err != nil {
		return gateway.LicenseState{}, backend.NewError(backend.EINVALID, "ValidationError", "license", "", err.Error())
	}
	if err := l.st.SetSetting(ctx, settingLicense, doc); err != nil {
		return gateway.LicenseState{}, err
	}
	return l.LicenseState(ctx), nil
}

// users implements the gateway's token, password and Secret routes.
type users struct {
	st      *store.Store
	o       *objects.Service
	authn   *auth.Authenticator
	engine  *opa.Engine
	secrets *secrets
	fresh   *freshness
	maxTTL  time.Duration
}

func (u *users) Token(ctx context.Context, name string, grantor *gateway.Principal, req gateway.TokenRequest) (string, error) {
	rec, err := u.secrets.User(ctx, name)
	if err != nil {
		if backend.IsCode(err, backend.ENOTFOUND) {
			return "", backend.NotFound("GET", "users", name)
		}
		return "", err
	}
	ttl, err := u.authn.ParseTTL(req.TTL)
	if err != nil {
		return "", backend.NewError(backend.EBADREQUEST, "GET", "users", name, backend.AsError(err).Messages...)
	}
	var roles []string
	if req.Roles != nil {
		// Spec: a requested role that would widen access is dropped silently.
		if roles, err = u.engine.TokenRoles(ctx, rec.Roles, req.Roles); err != nil {
			return "", err
		}
		if roles == nil {
			roles = []string{}
		}
	}
	var restrict []backend.Claim
	if req.Scope != "" || req.Action != "" || req.Specific != "" {
		c := backend.Claim{Scope: req.Scope, Action: req.Action, Specific: req.Specific}
		if c.Scope == "" {
			c.Scope = "*"
		}
		if c.Action == "" {
			c.Action = "*"
		}
		if c.Specific == "" {
			c.Specific = "*"
		}
		restrict = []backend.Claim{c}
	}
	tok, _, err := u.authn.IssueUserToken(ctx, rec, toAuth(grantor), ttl, roles, restrict)
	return tok, err
}

func (u *users) ChangePassword(ctx context.Context, name, password string) (backend.Model, error) {
	return u.o.SetPassword(ctx, name, password)
}

func (u *users) RotateSecret(ctx context.Context, name string) error {
	// Writing Secret rotates it to a fresh random value; through the object
	// service, so the change is published like any other user write.
	_, err := u.o.Patch(ctx, "users", name, []byte(`[{"op":"replace","path":"/Secret","value":"rotate"}]`), false)
	if backend.IsCode(err, backend.ENOTFOUND) {
		return backend.NotFound("POST", "users", name)
	}
	if err != nil {
		return err
	}
	return u.fresh.Refresh(ctx)
}

func (u *users) RotateSystemSecret(ctx context.Context) error {
	if err := u.st.SetSetting(ctx, settingSystemSecret, auth.NewSecret()); err != nil {
		return err
	}
	return u.fresh.Refresh(ctx)
}

// prefs are server preferences with their defaults (reference §6.3).
type prefs struct{ st *store.Store }

var prefDefaults = map[string]string{
	"knownTokenTimeout":   "3600",
	"unknownTokenTimeout": "600",
	"rs-debug-enable":     "false",
	"defaultWorkflow":     "",
	"defaultStage":        "none",
	"defaultBootEnv":      "local",
}

func (p prefs) Prefs(ctx context.Context) (map[string]string, error) {
	out := map[string]string{}
	for k, def := range prefDefaults {
		v, ok, err := p.st.GetSetting(ctx, prefPrefix+k)
		if err != nil {
			return nil, err
		}
		if !ok {
			v = def
		}
		out[k] = v
	}
	return out, nil
}

func (p prefs) SetPrefs(ctx context.Context, in map[string]string) (map[string]string, error) {
	var v backend.ValidationErrors
	names := make([]string, 0, len(in))
	for k := range in {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		val := in[k]
		if _, ok := prefDefaults[k]; !ok {
			v.Add("Unknown Preference %s", k)
			continue
		}
		switch k {
		case "knownTokenTimeout", "unknownTokenTimeout":
			if n, err := strconv.Atoi(val); err != nil || n < 0 {
				v.Add("Preference %s: %q is not a number of seconds", k, val)
			}
		case "rs-debug-enable":
			if _, err := strconv.ParseBool(val); err != nil {
				v.Add("Preference %s must be true or false", k)
			}
		}
	}
	if err := v.Err("preferences", ""); err != nil {
		return nil, err
	}
	err := p.st.InTx(ctx, func(ctx context.Context) error {
		for _, k := range names {
			if err := p.st.SetSetting(ctx, prefPrefix+k, in[k]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return p.Prefs(ctx)
}

func (p prefs) seconds(ctx context.Context, name string) time.Duration {
	all, err := p.Prefs(ctx)
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(all[name])
	return time.Duration(n) * time.Second
}

func (p prefs) debug() bool {
	all, err := p.Prefs(context.Background())
	if err != nil {
		return false
	}
	b, _ := strconv.ParseBool(all["rs-debug-enable"])
	return b
}

// poolsAdapter dispatches the gateway's pool verbs.
type poolsAdapter struct{ p *pools.Service }

func (a poolsAdapter) Active(ctx context.Context, visible []string) ([]string, error) {
	return a.p.Active(ctx, visible)
}
func (a poolsAdapter) Status(ctx context.Context, pool string, visible []string) (map[string][]backend.PoolResult, error) {
	return a.p.Status(ctx, pool, visible)
}
func (a poolsAdapter) Op(ctx context.Context, verb, pool string, body []byte, source string, force bool, visible []string) ([]backend.PoolResult, error) {
	opts := pools.OpOptions{SourcePool: source, Force: force, Visible: visible}
	switch verb {
	case "add":
		return a.p.Add(ctx, pool, body, opts)
	case "remove":
		return a.p.Remove(ctx, pool, body, opts)
	case "allocate":
		return a.p.Allocate(ctx, pool, body, opts)
	case "release":
		return a.p.Release(ctx, pool, body, opts)
	}
	return nil, backend.Errorf(backend.ENOTFOUND, "unknown pool operation %s", verb)
}
func (a poolsAdapter) ReleaseToPool(ctx context.Context, key string, _ []string) ([]backend.PoolResult, error) {
	return a.p.ReleaseToPool(ctx, key)
}

// cbDeps gives the callback service machines, plugins and the queue.
type cbDeps struct {
	st *store.Store
	o  *objects.Service
}

func (d cbDeps) GetMachine(ctx context.Context, uuid string) (*backend.Machine, error) {
	m, _, err := d.o.Get(ctx, "machines", uuid)
	if err != nil {
		return nil, err
	}
	return m.(*backend.Machine), nil
}

func (d cbDeps) MachineParams(ctx context.Context, m *backend.Machine, aggregate, decode bool) (map[string]any, error) {
	if aggregate {
		return d.o.Aggregate(ctx, m, decode)
	}
	return d.o.Params(ctx, "machines", m.Uuid, false, decode)
}

func (d cbDeps) ListPlugins(ctx context.Context) ([]*backend.Plugin, error) {
	list, err := listAll[backend.Plugin](ctx, d.st, "plugins")
	if err != nil {
		return nil, err
	}
	out := make([]*backend.Plugin, len(list))
	for i := range list {
		out[i] = &list[i]
		if list[i].Provider == callback.ProviderName {
			if err := d.openParams(ctx, out[i]); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// openParams gives the callback service a plugin's params in the clear:
// callback/auths is a Secure param, stored sealed, and the service must see
// what the validation at save time saw.
func (d cbDeps) openParams(ctx context.Context, p *backend.Plugin) error {
	params, err := d.o.Params(ctx, "plugins", p.Name, false, true)
	if err != nil {
		return err
	}
	p.Params = params
	return nil
}

func (d cbDeps) EnqueueDelivery(ctx context.Context, x callback.Delivery) (int64, error) {
	return d.st.EnqueueDelivery(ctx, store.Delivery(x))
}

func (d cbDeps) ClaimDeliveries(ctx context.Context, n int, lease time.Duration) ([]callback.Delivery, error) {
	ds, err := d.st.ClaimDeliveries(ctx, n, lease)
	out := make([]callback.Delivery, len(ds))
	for i, x := range ds {
		out[i] = callback.Delivery(x)
	}
	return out, err
}

func (d cbDeps) FinishDelivery(ctx context.Context, id int64, state, lastErr string, nextAt time.Time) error {
	return d.st.FinishDelivery(ctx, id, state, lastErr, nextAt)
}

func (d cbDeps) RecordAttempt(ctx context.Context, a callback.Attempt) error {
	return d.st.RecordAttempt(ctx, store.CallbackAttempt(a))
}

func (d cbDeps) ListAttempts(ctx context.Context, q callback.AttemptQuery) ([]callback.Attempt, error) {
	at, err := d.st.ListAttemptsPage(ctx, store.AttemptQuery(q))
	out := make([]callback.Attempt, len(at))
	for i, a := range at {
		out[i] = callback.Attempt(a)
	}
	return out, err
}

// actions implements plugin actions (callbackDo) for the gateway.
type actions struct {
	st *store.Store
	o  *objects.Service
	cb *callback.Service
}

func (a actions) Providers() []backend.PluginProvider {
	return []backend.PluginProvider{callback.Provider()}
}

func (a actions) callbackPlugins(ctx context.Context) ([]*backend.Plugin, error) {
	all, err := cbDeps{st: a.st, o: a.o}.ListPlugins(ctx)
	if err != nil {
		return nil, err
	}
	out := []*backend.Plugin{}
	for _, p := range all {
		if p.Provider == "callback" {
			out = append(out, p)
		}
	}
	return out, nil
}

// List returns the actions plugins offer on an object (one per plugin
// instance; Provider is the provider name, as DRP reports it). A non-empty
// plugin keeps only that plugin's.
func (a actions) List(ctx context.Context, prefix, key, plugin string) ([]backend.AvailableAction, error) {
	if _, _, err := a.o.Get(ctx, prefix, key); err != nil {
		return nil, err
	}
	out := []backend.AvailableAction{}
	if prefix != "machines" {
		return out, nil
	}
	ps, err := a.callbackPlugins(ctx)
	if err != nil {
		return nil, err
	}
	for _, p := range ps {
		if plugin != "" && p.Name != plugin {
			continue
		}
		out = append(out, callback.Provider().AvailableActions...)
	}
	return out, nil
}

func (a actions) Run(ctx context.Context, prefix, key, cmd, plugin string, params map[string]any) (json.RawMessage, error) {
	m, _, err := a.o.Get(ctx, prefix, key)
	if err != nil {
		return nil, err
	}
	if prefix != "machines" || cmd != "callbackDo" {
		return nil, backend.NewError(backend.EBADREQUEST, "INVOKE", prefix, key, "Action "+cmd+" on "+prefix+": Not Found")
	}
	mc := m.(*backend.Machine)
	var p *backend.Plugin
	if plugin != "" {
		pm, _, err := a.o.Get(ctx, "plugins", plugin)
		if err != nil || pm.(*backend.Plugin).Provider != "callback" {
			return nil, backend.NewError(backend.EBADREQUEST, "INVOKE", prefix, key,
				"Action "+cmd+" on machines for plugin "+plugin+" not found")
		}
		p = pm.(*backend.Plugin)
		if err := (cbDeps{st: a.st, o: a.o}).openParams(ctx, p); err != nil {
			return nil, err
		}
	} else {
		ps, err := a.callbackPlugins(ctx)
		if err != nil {
			return nil, err
		}
		if len(ps) == 0 {
			return nil, backend.NewError(backend.EBADREQUEST, "INVOKE", prefix, key, "Action "+cmd+" on machines: Not Found")
		}
		p = ps[0]
	}
	if !p.Available {
		return nil, backend.NewError(backend.ECONFLICT, "INVOKE", "plugins", p.Name,
			append([]string{"plugin " + p.Name + " is not available"}, p.Errors...)...)
	}
	// Action params missing from the body come from the machine's
	// aggregated params, as DRP fills declared action params.
	agg, err := a.o.Aggregate(ctx, mc, false)
	if err != nil {
		return nil, err
	}
	for _, name := range []string{"callback/action", "callback/data-override"} {
		if _, ok := params[name]; !ok {
			if v, ok := agg[name]; ok {
				params[name] = v
			}
		}
	}
	return a.cb.Do(ctx, p, mc, params, "action")
}

func (a actions) Attempts(ctx context.Context, plugin, machine string, limit int) (any, error) {
	if _, _, err := a.o.Get(ctx, "plugins", plugin); err != nil {
		return nil, err
	}
	return a.cb.Attempts(ctx, plugin, machine, limit)
}

// jobs implements job routes beyond CRUD, including rendering a job's task
// templates with machine tokens (reference §8.3).
type jobs struct {
	o     *objects.Service
	authn *auth.Authenticator
	prefs prefs
	info  func() render.Info
}

func (j jobs) CreateJob(ctx context.Context, body []byte) (int, *backend.Job, error) {
	return j.o.CreateJob(ctx, body)
}

// JobToken mints job's token for creator (auth.IssueJobToken), with the
// extra claims of the job's task as it is now.
func (j jobs) JobToken(ctx context.Context, job *backend.Job, creator *gateway.Principal) (string, error) {
	var extra []backend.Claim
	if !strings.Contains(job.Task, ":") {
		tm, _, err := j.o.Get(backend.WithAccess(ctx, nil), "tasks", job.Task)
		if err != nil && !backend.IsCode(err, backend.ENOTFOUND) {
			return "", err
		}
		if err == nil {
			extra = tm.(*backend.Task).ExtraClaims
		}
	}
	job.ExtraClaims = extra
	if creator == nil {
		return "", nil
	}
	if creator.Kind == auth.KindUser {
		a := backend.AccessFrom(ctx)
		if a == nil {
			return "", nil
		}
		ok, err := a.Can(ctx, auth.JobTokenClaims(job.Machine, extra)...)
		if err != nil || !ok {
			return "", err
		}
	}
	// A token without expiry (Basic) gives the job token the known-machine
	// token lifetime; otherwise the creator's token bounds it.
	ttl := j.prefs.seconds(ctx, "knownTokenTimeout")
	if !creator.ExpiresAt.IsZero() {
		ttl = 3 * 52 * 7 * 24 * time.Hour
	}
	tok, _, err := j.authn.IssueJobToken(ctx, toAuth(creator), job.Machine, job.Uuid, extra, ttl)
	if backend.IsCode(err, backend.EFORBIDDEN) {
		return "", nil
	}
	return tok, err
}
func (j jobs) JobLog(ctx context.Context, key string) ([]byte, error) { return j.o.JobLog(ctx, key) }
func (j jobs) AppendJobLog(ctx context.Context, key string, b []byte) error {
	return j.o.AppendJobLog(ctx, key, b)
}

// jobAction is one rendered template of a job (DRP's JobAction).
type jobAction struct {
	Name    string            `json:"Name"`
	Path    string            `json:"Path"`
	Content string            `json:"Content"`
	Meta    map[string]string `json:"Meta"`
}

func (j jobs) JobActions(ctx context.Context, key, goos string) (any, error) {
	jm, _, err := j.o.Get(ctx, "jobs", key)
	if err != nil {
		return nil, err
	}
	job := jm.(*backend.Job)
	mm, _, err := j.o.Get(ctx, "machines", job.Machine)
	if err != nil {
		return nil, err
	}
	m := mm.(*backend.Machine)
	out := []jobAction{}
	if strings.Contains(job.Task, ":") {
		return out, nil
	}
	tm, _, err := j.o.Get(ctx, "tasks", job.Task)
	if err != nil {
		return nil, err
	}
	task := tm.(*backend.Task)
	agg, err := j.o.Aggregate(ctx, m, true)
	if err != nil {
		return nil, err
	}
	env := render.Env{
		Machine: m,
		Params: func(_ context.Context, name string) (any, bool, error) {
			v, ok := agg[name]
			return v, ok, nil
		},
		Info:   j.info(),
		Tokens: machineTokens{authn: j.authn, prefs: j.prefs},
	}
	for _, t := range task.Templates {
		if os := t.Meta["OS"]; os != "" && goos != "" && !strings.EqualFold(os, goos) {
			continue
		}
		text, err := render.Render(ctx, render.Task, t.Name, t.Contents, env, render.Limits{})
		if err != nil {
			return nil, backend.NewError(backend.ECONFLICT, "GET", "jobs", key, "template "+t.Name+": "+err.Error())
		}
		meta := t.Meta
		if meta == nil {
			meta = map[string]string{}
		}
		out = append(out, jobAction{Name: t.Name, Path: t.Path, Content: text, Meta: meta})
	}
	return out, nil
}

// machineTokens mints machine tokens during template expansion, the only
// way they are made (spec: machine token issue).
type machineTokens struct {
	authn *auth.Authenticator
	prefs prefs
}

func (t machineTokens) GenerateToken(ctx context.Context, m *backend.Machine) (string, error) {
	if m == nil || m.Uuid == "" {
		ttl := t.prefs.seconds(ctx, "unknownTokenTimeout")
		tok, _, err := t.authn.IssueMachineToken(ctx, "", auth.MachineDiscovery, ttl)
		return tok, err
	}
	ttl := t.prefs.seconds(ctx, "knownTokenTimeout")
	tok, _, err := t.authn.IssueMachineToken(ctx, m.Uuid, auth.MachineOperations, ttl)
	return tok, err
}

func (t machineTokens) GenerateInfiniteToken(ctx context.Context, m *backend.Machine) (string, error) {
	if m == nil || m.Uuid == "" {
		return "", nil
	}
	tok, _, err := t.authn.IssueMachineToken(ctx, m.Uuid, auth.MachineOperations, 3*52*7*24*time.Hour)
	return tok, err
}

// events publishes posted events on the bus, marked as posted: they reach
// event streams only and drive no server behaviour. Other replicas get them
// through the relay.
type events struct {
	bus   *backend.Bus
	relay *backend.Relay
}

func (e events) PostEvent(ctx context.Context, ev backend.Event) error {
	e.bus.PublishPosted(ctx, ev)
	return e.relay.SendPosted(ctx, ev)
}
