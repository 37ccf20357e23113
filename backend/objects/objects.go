// Package objects is the object service behind every DRP CRUD route: it
// decodes, fills, validates and stores objects, applies JSON Patch updates,
// serves the params sub-resources, runs the job state machine and publishes
// change events. It speaks the backend error vocabulary; the gateway maps
// those errors to HTTP replies.
package objects

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"time"

	"github.com/provgate/provgate/backend"
	"github.com/provgate/provgate/backend/store"
)

// Store is the part of backend/store the service needs. Transactions travel
// in ctx: calls made with the ctx InTx hands to fn join that transaction.
type Store interface {
	Get(ctx context.Context, prefix, key string) (store.Record, error)
	GetBy(ctx context.Context, prefix, index, value string) (store.Record, error)
	Create(ctx context.Context, prefix, key string, data []byte) (store.Record, error)
	Update(ctx context.Context, prefix, key string, rev int64, data []byte) (store.Record, error)
	Delete(ctx context.Context, prefix, key string) (store.Record, error)
	List(ctx context.Context, prefix string, q backend.Query) ([]store.Record, int, int, error)
	InTx(ctx context.Context, fn func(ctx context.Context) error) error
}

// JobLogStore keeps job logs. It is optional: a Store that also implements it
// is used for job logs unless Options.JobLogs is set.
type JobLogStore interface {
	AppendJobLog(ctx context.Context, uuid string, b []byte) error
	JobLog(ctx context.Context, uuid string) ([]byte, error)
}

// Options configure a Service. Zero values get safe defaults.
type Options struct {
	Bus    *backend.Bus
	Logger *slog.Logger
	// HashPassword turns a clear password into the stored PasswordHash (a
	// simple-scrypt string). Without it, a Password field in a users create
	// body is refused.
	HashPassword func(string) ([]byte, error)
	// NewSecret returns a fresh random token-revocation nonce for users and
	// machines. Defaults to 16 random alphanumeric characters.
	NewSecret func() string
	// SecureKey is the 32-byte AES-256-GCM key for secure params at rest.
	// Without it, writing a secure param fails.
	SecureKey []byte
	Now       func() time.Time
	// Providers are the known plugin provider names; "callback" is always
	// known.
	Providers []string
	// ValidatePlugin checks a plugin's provider-specific configuration; its
	// messages make the plugin unavailable (it is still saved).
	ValidatePlugin func(*backend.Plugin) []string
	// JobLogs overrides where job logs are kept.
	JobLogs JobLogStore
	// MaxRetries bounds optimistic-update retries on a stale revision.
	MaxRetries int
	// OnJobChange runs inside the transaction of every job state change
	// (old and new job); its error aborts the change. The callback plugin
	// queues jobfail deliveries here so that none is lost.
	OnJobChange func(ctx context.Context, old, job *backend.Job) error
	// Notify runs at the end of every transaction that published events,
	// inside it, with those events: the relay tells other replicas about
	// them (docs/design.md §13.4), delivered only if the transaction
	// commits. Its error aborts the transaction.
	Notify func(ctx context.Context, evs []backend.Event) error
	// ViewCacheSize bounds the read cache of View (objects held): 0 means
	// DefaultViewCacheSize, a negative value turns it off.
	ViewCacheSize int
}

// Service is the object service. It is safe for concurrent use.
type Service struct {
	st          Store
	bus         *backend.Bus
	log         *slog.Logger
	hash        func(string) ([]byte, error)
	newSecret   func() string
	now         func() time.Time
	providers   map[string]bool
	plugin      func(*backend.Plugin) []string
	onJobChange func(ctx context.Context, old, job *backend.Job) error
	notify      func(ctx context.Context, evs []backend.Event) error
	jobLogs     JobLogStore
	retries     int
	sec         *secureBox
	schemas     *schemaCache
	views       *viewCache
}

// New builds a Service over st.
func New(st Store, o Options) *Service {
	s := &Service{
		st:          st,
		bus:         o.Bus,
		log:         o.Logger,
		hash:        o.HashPassword,
		newSecret:   o.NewSecret,
		now:         o.Now,
		providers:   map[string]bool{"callback": true},
		plugin:      o.ValidatePlugin,
		onJobChange: o.OnJobChange,
		notify:      o.Notify,
		jobLogs:     o.JobLogs,
		retries:     o.MaxRetries,
		schemas:     newSchemaCache(),
		views:       newViewCache(st, o.ViewCacheSize),
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.newSecret == nil {
		s.newSecret = randomSecret
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.retries <= 0 {
		s.retries = 5
	}
	for _, p := range o.Providers {
		s.providers[p] = true
	}
	if s.jobLogs == nil {
		if jl, ok := st.(JobLogStore); ok {
			s.jobLogs = jl
		}
	}
	if len(o.SecureKey) > 0 {
		box, err := newSecureBox(o.SecureKey)
		if err != nil {
			// A wrong key length is a wiring bug; secure writes then fail
			// with a clear error instead of the process refusing to start.
			s.log.Error("secure params disabled", "err", err)
		}
		s.sec = box
	}
	return s
}

// ETag is the entity tag of a stored object: a hash of its revision and JSON,
// the same on every replica.
func ETag(rev int64, data []byte) string {
	h := sha256.New()
	fmt.Fprintf(h, "%d\n", rev)
	h.Write(data)
	return `"` + hex.EncodeToString(h.Sum(nil)[:16]) + `"`
}

// ModelETag is the ETag of an object as Get returns it (sanitized, unshaped)
// at revision rev. Wait compares against this value.
func ModelETag(m backend.Model, rev int64) string {
	b, err := json.Marshal(m)
	if err != nil {
		return `""`
	}
	return ETag(rev, b)
}

const secretChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

func randomSecret() string {
	b := make([]byte, 16)
	max := big.NewInt(int64(len(secretChars)))
	for i := range b {
		n, err := rand.Int(rand.Reader, max)
		if err != nil {
			panic(err) // crypto/rand never fails on supported platforms
		}
		b[i] = secretChars[n.Int64()]
	}
	return string(b)
}

// ctx helpers -----------------------------------------------------------

type ctxKey int

const (
	principalKey ctxKey = iota
	tenantKey
	eventsKey
)

// WithPrincipal records who makes the change ("user:bob", "runner:<uuid>");
// it goes into the Principal of published events.
func WithPrincipal(ctx context.Context, p string) context.Context {
	return context.WithValue(ctx, principalKey, p)
}

// WithTenant records the caller's tenant: objects it creates in a scope the
// tenant restricts are appended to the tenant's Members (docs/design.md §6).
func WithTenant(ctx context.Context, tenant string) context.Context {
	return context.WithValue(ctx, tenantKey, tenant)
}

func principal(ctx context.Context) string { p, _ := ctx.Value(principalKey).(string); return p }
func tenantOf(ctx context.Context) string  { t, _ := ctx.Value(tenantKey).(string); return t }

// pending collects the events of a transaction; they are published only once
// the outermost Service transaction has committed, so subscribers never see
// a change that was rolled back.
type pending struct{ events []backend.Event }

// InTx runs fn in one store transaction. Service calls made with fn's ctx
// join it, and their events are published after the commit.
func (s *Service) InTx(ctx context.Context, fn func(ctx context.Context) error) error {
	if _, ok := ctx.Value(eventsKey).(*pending); ok {
		return s.st.InTx(ctx, fn)
	}
	p := &pending{}
	tctx := context.WithValue(ctx, eventsKey, p)
	err := s.st.InTx(tctx, func(ctx context.Context) error {
		if err := fn(ctx); err != nil {
			return err
		}
		if s.notify != nil && len(p.events) > 0 {
			return s.notify(ctx, p.events)
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.publish(ctx, p.events)
	return nil
}

// emit queues events on the enclosing transaction.
func emit(ctx context.Context, evs ...backend.Event) {
	if p, ok := ctx.Value(eventsKey).(*pending); ok {
		p.events = append(p.events, evs...)
	}
}

func (s *Service) publish(ctx context.Context, evs []backend.Event) {
	if s.bus == nil {
		return
	}
	for _, e := range evs {
		s.bus.Publish(ctx, e)
	}
}

// event builds a change event; obj and orig are sanitized copies.
func (s *Service) event(ctx context.Context, action string, obj, orig backend.Model) backend.Event {
	e := backend.Event{Time: s.now(), Action: action, Principal: principal(ctx)}
	if obj != nil {
		e.Type, e.Key = obj.Prefix(), obj.Key()
		e.Object = sanitizedJSON(obj)
	}
	if orig != nil {
		e.Type, e.Key = orig.Prefix(), orig.Key()
		e.Original = sanitizedJSON(orig)
	}
	return e
}

// encoding --------------------------------------------------------------

func decodeRecord(k *backend.Kind, data []byte) (backend.Model, error) {
	m := k.New()
	if err := json.Unmarshal(data, m); err != nil {
		return nil, fmt.Errorf("objects: decode stored %s: %w", k.Prefix, err)
	}
	m.Fill()
	return m, nil
}

func encode(m backend.Model) ([]byte, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("objects: encode %s: %w", m.Prefix(), err)
	}
	return b, nil
}

// clone deep-copies a model through JSON.
func clone(m backend.Model) backend.Model {
	b, _ := json.Marshal(m)
	c := backend.KindOf(m.Prefix()).New()
	_ = json.Unmarshal(b, c)
	c.Fill()
	return c
}

func sanitizedJSON(m backend.Model) json.RawMessage {
	c := clone(m)
	backend.Sanitize(c)
	b, _ := json.Marshal(c)
	return b
}

// bodyError turns a JSON decoding failure of a request body into DRP's 400
// with the method as Type.
func bodyError(method, prefix, key string, err error) error {
	msg := err.Error()
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		msg = fmt.Sprintf("json: cannot unmarshal %s into field %s of type %s", te.Value, te.Field, te.Type)
	}
	return &backend.Error{Code: backend.EBADREQUEST, Type: method, Model: prefix, Key: key, Messages: []string{msg}, Err: err}
}
