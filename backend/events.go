package backend

import (
	"context"
	"fmt"
	"strings"
	"sync"
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
	mu   sync.RWMutex
	subs map[*Subscription]struct{}
}

// Subscription receives the events its filter accepts.
type Subscription struct {
	C      <-chan Event
	c      chan Event
	filter func(Event) bool
	posted bool // also receives events clients posted
	full   func()
	bus    *Bus
	once   sync.Once
}

// NewBus returns an empty bus.
func NewBus() *Bus { return &Bus{subs: map[*Subscription]struct{}{}} }

// Subscribe registers a subscriber with a buffer of size n for the events
// the server itself publishes; filter may be nil. Events clients posted are
// never delivered to it.
func (b *Bus) Subscribe(n int, filter func(Event) bool) *Subscription {
	return b.subscribe(n, filter, false, nil)
}

// SubscribeAll is Subscribe that also receives the events clients posted
// (Event.Posted tells them apart). It is meant for streaming events to
// clients, never for acting on them.
func (b *Bus) SubscribeAll(n int, filter func(Event) bool) *Subscription {
	return b.subscribe(n, filter, true, nil)
}

// SubscribeStream is SubscribeAll for a stream that must not miss events
// silently: full is called (from the publisher's goroutine, so it must not
// block) each time an event does not fit in the buffer, and the stream is
// expected to end itself (docs/design.md §13.2).
func (b *Bus) SubscribeStream(n int, filter func(Event) bool, full func()) *Subscription {
	return b.subscribe(n, filter, true, full)
}

func (b *Bus) subscribe(n int, filter func(Event) bool, posted bool, full func()) *Subscription {
	c := make(chan Event, n)
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
func (b *Bus) Publish(_ context.Context, e Event) {
	b.publish(e)
}

// PublishPosted delivers an event a client posted, marked as such, to the
// matching SubscribeAll subscribers only.
func (b *Bus) PublishPosted(_ context.Context, e Event) {
	e.posted = true
	b.publish(e)
}

func (b *Bus) publish(e Event) {
	if e.Type == "jobs" && e.owner == "" {
		// Read once here rather than by every subscriber's filter.
		e.owner = e.Owner()
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	for s := range b.subs {
		if e.posted && !s.posted {
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
func (b *Bus) PostEvent(ctx context.Context, e Event) error {
	e, err := CheckPosted(e)
	if err != nil {
		return err
	}
	b.PublishPosted(ctx, e)
	return nil
}

// storeActions are the actions of the events the server publishes when a
// stored object changes.
var storeActions = map[string]bool{"create": true, "save": true, "update": true, "delete": true}

// CheckPosted decides whether a client may post e (POST /events) and
// returns it as it is published. Only the server reports changes of stored
// objects: an event whose Type names a stored kind and whose Action is a
// store action (create, save, update, delete; in any case) is invalid, so
// a made-up "machines update" with WorkflowComplete true never reaches an
// agent, an operator's stream or a "machines wait" (docs/design.md §13.1).
// A Type naming a kind in another case is written as the kind's name, so
// that streams decide it as an event of that kind: it reaches only the
// subscribers who may see the object it names (docs/design.md §13.2).
func CheckPosted(e Event) (Event, error) {
	if e.Type == "" || e.Action == "" {
		return e, NewError(EBADREQUEST, "POST", "events", "", "event needs Type and Action")
	}
	for prefix := range Kinds {
		if strings.EqualFold(strings.TrimSpace(e.Type), prefix) {
			e.Type = prefix
			break
		}
	}
	if KindOf(e.Type) != nil && storeActions[strings.ToLower(strings.TrimSpace(e.Action))] {
		return e, NewError(EINVALID, "ValidationError", "events", e.Key,
			fmt.Sprintf("a posted event cannot be %s %s: only the server reports changes of stored objects",
				e.Type, strings.ToLower(strings.TrimSpace(e.Action))))
	}
	return e, nil
}
