// Package stream serves DRP's websocket event stream (GET /api/v3/ws,
// docs/design.md §13.2): clients register filters with text frames
// ("register machines.update.<uuid>"), each frame is acknowledged with one
// event, and every event on the bus that matches a filter is sent as one
// DRP Event object, if the caller may see it at that moment.
//
// The package knows nothing of HTTP or of how callers are authorized: the
// gateway upgrades the connection and hands over a Viewer, which
// authenticates the caller's credential again and decides each event.
package stream

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fasthttp/websocket"

	"github.com/provgate/provgate/backend"
	"github.com/provgate/provgate/backend/eventbus"
)

// Conn is one websocket connection; *websocket.Conn of fasthttp/websocket
// (and of gorilla/websocket) satisfies it. One goroutine reads while
// another writes.
type Conn interface {
	ReadMessage() (messageType int, p []byte, err error)
	WriteMessage(messageType int, data []byte) error
	WriteControl(messageType int, data []byte, deadline time.Time) error
	SetReadDeadline(t time.Time) error
	SetWriteDeadline(t time.Time) error
	SetReadLimit(limit int64)
	SetPongHandler(h func(appData string) error)
	Close() error
}

// Viewer decides for the caller of one socket. Both methods authenticate
// the caller's credential again; when it is no longer valid (expired,
// Secret rotated, subject removed) they return an error wrapping
// ErrCredentials and the socket is closed.
type Viewer interface {
	Check(ctx context.Context) error
	// Decider authenticates the caller once for the events a socket is
	// about to send, all of them published before the call, and returns
	// what decides each of them for the caller as it is now.
	Decider(ctx context.Context) (Decide, error)
}

// Decide reports whether the caller may get the event's object now
// (docs/design.md §13.2): under the policy and data current when it is
// called. An error skips the event: the stream fails closed.
type Decide func(e backend.Event) (bool, error)

// ErrCredentials marks a credential that no longer authenticates.
var ErrCredentials = errors.New("credentials no longer valid")

// Identity is who holds a socket, as authentication first established.
type Identity struct {
	// Principal names the caller ("user:bob", "runner:<uuid>"); sockets
	// are counted per principal.
	Principal string
	// Machine, for machine tokens, is the machine UUID: such a socket
	// receives only that machine's events and its jobs' events, whatever
	// else its claims allow.
	Machine string
	// Expires is when the credential expires (zero: never, Basic).
	Expires time.Time
}

// Options tune a Hub. Zero values take the defaults noted.
type Options struct {
	Bus    *eventbus.Bus
	Logger *slog.Logger
	// Buffer bounds the events waiting for one socket (256). A socket whose
	// buffer overflows is closed: its client reads too slowly.
	Buffer int
	// MaxPerPrincipal bounds the open sockets of one principal (16).
	MaxPerPrincipal int
	// MaxFilters bounds the filters one socket registers (64).
	MaxFilters int
	// PingInterval is how often the server pings (30s); a client that
	// sends nothing, not even a pong, for twice as long is dropped.
	PingInterval time.Duration
	// WriteTimeout bounds one frame's write (10s).
	WriteTimeout time.Duration
	// RecheckInterval is how often every socket re-authenticates even
	// without a reason to (1m).
	RecheckInterval time.Duration
	// FlushInterval paces the writes of events to a busy socket (10ms;
	// negative: none). An event that finds its socket idle is sent at
	// once; after a write, the socket waits for the hub's next flush tick
	// (one every interval, at least half an interval away), and the
	// events published meanwhile go out together in one write
	// (docs/design.md §13.2).
	FlushInterval time.Duration
}

// DefaultFlushInterval is Options.FlushInterval's default.
const DefaultFlushInterval = 10 * time.Millisecond

// Hub holds the open sockets.
type Hub struct {
	o       Options
	mu      sync.Mutex
	sockets map[*socket]struct{}
	count   map[string]int
	closed  bool
	stop    chan struct{}
	sent    atomic.Int64
	dropped backend.Counts

	// recent holds frames encoded lately, shared by the sockets sending
	// the same event (frame); an event's slot is picked by its key and
	// time.
	recent [frameSlots]atomic.Pointer[encoded]
	// epoch starts the hub's flush ticks (untilTick).
	epoch time.Time
}

// encoded is an event and its frame.
type encoded struct {
	e     backend.Event
	frame []byte
}

// New returns a Hub.
func New(o Options) *Hub {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Buffer <= 0 {
		o.Buffer = 256
	}
	if o.MaxPerPrincipal <= 0 {
		o.MaxPerPrincipal = 16
	}
	if o.MaxFilters <= 0 {
		o.MaxFilters = 64
	}
	if o.PingInterval <= 0 {
		o.PingInterval = 30 * time.Second
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 10 * time.Second
	}
	if o.RecheckInterval <= 0 {
		o.RecheckInterval = time.Minute
	}
	switch {
	case o.FlushInterval == 0:
		o.FlushInterval = DefaultFlushInterval
	case o.FlushInterval < 0:
		o.FlushInterval = 0
	}
	return &Hub{o: o, sockets: map[*socket]struct{}{}, count: map[string]int{}, stop: make(chan struct{}),
		epoch: time.Now()}
}

// untilTick is the time from now to the hub's next flush tick, one every
// FlushInterval for all sockets: busy sockets write at the same ticks, so
// their work comes in one short burst per interval rather than spread over
// all of it (docs/design.md §13.2). It is at least half an interval.
func (h *Hub) untilTick() time.Duration {
	t := h.o.FlushInterval
	d := t - time.Since(h.epoch)%t
	if d < t/2 {
		d += t
	}
	return d
}

// Admit reserves a socket for principal before the connection is upgraded:
// ETOOMANY when it already holds MaxPerPrincipal, EUNAVAILABLE once the
// hub is closed. release gives the place back; Serve calls it.
func (h *Hub) Admit(principal string) (release func(), err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, backend.NewError(backend.EUNAVAILABLE, "GET", "ws", "", "the server is shutting down")
	}
	if h.count[principal] >= h.o.MaxPerPrincipal {
		return nil, backend.NewError(backend.ETOOMANY, "GET", "ws", "",
			fmt.Sprintf("%s already has %d event streams open (the limit)", principal, h.o.MaxPerPrincipal))
	}
	h.count[principal]++
	var once sync.Once
	return func() {
		once.Do(func() {
			h.mu.Lock()
			if h.count[principal]--; h.count[principal] <= 0 {
				delete(h.count, principal)
			}
			h.mu.Unlock()
		})
	}, nil
}

// Recheck makes every socket authenticate its caller again, at once: the
// gateway calls it whenever users, roles, tenants or Secrets changed.
func (h *Hub) Recheck() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.sockets {
		select {
		case s.recheck <- struct{}{}:
		default:
		}
	}
}

// Open is the number of open sockets.
func (h *Hub) Open() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.sockets)
}

// Sent is the number of events sent since the start.
func (h *Hub) Sent() int64 { return h.sent.Load() }

// Dropped counts the sockets the server closed, by reason: slow_consumer,
// credentials, expired, shutdown, write_failed (a client that closes its
// socket is not counted).
func (h *Hub) Dropped() map[string]uint64 { return h.dropped.Snapshot() }

// Close closes every socket ("going away") and refuses new ones.
func (h *Hub) Close() {
	h.mu.Lock()
	if !h.closed {
		h.closed = true
		close(h.stop)
	}
	n := len(h.sockets)
	h.mu.Unlock()
	// Sockets end on their own goroutines; wait a little for them so the
	// close frames go out before the process stops.
	for i := 0; n > 0 && i < 100; i++ {
		time.Sleep(10 * time.Millisecond)
		n = h.Open()
	}
}

// Serve runs one socket until it ends; it closes c and calls release.
func (h *Hub) Serve(ctx context.Context, c Conn, id Identity, v Viewer, release func()) {
	defer release()
	defer c.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s := &socket{h: h, c: c, id: id, v: v, filters: map[string]filter{},
		acks: make(chan backend.Event, h.o.MaxFilters+8), recheck: make(chan struct{}, 1),
		full: make(chan struct{}), done: make(chan struct{})}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		s.closeWith(websocket.CloseGoingAway, "the server is shutting down", "shutdown")
		return
	}
	h.sockets[s] = struct{}{}
	// The caller was authenticated before the upgrade, and a Recheck
	// since then (its user removed, a Secret rotated) did not reach this
	// socket: it checks once now that Recheck reaches it.
	s.recheck <- struct{}{}
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		delete(h.sockets, s)
		h.mu.Unlock()
	}()
	if h.o.Bus == nil {
		s.closeWith(websocket.CloseInternalServerErr, "events are not available", "unavailable")
		return
	}
	sub := h.o.Bus.SubscribeStream(h.o.Buffer, s.wants, s.overflow)
	defer sub.Close()
	go s.read()
	s.write(ctx, sub)
	// The reader must be done with the connection before Serve returns:
	// the HTTP server reuses the connection's buffers once its handler has
	// returned. Closing the connection ends the read.
	_ = c.Close()
	<-s.done
}

// socket is one client connection.
type socket struct {
	h  *Hub
	c  Conn
	id Identity
	v  Viewer

	mu      sync.RWMutex
	filters map[string]filter

	acks     chan backend.Event
	recheck  chan struct{}
	full     chan struct{}
	fullOnce sync.Once
	done     chan struct{} // the reader ended
}

// wants is the bus filter; it runs on the publisher's goroutine.
func (s *socket) wants(e backend.Event) bool {
	if s.id.Machine != "" {
		// Every event of the machine or its jobs is taken, matching or
		// not: each one makes the socket check its credential, which a
		// new machine Secret or the job's end has just ended.
		return s.own(e)
	}
	return s.matches(e)
}

func (s *socket) own(e backend.Event) bool {
	switch e.Type {
	case "machines":
		return e.Key == s.id.Machine
	case "jobs":
		return e.Owner() == s.id.Machine
	}
	return false
}

func (s *socket) matches(e backend.Event) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, f := range s.filters {
		if f.match(e) {
			return true
		}
	}
	return false
}

func (s *socket) overflow() {
	s.fullOnce.Do(func() { close(s.full) })
}

// read handles the client's frames until the connection ends.
func (s *socket) read() {
	defer close(s.done)
	wait := 2*s.h.o.PingInterval + s.h.o.WriteTimeout
	s.c.SetReadLimit(4096)
	_ = s.c.SetReadDeadline(time.Now().Add(wait))
	s.c.SetPongHandler(func(string) error { return s.c.SetReadDeadline(time.Now().Add(wait)) })
	for {
		mt, msg, err := s.c.ReadMessage()
		if err != nil {
			return
		}
		_ = s.c.SetReadDeadline(time.Now().Add(wait))
		if mt != websocket.TextMessage {
			continue
		}
		ack := s.command(strings.TrimSpace(string(msg)))
		select {
		case s.acks <- ack:
		default:
			// The client sends frames without reading the answers.
			return
		}
	}
}

// command applies one text frame and returns its acknowledgement: an event
// of Type "websocket", Action "register" or "deregister", Key the filter
// (docs/design.md §13.2). Anything else is answered with Action "error", so
// a client counting acknowledgements never waits forever.
func (s *socket) command(text string) backend.Event {
	ack := backend.Event{Time: time.Now().UTC(), Type: "websocket"}
	verb, arg, _ := strings.Cut(text, " ")
	arg = strings.TrimSpace(arg)
	fail := func(msg string) backend.Event {
		ack.Action, ack.Key = "error", text
		var b strings.Builder
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(map[string]string{"Error": msg}) // a string map always encodes
		ack.Object = json.RawMessage(strings.TrimSpace(b.String()))
		return ack
	}
	switch verb {
	case "register":
		f, err := parseFilter(arg)
		if err != nil {
			return fail(err.Error())
		}
		s.mu.Lock()
		_, dup := s.filters[arg]
		if !dup && len(s.filters) >= s.h.o.MaxFilters {
			s.mu.Unlock()
			return fail(fmt.Sprintf("at most %d filters per connection", s.h.o.MaxFilters))
		}
		// The filter holds before its acknowledgement leaves, so a client
		// that reads an object after the acknowledgement misses no change.
		s.filters[arg] = f
		s.mu.Unlock()
	case "deregister":
		s.mu.Lock()
		delete(s.filters, arg)
		s.mu.Unlock()
	default:
		return fail("unknown command: send register or deregister <type>.<action>.<key>")
	}
	ack.Action, ack.Key = verb, arg
	return ack
}

// write sends acknowledgements and events until the socket ends.
func (s *socket) write(ctx context.Context, sub *eventbus.Subscription) {
	o := s.h.o
	ping := time.NewTicker(o.PingInterval)
	defer ping.Stop()
	recheck := time.NewTicker(o.RecheckInterval)
	defer recheck.Stop()
	var expired <-chan time.Time
	if !s.id.Expires.IsZero() {
		t := time.NewTimer(time.Until(s.id.Expires))
		defer t.Stop()
		expired = t.C
	}
	// A check that could not decide (the store or the password hasher
	// busy) is tried again soon rather than at the next interval.
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	check := func() bool {
		err := s.v.Check(ctx)
		if errors.Is(err, ErrCredentials) {
			s.closeWith(websocket.ClosePolicyViolation, "credentials no longer valid", "credentials")
			return false
		}
		if err != nil {
			s.h.o.Logger.WarnContext(ctx, "event stream: checking credentials", "principal", s.id.Principal, "err", err.Error())
			retry.Reset(time.Second)
		}
		return true
	}
	// After a write of events, the socket takes no event from its buffer
	// until the hub's next flush tick (events is nil meanwhile): what is
	// published in between goes out in the next write, so a busy stream
	// costs one TLS write and one wake-up of this goroutine per interval,
	// not per event.
	events := sub.C
	hold := time.NewTimer(time.Hour)
	hold.Stop()
	defer hold.Stop()
	var pending []backend.Event
	var frames [][]byte
	for {
		// A full buffer ends the socket before anything else is sent.
		select {
		case <-s.full:
			s.closeWith(websocket.ClosePolicyViolation,
				fmt.Sprintf("slow consumer: more than %d events waiting, connection closed", o.Buffer), "slow_consumer")
			return
		default:
		}
		select {
		case <-retry.C:
			if !check() {
				return
			}
		case <-s.done:
			return
		case <-s.h.stop:
			s.closeWith(websocket.CloseGoingAway, "the server is shutting down", "shutdown")
			return
		case <-s.full:
			s.closeWith(websocket.ClosePolicyViolation,
				fmt.Sprintf("slow consumer: more than %d events waiting, connection closed", o.Buffer), "slow_consumer")
			return
		case <-expired:
			s.closeWith(websocket.ClosePolicyViolation, "token expired", "expired")
			return
		case <-s.recheck:
			if !check() {
				return
			}
		case <-recheck.C:
			if !check() {
				return
			}
		case <-ping.C:
			if err := s.c.WriteControl(websocket.PingMessage, nil, time.Now().Add(o.WriteTimeout)); err != nil {
				s.h.dropped.Add("write_failed")
				return
			}
		case a := <-s.acks:
			if !s.send(encode(a)) {
				return
			}
		case <-hold.C:
			events = sub.C
		case e, ok := <-events:
			if !ok {
				return
			}
			// The events already waiting are taken too, decided for the
			// caller as authenticated once after they were all published,
			// and their frames written together, with one write to the
			// connection: a burst costs one TLS record and one system call
			// per socket, not one per event (docs/design.md §13.2).
			pending = append(pending[:0], e)
			caughtUp := false
			for !caughtUp && len(pending) < maxBatch {
				var more bool
				select {
				case e, more = <-sub.C:
				default:
				}
				if caughtUp = !more; !caughtUp {
					pending = append(pending, e)
				}
			}
			var keep bool
			frames, keep = s.deliver(ctx, pending, frames[:0], retry)
			clear(pending)
			if !keep {
				return
			}
			if len(frames) == 0 {
				continue
			}
			if !s.sendAll(frames) {
				return
			}
			s.h.sent.Add(int64(len(frames)))
			clear(frames)
			// A socket that took maxBatch events and may have more
			// waiting goes on at once rather than let its buffer fill.
			if o.FlushInterval > 0 && caughtUp {
				events = nil
				hold.Reset(s.h.untilTick())
			}
		}
	}
}

// maxBatch bounds the events one socket writes with one write (a variable
// for BenchmarkBurst).
var maxBatch = 64

// deliver decides events for the socket's caller and appends the frames of
// those to send to frames. keep is false when the socket is to end (its
// credentials no longer valid, already closed with the reason).
func (s *socket) deliver(ctx context.Context, events []backend.Event, frames [][]byte, retry *time.Timer) (_ [][]byte, keep bool) {
	// Authenticating once covers the credential check that every event
	// of a machine socket's own machine or jobs calls for (wants), the
	// events it did not register included.
	decide, err := s.v.Decider(ctx)
	if errors.Is(err, ErrCredentials) {
		s.closeWith(websocket.ClosePolicyViolation, "credentials no longer valid", "credentials")
		return frames, false
	}
	if err != nil {
		s.h.o.Logger.WarnContext(ctx, "event stream: authenticating for events", "principal", s.id.Principal,
			"events", len(events), "err", err.Error())
		retry.Reset(time.Second)
		return frames, true
	}
	for _, e := range events {
		if s.id.Machine != "" && !s.matches(e) {
			continue
		}
		allowed, err := decide(e)
		if err != nil {
			s.h.o.Logger.WarnContext(ctx, "event stream: authorizing an event", "principal", s.id.Principal,
				"type", e.Type, "err", err.Error())
			retry.Reset(time.Second)
			continue
		}
		if allowed {
			frames = append(frames, s.h.frame(e))
		}
	}
	return frames, true
}

// frame returns e encoded. Every subscriber of an event sends the same
// frame, so the frames encoded lately are kept and shared by the sockets
// sending those events, instead of each socket copying the event's Object
// into a frame of its own (a published event's Object is never modified).
// Sockets write the events of an interval together, each in turn, so more
// than the last event's frame is kept.
func (h *Hub) frame(e backend.Event) []byte {
	slot := &h.recent[frameSlot(e)]
	if last := slot.Load(); last != nil && sameEvent(last.e, e) {
		return last.frame
	}
	enc := &encoded{e: e, frame: encode(e)}
	slot.Store(enc)
	return enc.frame
}

// frameSlots is how many encoded frames a hub keeps.
const frameSlots = 128

// frameSlot picks e's slot in Hub.recent from its key and time (FNV-1a).
func frameSlot(e backend.Event) int {
	h := uint64(14695981039346656037)
	for i := 0; i < len(e.Key); i++ {
		h = (h ^ uint64(e.Key[i])) * 1099511628211
	}
	h = (h ^ uint64(e.Time.UnixNano())) * 1099511628211
	return int(h % frameSlots)
}

// sameEvent reports whether a and b are copies of one published event:
// the same fields and the same Object and Original (the same bytes, not
// only equal ones).
func sameEvent(a, b backend.Event) bool {
	return a.Time.Equal(b.Time) && a.Time.Location() == b.Time.Location() && a.Type == b.Type && a.Action == b.Action && a.Key == b.Key &&
		a.Principal == b.Principal && sameBytes(a.Object, b.Object) && sameBytes(a.Original, b.Original)
}

func sameBytes(a, b []byte) bool {
	if len(a) != len(b) {
		return false
	}
	return len(a) == 0 || &a[0] == &b[0]
}

func (s *socket) send(b []byte) bool {
	_ = s.c.SetWriteDeadline(time.Now().Add(s.h.o.WriteTimeout))
	if s.c.WriteMessage(websocket.TextMessage, b) != nil {
		s.h.dropped.Add("write_failed")
		return false
	}
	return true
}

// netConner is a websocket connection that gives access to the connection
// under it (fasthttp/websocket and gorilla/websocket do).
type netConner interface {
	NetConn() net.Conn
}

// sendAll sends frames as text messages, in order. When the connection
// under the websocket is at hand, the messages' frames are put together and
// written with one Write: each Write of a TLS connection is at least one
// record and one system call. A Write of a net.Conn is whole with respect
// to other Writes (crypto/tls and net serialize them), so the control
// frames the websocket library writes itself (pongs, from the reader) land
// between messages, never inside one.
func (s *socket) sendAll(frames [][]byte) bool {
	nc, _ := s.c.(netConner)
	var raw net.Conn
	if nc != nil {
		raw = nc.NetConn()
	}
	if raw == nil || len(frames) == 1 {
		// One message: the library's own write is as cheap.
		for _, f := range frames {
			if !s.send(f) {
				return false
			}
		}
		return true
	}
	n := 0
	for _, f := range frames {
		n += 10 + len(f)
	}
	buf := make([]byte, 0, n)
	for _, f := range frames {
		buf = appendTextFrame(buf, f)
	}
	if raw.SetWriteDeadline(time.Now().Add(s.h.o.WriteTimeout)) != nil {
		s.h.dropped.Add("write_failed")
		return false
	}
	if _, err := raw.Write(buf); err != nil {
		s.h.dropped.Add("write_failed")
		return false
	}
	return true
}

// appendTextFrame appends p as one final, unmasked text frame (RFC 6455
// §5.2: a server's frames are never masked).
func appendTextFrame(b, p []byte) []byte {
	b = append(b, 0x80|websocket.TextMessage)
	switch n := len(p); {
	case n <= 125:
		b = append(b, byte(n))
	case n <= 0xffff:
		b = append(b, 126)
		b = binary.BigEndian.AppendUint16(b, uint16(n))
	default:
		b = append(b, 127)
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	}
	return append(b, p...)
}

// closeWith sends a close frame with code and reason (at most 123 bytes)
// and counts the drop under why (Hub.Dropped).
func (s *socket) closeWith(code int, reason, why string) {
	s.h.dropped.Add(why)
	if len(reason) > 123 {
		reason = reason[:123]
	}
	_ = s.c.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, reason),
		time.Now().Add(time.Second))
}

// encode writes an event as DRP's models.Event JSON. Object and Original
// are copied as they are (the server encoded them; posted ones were
// decoded from JSON), so each subscriber does not re-encode them.
func encode(e backend.Event) []byte {
	b := make([]byte, 0, 128+len(e.Object)+len(e.Original))
	b = append(b, `{"Time":`...)
	t, _ := e.Time.MarshalJSON()
	if len(t) == 0 {
		t = []byte(`"0001-01-01T00:00:00Z"`)
	}
	b = append(b, t...)
	for _, f := range []struct{ k, v string }{{"Type", e.Type}, {"Action", e.Action}, {"Key", e.Key}, {"Principal", e.Principal}} {
		b = append(b, `,"`...)
		b = append(b, f.k...)
		b = append(b, `":`...)
		js, _ := json.Marshal(f.v) // a string always encodes
		b = append(b, js...)
	}
	b = appendRaw(b, "Object", e.Object)
	b = appendRaw(b, "Original", e.Original)
	return append(b, '}')
}

func appendRaw(b []byte, k string, v json.RawMessage) []byte {
	b = append(b, `,"`...)
	b = append(b, k...)
	b = append(b, `":`...)
	if len(v) == 0 {
		return append(b, "null"...)
	}
	return append(b, v...)
}
