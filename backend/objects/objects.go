// Package objects is the object service behind every DRP CRUD route: it
// decodes, fills, validates and stores objects, applies JSON Patch updates,
// serves the params sub-resources, runs the job state machine and publishes
// change events. It speaks the backend error vocabulary; the gateway maps
// those errors to HTTP replies.
package objects

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"reflect"
	"time"

	"github.com/provgate/provgate/backend"
	"github.com/provgate/provgate/backend/eventbus"
)

// Store is the part of backend/store the service needs: reads and updates,
// creates and deletes.
type Store interface {
	backend.RecordStore
	Create(ctx context.Context, prefix, key string, data []byte) (backend.Record, error)
	Delete(ctx context.Context, prefix, key string) (backend.Record, error)
}

// JobLogStore keeps job logs. It is optional: a Store that also implements it
// is used for job logs unless Options.JobLogs is set.
type JobLogStore interface {
	AppendJobLog(ctx context.Context, uuid string, b []byte) error
	JobLog(ctx context.Context, uuid string) ([]byte, error)
}

// Options configure a Service. Zero values get safe defaults.
type Options struct {
	// Kinds is the kind and scope catalog cmd built (docs/design.md
	// §1.4); nil builds one.
	Kinds  *backend.Catalog
	Bus    *eventbus.Bus
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
	// PluginGrants names the pieces of a plugin's configuration (params in
	// the clear) that can carry machines' secrets or run programs on the
	// server, each keyed by its content, with the claims their writer must
	// hold (docs/design.md §5.9, §12.1). A write is checked for the pieces
	// it adds or changes.
	PluginGrants func(*backend.Plugin) map[string][]backend.Claim
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

// Service is the object service, in four parts over one store and one
// event bus, each named for what it does:
//
//   - Objects creates, reads, lists, updates and deletes objects of every
//     kind, keeping tenant membership in step (tenancy.go);
//   - Params serves the params sub-resources and keeps Secure values
//     sealed;
//   - Jobs runs the job state machine and keeps job logs;
//   - Accounts sets user passwords and token secrets and creates the first
//     admin.
//
// The parts share validation, events and transactions: a change made in
// one is seen by the others at once. All are safe for concurrent use.
type Service struct {
	Objects  *CRUD
	Params   *Params
	Jobs     *Jobs
	Accounts *Accounts

	c *core
}

// CRUD is the object part of the Service: the DRP CRUD routes.
type CRUD struct {
	*core
	// params shapes the params of what CRUD returns (Shape).
	params *Params
}

// Params is the params part of the Service: params sub-resources, the
// aggregated params of machines and Secure values at rest.
type Params struct {
	*core
	// objects writes param definitions (SealParam).
	objects *CRUD
}

// Jobs is the job part of the Service: job creation, the job state machine
// and job logs.
type Jobs struct {
	*core
	// onChange is Options.OnJobChange.
	onChange func(ctx context.Context, old, job *backend.Job) error
	logs     JobLogStore
}

// Accounts is the account part of the Service: passwords, token-revocation
// secrets and the first admin.
type Accounts struct {
	*core
	// objects creates the first admin and its role (Bootstrap).
	objects *CRUD
}

// core is what the parts share: reading and writing objects by the rules
// of their kinds (rules.go), transactions, and publishing their events.
type core struct {
	st        Store
	kinds     *backend.Catalog
	bus       *eventbus.Bus
	log       *slog.Logger
	hash      func(string) ([]byte, error)
	newSecret func() string
	now       func() time.Time
	notify    func(ctx context.Context, evs []backend.Event) error
	retries   int
	sec       *secureBox
	schemas   *schemaCache
	views     *viewCache
	// rules is every kind's rules, built once by New.
	rules map[string]*kindRules
}

// New builds a Service over st.
func New(st Store, o Options) *Service {
	c := newCore(st, o)
	j := &Jobs{core: c, onChange: o.OnJobChange, logs: o.JobLogs}
	if j.logs == nil {
		if jl, ok := st.(JobLogStore); ok {
			j.logs = jl
		}
	}
	crud, params := &CRUD{core: c}, &Params{core: c}
	crud.params, params.objects = params, crud
	s := &Service{Objects: crud, Params: params, Jobs: j, Accounts: &Accounts{core: c, objects: crud}, c: c}
	c.rules = newRules(s.Objects, s.Params, s.Jobs, newPluginRules(c, o))
	return s
}

// InTx runs fn in one store transaction. Calls to any part of the Service
// made with fn's ctx join it, and their events are published after the
// commit.
func (s *Service) InTx(ctx context.Context, fn func(ctx context.Context) error) error {
	return s.c.inTx(ctx, fn)
}

func newCore(st Store, o Options) *core {
	s := &core{
		st:        st,
		bus:       o.Bus,
		log:       o.Logger,
		hash:      o.HashPassword,
		newSecret: o.NewSecret,
		now:       o.Now,
		notify:    o.Notify,
		retries:   o.MaxRetries,
		schemas:   newSchemaCache(),
		views:     newViewCache(st, o.ViewCacheSize),
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.kinds == nil {
		s.kinds = backend.NewCatalog()
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

const eventsKey ctxKey = 0

// pending collects the events of a transaction; they are published only once
// the outermost transaction has committed, so subscribers never see
// a change that was rolled back.
type pending struct{ events []backend.Event }

// inTx runs fn in one store transaction; see Service.InTx.
func (s *core) inTx(ctx context.Context, fn func(ctx context.Context) error) error {
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

func (s *core) publish(ctx context.Context, evs []backend.Event) {
	if s.bus == nil {
		return
	}
	for _, e := range evs {
		s.bus.Publish(ctx, e)
	}
}

// event builds a change event; obj and orig are sanitized copies.
func (s *core) event(ctx context.Context, action string, obj, orig backend.Model) backend.Event {
	e := backend.Event{Time: s.now(), Action: action, Principal: backend.PrincipalFrom(ctx)}
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
	c := reflect.New(reflect.TypeOf(m).Elem()).Interface().(backend.Model)
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

// sanitized is m as a reply shows it (backend.Sanitize), or err.
func sanitized(m backend.Model, err error) (backend.Model, error) {
	if err != nil {
		return nil, err
	}
	return backend.Sanitize(m), nil
}

// bodyError turns a JSON decoding failure of a request body into a bad
// request of operation op.
func bodyError(op backend.Operation, prefix, key string, err error) error {
	msg := err.Error()
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		msg = fmt.Sprintf("json: cannot unmarshal %s into field %s of type %s", te.Value, te.Field, te.Type)
	}
	return &backend.Error{Code: backend.EBADREQUEST, Op: op, Model: prefix, Key: key, Messages: []string{msg}, Err: err}
}
