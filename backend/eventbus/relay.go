package eventbus

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/provgate/provgate/backend"
)

// Relay carries events between replicas sharing one PostgreSQL database
// (docs/design.md §13.4). A replica's bus sees only its own events; the
// relay sends a short notice per event with the database's NOTIFY, in the
// transaction of the change (so it is delivered only if the change
// commits), and on every other replica reads the object back and publishes
// it on that replica's bus. Subscribers there (event streams, long polls,
// pool waits) then see the change as if it had been made locally; what a
// stream may show of it is authorized there, as for local events.
//
// A notice names the object, never carries it: the object is read back
// from the database, so a notice cannot make a replica publish anything
// that is not stored. Events clients post are not stored; their notice
// carries the event itself, marked posted on arrival like any posted
// event.
type Relay struct {
	origin  string
	bus     *Bus
	send    func(ctx context.Context, payload string) error
	read    func(ctx context.Context, prefix, key string) ([]byte, error)
	onRev   func(ctx context.Context)
	log     *slog.Logger
	queue   chan string
	dropped atomic.Int64
}

// RelayOptions configure a Relay.
type RelayOptions struct {
	// Bus receives the events of other replicas.
	Bus *Bus
	// Send delivers a payload to every replica (PostgreSQL NOTIFY); called
	// with the transaction's ctx, it must join that transaction.
	Send func(ctx context.Context, payload string) error
	// Read returns an object's stored JSON, or an ENOTFOUND error.
	Read func(ctx context.Context, prefix, key string) ([]byte, error)
	// OnRevision runs when another replica changed authorization data
	// (users, roles, tenants, settings): the receiver reloads what it
	// caches. It may also run for this replica's own changes.
	OnRevision func(ctx context.Context)
	Logger     *slog.Logger
	// Queue bounds the notices waiting to be read back (4096).
	Queue int
}

// notice is one event as replicas tell each other about it.
type notice struct {
	Origin    string    `json:"o,omitempty"`
	Time      time.Time `json:"ts"`
	Type      string    `json:"t,omitempty"`
	Action    string    `json:"a,omitempty"`
	Key       string    `json:"k,omitempty"`
	Principal string    `json:"p,omitempty"`
	Owner     string    `json:"m,omitempty"`
	Revision  bool      `json:"r,omitempty"`
	// Posted is an event a client posted, as it was posted.
	Posted *backend.Event `json:"e,omitempty"`
}

// maxPayload keeps a payload under PostgreSQL's NOTIFY limit (8000 bytes).
const maxPayload = 7800

// NewRelay returns a relay with a fresh origin, which tells its own notices
// apart from other replicas'.
func NewRelay(o RelayOptions) *Relay {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Queue <= 0 {
		o.Queue = 4096
	}
	return &Relay{origin: rand.Text(), bus: o.Bus, send: o.Send, read: o.Read, onRev: o.OnRevision, log: o.Logger,
		queue: make(chan string, o.Queue)}
}

// Send tells the other replicas about evs, the events of one transaction;
// it runs inside that transaction. Notices are batched into as few
// payloads as fit.
func (r *Relay) Send(ctx context.Context, evs []backend.Event) error {
	if r == nil || len(evs) == 0 {
		return nil
	}
	batch := make([]json.RawMessage, 0, len(evs))
	size := 2
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		b, err := json.Marshal(batch)
		if err != nil {
			return err
		}
		batch, size = batch[:0], 2
		return r.send(ctx, string(b))
	}
	for _, e := range evs {
		n := notice{Origin: r.origin, Time: e.Time, Type: e.Type, Action: e.Action, Key: e.Key, Principal: e.Principal,
			Owner: e.Owner()}
		if e.Posted() {
			p := e
			n = notice{Origin: r.origin, Time: e.Time, Posted: &p}
		}
		b, err := json.Marshal(n)
		if err != nil {
			return err
		}
		if len(b) > maxPayload && n.Posted != nil {
			// A posted event too large for a notice travels without its
			// objects.
			p := *n.Posted
			p.Object, p.Original = nil, nil
			n.Posted = &p
			if b, err = json.Marshal(n); err != nil {
				return err
			}
		}
		if len(b) > maxPayload {
			r.log.WarnContext(ctx, "event too large to relay to other replicas", "type", e.Type, "action", e.Action)
			continue
		}
		if size+len(b)+1 > maxPayload {
			if err := flush(); err != nil {
				return err
			}
		}
		batch = append(batch, b)
		size += len(b) + 1
	}
	return flush()
}

// SendPosted relays an event a client posted (outside any transaction).
func (r *Relay) SendPosted(ctx context.Context, e backend.Event) error {
	if r == nil {
		return nil
	}
	e = e.AsPosted()
	return r.Send(ctx, []backend.Event{e})
}

// Receive queues a payload from the database for Run. It never blocks: a
// full queue drops the payload and counts it, since the events only wake
// subscribers, which re-read or time out (docs/design.md §13.1).
func (r *Relay) Receive(payload string) {
	select {
	case r.queue <- payload:
	default:
		if r.dropped.Add(1)%1000 == 1 {
			r.log.Warn("relay queue full: events from other replicas dropped", "dropped", r.dropped.Load())
		}
	}
}

// Resync runs after the connection to the database was lost and made
// again: notices sent meanwhile are gone, so cached authorization data is
// reloaded as if it had changed.
func (r *Relay) Resync(ctx context.Context) {
	ctx = backend.WithSystem(ctx)
	if r.onRev != nil {
		r.onRev(ctx)
	}
}

// Run handles queued payloads until ctx ends. Reading other replicas'
// objects back is the server's own work (docs/design.md §2.3).
func (r *Relay) Run(ctx context.Context) {
	ctx = backend.WithSystem(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case p := <-r.queue:
			r.handle(ctx, p)
		}
	}
}

func (r *Relay) handle(ctx context.Context, payload string) {
	var ns []notice
	if len(payload) > 0 && payload[0] == '[' {
		if err := json.Unmarshal([]byte(payload), &ns); err != nil {
			r.log.WarnContext(ctx, "relay: unreadable notice", "err", err.Error())
			return
		}
	} else {
		var n notice
		if err := json.Unmarshal([]byte(payload), &n); err != nil {
			r.log.WarnContext(ctx, "relay: unreadable notice", "err", err.Error())
			return
		}
		ns = []notice{n}
	}
	for _, n := range ns {
		switch {
		case n.Revision:
			if r.onRev != nil {
				r.onRev(ctx)
			}
		case n.Origin == r.origin:
			// This replica published it on its own bus already.
		case n.Posted != nil:
			// Checked where it was posted; checked again, so that no notice
			// turns a posted event into a store change here.
			if e, err := r.bus.kinds.CheckPosted(*n.Posted); err == nil {
				r.bus.PublishPosted(ctx, e)
			}
		default:
			e, ok, err := r.event(ctx, n)
			if err != nil {
				r.log.WarnContext(ctx, "relay: reading back an object", "type", n.Type, "key", n.Key, "err", err.Error())
				continue
			}
			if ok {
				r.bus.Publish(ctx, e)
			}
		}
	}
}

// event rebuilds the event of a notice from the object as stored now. An
// object that is gone (and the notice is no delete) is skipped: the notice
// of its delete follows.
func (r *Relay) event(ctx context.Context, n notice) (backend.Event, bool, error) {
	k := r.bus.kinds.Kind(n.Type)
	if k == nil {
		return backend.Event{}, false, nil
	}
	e := backend.Event{Time: n.Time, Type: n.Type, Action: n.Action, Key: n.Key, Principal: n.Principal}.WithOwner(n.Owner)
	if n.Action == "delete" {
		return e, true, nil
	}
	data, err := r.read(ctx, n.Type, n.Key)
	if err != nil {
		if backend.IsCode(err, backend.ENOTFOUND) {
			return e, false, nil
		}
		return e, false, err
	}
	m := k.New()
	if err := json.Unmarshal(data, m); err != nil {
		return e, false, err
	}
	m.Fill()
	switch v := m.(type) {
	case *backend.User:
		v.Sanitize()
	case *backend.Machine:
		v.Sanitize()
	case *backend.Job:
		v.Token = ""
	}
	if e.Object, err = json.Marshal(m); err != nil {
		return e, false, err
	}
	return e, true, nil
}

// PostEvent publishes an event a client posted on this replica's bus,
// marked as posted, and relays it to the others (POST /events).
func (r *Relay) PostEvent(ctx context.Context, e backend.Event) error {
	e, err := r.bus.kinds.CheckPosted(e)
	if err != nil {
		return err
	}
	r.bus.PublishPosted(ctx, e)
	return r.SendPosted(ctx, e)
}
