package eventbus

import (
	"context"
	"sync"

	"github.com/provgate/provgate/backend"
)

// Bus is the internal event bus: object changes and job state changes made
// by the server, and events clients post, are published here; long polls of
// objects and pool waits subscribe. Delivery is best effort and never blocks
// a publisher: a subscriber whose buffer is full misses events (deliveries
// that must not be lost go through a table, not the bus).
//
// Events clients post are notifications only: anyone holding the events
// claim could otherwise make up a failed job or a machine change. They
// reach only subscribers made with SubscribeAll (streams of events to
// clients); Subscribe, which every piece of server behaviour uses, never
// sees them.
type Bus struct {
	mu    sync.RWMutex
	subs  map[*Subscription]struct{}
	kinds *backend.Catalog
}

// Subscription receives the events its filter accepts.
type Subscription struct {
	C      <-chan backend.Event
	c      chan backend.Event
	filter func(backend.Event) bool
	posted bool // also receives events clients posted
	full   func()
	bus    *Bus
	once   sync.Once
}

// NewBus returns an empty bus; kinds decides which events a client may
// post (backend.Catalog.CheckPosted).
func NewBus(kinds *backend.Catalog) *Bus {
	return &Bus{subs: map[*Subscription]struct{}{}, kinds: kinds}
}

// Subscribe registers a subscriber with a buffer of size n for the events
// the server itself publishes; filter may be nil. Events clients posted are
// never delivered to it.
func (b *Bus) Subscribe(n int, filter func(backend.Event) bool) *Subscription {
	return b.subscribe(n, filter, false, nil)
}

// SubscribeAll is Subscribe that also receives the events clients posted
// (Event.Posted tells them apart). It is meant for streaming events to
// clients, never for acting on them.
func (b *Bus) SubscribeAll(n int, filter func(backend.Event) bool) *Subscription {
	return b.subscribe(n, filter, true, nil)
}

// SubscribeStream is SubscribeAll for a stream that must not miss events
// silently: full is called (from the publisher's goroutine, so it must not
// block) each time an event does not fit in the buffer, and the stream is
// expected to end itself (docs/design.md §13.2).
func (b *Bus) SubscribeStream(n int, filter func(backend.Event) bool, full func()) *Subscription {
	return b.subscribe(n, filter, true, full)
}

func (b *Bus) subscribe(n int, filter func(backend.Event) bool, posted bool, full func()) *Subscription {
	c := make(chan backend.Event, n)
	s := &Subscription{C: c, c: c, filter: filter, posted: posted, full: full, bus: b}
	b.mu.Lock()
	b.subs[s] = struct{}{}
	b.mu.Unlock()
	return s
}

// Close unregisters the subscription and closes its channel.
func (s *Subscription) Close() {
	s.once.Do(func() {
		s.bus.mu.Lock()
		delete(s.bus.subs, s)
		s.bus.mu.Unlock()
		close(s.c)
	})
}

// Publish delivers e to every matching subscriber without blocking. An
// event that came from PublishPosted stays marked when it is published
// again (relayed), so it never turns into one of the server's own.
func (b *Bus) Publish(_ context.Context, e backend.Event) {
	b.publish(e)
}

// PublishPosted delivers an event a client posted, marked as such, to the
// matching SubscribeAll subscribers only.
func (b *Bus) PublishPosted(_ context.Context, e backend.Event) {
	e = e.AsPosted()
	b.publish(e)
}

func (b *Bus) publish(e backend.Event) {
	if e.Type == "jobs" {
		// Read once here rather than by every subscriber's filter.
		e = e.WithOwner(e.Owner())
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	for s := range b.subs {
		if e.Posted() && !s.posted {
			continue
		}
		if s.filter != nil && !s.filter(e) {
			continue
		}
		select {
		case s.c <- e:
		default:
			if s.full != nil {
				s.full()
			}
		}
	}
}

// PostEvent publishes an event a client posted (POST /events) with
// PublishPosted: it reaches event streams only and drives no server
// behaviour. An event CheckPosted refuses is not published.
func (b *Bus) PostEvent(ctx context.Context, e backend.Event) error {
	e, err := b.kinds.CheckPosted(e)
	if err != nil {
		return err
	}
	b.PublishPosted(ctx, e)
	return nil
}
