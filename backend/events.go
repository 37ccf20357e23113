package backend

import (
	"context"
	"sync"
)

// Bus is the internal event bus: object changes, posted events and job state
// changes are published here; the callback plugin and pool waits subscribe.
// Delivery is best effort and never blocks a publisher: a subscriber whose
// buffer is full misses events (deliveries that must not be lost go through
// a table, not the bus).
type Bus struct {
	mu   sync.RWMutex
	subs map[*Subscription]struct{}
}

// Subscription receives the events its filter accepts.
type Subscription struct {
	C      <-chan Event
	c      chan Event
	filter func(Event) bool
	bus    *Bus
	once   sync.Once
}

// NewBus returns an empty bus.
func NewBus() *Bus { return &Bus{subs: map[*Subscription]struct{}{}} }

// Subscribe registers a subscriber with a buffer of size n; filter may be nil.
func (b *Bus) Subscribe(n int, filter func(Event) bool) *Subscription {
	c := make(chan Event, n)
	s := &Subscription{C: c, c: c, filter: filter, bus: b}
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

// Publish delivers e to every matching subscriber without blocking.
func (b *Bus) Publish(_ context.Context, e Event) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	for s := range b.subs {
		if s.filter != nil && !s.filter(e) {
			continue
		}
		select {
		case s.c <- e:
		default:
		}
	}
}
