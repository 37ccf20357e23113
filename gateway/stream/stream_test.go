package stream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/provgate/provgate/backend"
	"github.com/provgate/provgate/backend/eventbus"
)

func TestParseFilter(t *testing.T) {
	ev := backend.Event{Type: "reservations", Action: "update", Key: "10.0.0.1"}
	for _, c := range []struct {
		f     string
		ok    bool
		match bool
	}{
		{"*.*.*", true, true},
		{"reservations.update.10.0.0.1", true, true},
		{"reservations,machines.save,update.*", true, true},
		{`reservations.update.10\11`, true, false},
		{"machines.update.*", true, false},
		{"reservations.*", false, false},
		{"..x", false, false},
		{"", false, false},
	} {
		f, err := parseFilter(c.f)
		if (err == nil) != c.ok {
			t.Errorf("%q: error %v, want ok %v", c.f, err, c.ok)
			continue
		}
		if err == nil && f.match(ev) != c.match {
			t.Errorf("%q matches %v, want %v", c.f, f.match(ev), c.match)
		}
	}
	f, _ := parseFilter(`a\1b.c\2d.e\3`)
	if !f.match(backend.Event{Type: "a.b", Action: "c,d", Key: "e*"}) {
		t.Error("escapes \\1 \\2 \\3 are not '.', ',' and '*'")
	}
}

// TestEncode: frames are exactly what encoding/json makes of DRP's Event.
func TestEncode(t *testing.T) {
	e := backend.Event{Time: time.Date(2021, 6, 1, 12, 0, 0, 5, time.UTC), Type: "machines", Action: "update",
		Key: `k"<>&`, Principal: "user:b\u00e9", Object: json.RawMessage(`{"Name":"m1"}`)}
	var got, want map[string]any
	if err := json.Unmarshal(encode(e), &got); err != nil {
		t.Fatalf("%s: %v", encode(e), err)
	}
	b, _ := json.Marshal(e)
	_ = json.Unmarshal(b, &want)
	gb, _ := json.Marshal(got)
	wb, _ := json.Marshal(want)
	if string(gb) != string(wb) {
		t.Fatalf("encode gives %s, want %s", gb, wb)
	}
}

// fakeViewer allows events whose Key does not start with "hidden" and is
// not in denied (read when each event is decided), and fails credentials
// when dead is set. Decider waits for hold, when set, to be closed.
type fakeViewer struct {
	dead   atomic.Bool
	hold   chan struct{}
	denied sync.Map
}

func (v *fakeViewer) Check(context.Context) error {
	if v.dead.Load() {
		return ErrCredentials
	}
	return nil
}

func (v *fakeViewer) Decider(ctx context.Context) (Decide, error) {
	if err := v.Check(ctx); err != nil {
		return nil, err
	}
	if v.hold != nil {
		<-v.hold
	}
	return func(e backend.Event) (bool, error) {
		_, denied := v.denied.Load(e.Key)
		return !denied && !strings.HasPrefix(e.Key, "hidden"), nil
	}, nil
}

type testHub struct {
	h   *Hub
	bus *eventbus.Bus
	srv *httptest.Server
	v   *fakeViewer
	id  Identity
	mu  sync.Mutex
}

func newTestHub(t *testing.T, o Options) *testHub {
	th := &testHub{bus: eventbus.NewBus(backend.NewCatalog()), v: &fakeViewer{}, id: Identity{Principal: "user:bob"}}
	o.Bus = th.bus
	th.h = New(o)
	up := websocket.Upgrader{}
	th.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		th.mu.Lock()
		id := th.id
		th.mu.Unlock()
		release, err := th.h.Admit(id.Principal)
		if err != nil {
			http.Error(w, err.Error(), http.StatusTooManyRequests)
			return
		}
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			release()
			return
		}
		th.h.Serve(context.Background(), c, id, th.v, release)
	}))
	t.Cleanup(th.srv.Close)
	return th
}

func (th *testHub) dial(t *testing.T) *websocket.Conn {
	t.Helper()
	c, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(th.srv.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func readEvent(t *testing.T, c *websocket.Conn) backend.Event {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	var e backend.Event
	if err := c.ReadJSON(&e); err != nil {
		t.Fatal(err)
	}
	return e
}

func closeOf(t *testing.T, c *websocket.Conn) *websocket.CloseError {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		if _, _, err := c.ReadMessage(); err != nil {
			var ce *websocket.CloseError
			if !errors.As(err, &ce) {
				t.Fatalf("ended without a close frame: %v", err)
			}
			return ce
		}
	}
}

func TestHub(t *testing.T) {
	ctx := context.Background()
	t.Run("acknowledge, filter, authorize", func(t *testing.T) {
		th := newTestHub(t, Options{})
		c := th.dial(t)
		_ = c.WriteMessage(websocket.TextMessage, []byte("register machines.update.*"))
		if a := readEvent(t, c); a.Type != "websocket" || a.Action != "register" || a.Key != "machines.update.*" {
			t.Fatalf("ack %+v", a)
		}
		th.bus.Publish(ctx, backend.Event{Type: "machines", Action: "save", Key: "m0"})
		th.bus.Publish(ctx, backend.Event{Type: "machines", Action: "update", Key: "hidden1"})
		th.bus.Publish(ctx, backend.Event{Type: "machines", Action: "update", Key: "m1"})
		if e := readEvent(t, c); e.Key != "m1" {
			t.Fatalf("got %+v, want only the visible matching event", e)
		}
		for i := 0; th.h.Sent() != 1; i++ {
			if i == 100 {
				t.Fatalf("sent %d, want 1", th.h.Sent())
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
	t.Run("credentials end", func(t *testing.T) {
		th := newTestHub(t, Options{})
		c := th.dial(t)
		_ = c.WriteMessage(websocket.TextMessage, []byte("register *.*.*"))
		readEvent(t, c)
		th.v.dead.Store(true)
		th.h.Recheck()
		if ce := closeOf(t, c); ce.Code != websocket.ClosePolicyViolation || ce.Text != "credentials no longer valid" {
			t.Fatalf("close %v", ce)
		}
	})
	t.Run("credentials ended before the socket was served", func(t *testing.T) {
		// A Recheck between the caller's authentication and Serve finds no
		// socket to reach: the socket checks once when it is served.
		th := newTestHub(t, Options{})
		th.v.dead.Store(true)
		th.h.Recheck()
		c := th.dial(t)
		if ce := closeOf(t, c); ce.Code != websocket.ClosePolicyViolation || ce.Text != "credentials no longer valid" {
			t.Fatalf("close %v", ce)
		}
	})
	t.Run("expiry", func(t *testing.T) {
		th := newTestHub(t, Options{})
		th.id.Expires = time.Now().Add(200 * time.Millisecond)
		c := th.dial(t)
		if ce := closeOf(t, c); ce.Code != websocket.ClosePolicyViolation || ce.Text != "token expired" {
			t.Fatalf("close %v", ce)
		}
	})
	t.Run("machine sockets see only their machine", func(t *testing.T) {
		th := newTestHub(t, Options{})
		th.id = Identity{Principal: "runner:m1", Machine: "m1"}
		c := th.dial(t)
		_ = c.WriteMessage(websocket.TextMessage, []byte("register *.*.*"))
		readEvent(t, c)
		th.bus.Publish(ctx, backend.Event{Type: "machines", Action: "update", Key: "m2"})
		th.bus.Publish(ctx, backend.Event{Type: "profiles", Action: "update", Key: "p"})
		th.bus.Publish(ctx, backend.Event{Type: "jobs", Action: "update", Key: "j2", Object: json.RawMessage(`{"Machine":"m2"}`)})
		th.bus.Publish(ctx, backend.Event{Type: "jobs", Action: "update", Key: "j1", Object: json.RawMessage(`{"Machine":"m1"}`)})
		th.bus.Publish(ctx, backend.Event{Type: "machines", Action: "update", Key: "m1"})
		if e := readEvent(t, c); e.Key != "j1" {
			t.Fatalf("got %+v, want its own job's event first", e)
		}
		if e := readEvent(t, c); e.Key != "m1" {
			t.Fatalf("got %+v, want its machine's event", e)
		}
	})
	t.Run("slow consumer", func(t *testing.T) {
		th := newTestHub(t, Options{Buffer: 2})
		c := th.dial(t)
		_ = c.WriteMessage(websocket.TextMessage, []byte("register *.*.*"))
		readEvent(t, c)
		// The publisher outruns any writer: the buffer of two overflows.
		for i := 0; i < 1000; i++ {
			th.bus.Publish(ctx, backend.Event{Type: "machines", Action: "update", Key: "m"})
		}
		ce := closeOf(t, c)
		if ce.Code != websocket.ClosePolicyViolation || !strings.HasPrefix(ce.Text, "slow consumer: more than 2 events waiting") {
			t.Fatalf("close %v", ce)
		}
	})
	t.Run("limit per principal and shutdown", func(t *testing.T) {
		th := newTestHub(t, Options{MaxPerPrincipal: 2})
		a, b := th.dial(t), th.dial(t)
		_, res, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(th.srv.URL, "http"), nil)
		if err == nil || res.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("third socket: %v", err)
		}
		th.h.Close()
		for _, c := range []*websocket.Conn{a, b} {
			if ce := closeOf(t, c); ce.Code != websocket.CloseGoingAway {
				t.Fatalf("close %v", ce)
			}
		}
		if _, err := th.h.Admit("user:bob"); backend.ErrorCode(err) != backend.EUNAVAILABLE {
			t.Fatalf("admit after close: %v", err)
		}
	})
}

// blockingConn is a Conn whose reads block until it is closed; it records
// whether a read is in progress.
type blockingConn struct {
	closed  chan struct{}
	once    sync.Once
	reading atomic.Bool
}

func (c *blockingConn) ReadMessage() (int, []byte, error) {
	c.reading.Store(true)
	defer c.reading.Store(false)
	<-c.closed
	return 0, nil, errors.New("connection closed")
}
func (c *blockingConn) WriteMessage(int, []byte) error            { return nil }
func (c *blockingConn) WriteControl(int, []byte, time.Time) error { return nil }
func (c *blockingConn) SetReadDeadline(time.Time) error           { return nil }
func (c *blockingConn) SetWriteDeadline(time.Time) error          { return nil }
func (c *blockingConn) SetReadLimit(int64)                        {}
func (c *blockingConn) SetPongHandler(func(string) error)         {}
func (c *blockingConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return nil
}

// TestServeWaitsForItsReader: the HTTP server reuses a hijacked
// connection's buffers once its handler has returned, so Serve must not
// return while its reader is still reading the connection.
func TestServeWaitsForItsReader(t *testing.T) {
	h := New(Options{Bus: eventbus.NewBus(backend.NewCatalog())})
	c := &blockingConn{closed: make(chan struct{})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		id := Identity{Principal: "user:bob", Expires: time.Now().Add(200 * time.Millisecond)}
		h.Serve(context.Background(), c, id, &fakeViewer{}, func() {})
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not end when the token expired")
	}
	if c.reading.Load() {
		t.Fatal("Serve returned while its reader was still reading the connection")
	}
}

// TestFrameShared: the sockets sending one event share its frame; an event
// that differs in any field, or carries other Object bytes, gets its own.
func TestFrameShared(t *testing.T) {
	h := New(Options{})
	obj := json.RawMessage(`{"Uuid":"u1","Name":"m1"}`)
	e := backend.Event{Time: time.Unix(100, 0).UTC(), Type: "machines", Action: "update", Key: "u1", Object: obj}
	copyOf := e
	a, b := h.frame(e), h.frame(copyOf)
	if string(a) != string(encode(e)) || &a[0] != &b[0] {
		t.Fatalf("copies of one event: frames %s and %s, shared %v", a, b, &a[0] == &b[0])
	}
	other := e
	other.Object = json.RawMessage(`{"Uuid":"u1","Name":"m2"}`)
	moved := e
	moved.Time = e.Time.Add(time.Nanosecond)
	local := e
	local.Time = e.Time.In(time.FixedZone("X", 3600))
	for _, o := range []backend.Event{other, moved, local} {
		if got := h.frame(o); string(got) != string(encode(o)) {
			t.Fatalf("frame %s, want %s", got, encode(o))
		}
	}
	// Sockets writing several events each in turn still share their
	// frames: more than the last one is kept.
	next := backend.Event{Time: e.Time.Add(time.Second), Type: "machines", Action: "update", Key: "u2", Object: obj}
	if frameSlot(next) == frameSlot(e) {
		t.Fatal("pick another event: it shares the slot of the first")
	}
	a = h.frame(e)
	h.frame(next)
	if c := h.frame(e); &c[0] != &a[0] {
		t.Fatal("the frame of an event encoded before the last one was not shared")
	}
}

// TestBurst: events waiting for a socket are sent together, each its own
// message, in order, of every size, the hidden ones left out.
func TestBurst(t *testing.T) {
	th := newTestHub(t, Options{})
	th.v.hold = make(chan struct{})
	c := th.dial(t)
	_ = c.WriteMessage(websocket.TextMessage, []byte("register machines.update.*"))
	if a := readEvent(t, c); a.Action != "register" {
		t.Fatalf("acknowledgement %+v", a)
	}
	sizes := []int{0, 10, 125, 126, 1000, 65535, 65536, 200000}
	var want []string
	for i := 0; i < 150; i++ {
		key := fmt.Sprintf("m%03d", i)
		if i%7 == 3 {
			key = "hidden" + key
		} else {
			want = append(want, key)
		}
		obj := json.RawMessage(`{"Pad":"` + strings.Repeat("x", sizes[i%len(sizes)]) + `"}`)
		th.bus.Publish(context.Background(), backend.Event{Time: time.Now().UTC(), Type: "machines", Action: "update",
			Key: key, Object: obj})
	}
	// The socket decides the first event only now: every other one is
	// waiting for it.
	close(th.v.hold)
	for i, k := range want {
		e := readEvent(t, c)
		if e.Key != k {
			t.Fatalf("event %d: key %q, want %q", i, e.Key, k)
		}
		var n int
		_, _ = fmt.Sscanf(strings.TrimPrefix(k, "m"), "%d", &n)
		var o struct{ Pad string }
		if err := json.Unmarshal(e.Object, &o); err != nil || len(o.Pad) != sizes[n%len(sizes)] {
			t.Fatalf("event %d: object %.80s: %v", i, e.Object, err)
		}
	}
	if n := th.h.Sent(); n != int64(len(want)) {
		t.Fatalf("Sent %d, want %d", n, len(want))
	}
}

// TestFlushInterval: an event that finds its socket idle is sent at once;
// those published soon after wait for the hub's next tick, at least half
// an interval after the write, and go out together, in order, each decided
// when it is sent: a refusal that starts after an event was published and
// before it was sent holds for it.
func TestFlushInterval(t *testing.T) {
	const every = time.Second
	ctx := context.Background()
	th := newTestHub(t, Options{FlushInterval: every})
	c := th.dial(t)
	_ = c.WriteMessage(websocket.TextMessage, []byte("register machines.update.*"))
	readEvent(t, c)
	pub := func(key string) {
		th.bus.Publish(ctx, backend.Event{Time: time.Now().UTC(), Type: "machines", Action: "update", Key: key})
	}
	start := time.Now()
	pub("m0")
	if e := readEvent(t, c); e.Key != "m0" {
		t.Fatalf("got %+v, want m0", e)
	}
	pub("m1")
	pub("m2")
	pub("m3")
	th.v.denied.Store("m2", true)
	if e := readEvent(t, c); e.Key != "m1" {
		t.Fatalf("got %+v, want m1", e)
	}
	if d := time.Since(start); d < every/2 {
		t.Fatalf("the events after m0 came %s after it was published, want at least %s", d, every/2)
	}
	if e := readEvent(t, c); e.Key != "m3" {
		t.Fatalf("got %+v, want m3 (m2 refused when it was sent)", e)
	}
	for i := 0; th.h.Sent() != 3; i++ {
		if i == 100 {
			t.Fatalf("sent %d, want 3", th.h.Sent())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestOrderAcrossFlushes: every socket receives the events it may see in
// the order they were published, across many writes.
func TestOrderAcrossFlushes(t *testing.T) {
	ctx := context.Background()
	th := newTestHub(t, Options{FlushInterval: 5 * time.Millisecond})
	var conns []*websocket.Conn
	for i := 0; i < 5; i++ {
		c := th.dial(t)
		_ = c.WriteMessage(websocket.TextMessage, []byte("register machines.update.*"))
		readEvent(t, c)
		conns = append(conns, c)
	}
	var want []string
	for i := 0; i < 400; i++ {
		key := fmt.Sprintf("m%03d", i)
		if i%7 == 3 {
			key = "hidden" + key
		} else {
			want = append(want, key)
		}
		th.bus.Publish(ctx, backend.Event{Time: time.Now().UTC(), Type: "machines", Action: "update", Key: key})
		if i%20 == 19 {
			time.Sleep(time.Millisecond)
		}
	}
	for n, c := range conns {
		for i, k := range want {
			if e := readEvent(t, c); e.Key != k {
				t.Fatalf("socket %d, event %d: key %q, want %q", n, i, e.Key, k)
			}
		}
	}
}

// TestFlushKeepsUp: a socket whose events outnumber one write's (maxBatch)
// goes on writing at once instead of waiting for the next tick, so a
// sustained stream of more than maxBatch events per interval does not fill
// its buffer.
func TestFlushKeepsUp(t *testing.T) {
	ctx := context.Background()
	// The buffer holds 400 ms of events: a writer that takes every waiting
	// event at each tick keeps up even on a busy machine; one that takes
	// 64 per tick falls 176 behind at each and overflows it.
	th := newTestHub(t, Options{FlushInterval: 100 * time.Millisecond, Buffer: 1024})
	c := th.dial(t)
	_ = c.WriteMessage(websocket.TextMessage, []byte("register machines.update.*"))
	readEvent(t, c)
	const rounds, per = 48, 60 // 60 events every 25 ms: 240 per interval
	got := make(chan error, 1)
	go func() {
		for i := 0; i < rounds*per; i++ {
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
			var e backend.Event
			if err := c.ReadJSON(&e); err != nil {
				got <- fmt.Errorf("event %d: %w", i, err)
				return
			}
			if want := fmt.Sprintf("m%04d", i); e.Key != want {
				got <- fmt.Errorf("event %d: key %q, want %q", i, e.Key, want)
				return
			}
		}
		got <- nil
	}()
	for r := 0; r < rounds; r++ {
		for i := 0; i < per; i++ {
			th.bus.Publish(ctx, backend.Event{Time: time.Now().UTC(), Type: "machines", Action: "update",
				Key: fmt.Sprintf("m%04d", r*per+i)})
		}
		time.Sleep(25 * time.Millisecond)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
}
