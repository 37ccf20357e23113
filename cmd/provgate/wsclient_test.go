package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// wsEvent is one frame of the event stream, as DRP's models.Event.
type wsEvent struct {
	Time      time.Time
	Type      string
	Action    string
	Key       string
	Principal string
	Object    json.RawMessage
	Original  json.RawMessage
}

// obj decodes the event's Object.
func (e wsEvent) obj(t testing.TB) map[string]any {
	t.Helper()
	m := map[string]any{}
	if err := json.Unmarshal(e.Object, &m); err != nil {
		t.Fatalf("event object %s: %v", e.Object, err)
	}
	return m
}

// wsClient plays a DRP client on /api/v3/ws with gorilla/websocket, the
// library drpcli uses. A goroutine reads every frame; tests take them with
// next and none, and see how the server closed the socket with closed.
type wsClient struct {
	t      testing.TB
	conn   *websocket.Conn
	frames chan wsEvent
	mu     sync.Mutex
	kept   []wsEvent // frames read while looking for others
	end    chan struct{}
	endErr error
	raw    [][]byte
}

type wsDialOpt struct {
	query string // appended to the URL
	// paused starts the reader only on startReading, and gives the
	// connection a small receive buffer, so the server's writes back up
	// after little data.
	paused bool
}

// dialWS opens an event stream with the given Authorization ("" for none).
func (s *tserver) dialWS(t testing.TB, authz string, opts ...wsDialOpt) (*wsClient, *http.Response, error) {
	t.Helper()
	var o wsDialOpt
	if len(opts) > 0 {
		o = opts[0]
	}
	d := websocket.Dialer{
		TLSClientConfig:  &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // self-signed test server
		HandshakeTimeout: 10 * time.Second,
	}
	if o.paused {
		d.NetDialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err == nil {
				_ = c.(*net.TCPConn).SetReadBuffer(64 << 10)
			}
			return c, err
		}
	}
	h := http.Header{}
	if authz != "" {
		h.Set("Authorization", authz)
	}
	u := strings.Replace(s.Base, "https://", "wss://", 1) + "/ws" + o.query
	conn, res, err := d.Dial(u, h)
	if err != nil {
		return nil, res, err
	}
	c := &wsClient{t: t, conn: conn, frames: make(chan wsEvent, 100000), end: make(chan struct{})}
	t.Cleanup(func() { _ = conn.Close() })
	if !o.paused {
		go c.read()
	}
	return c, res, nil
}

// mustWS opens an event stream or fails the test.
func (s *tserver) mustWS(t testing.TB, authz string, opts ...wsDialOpt) *wsClient {
	t.Helper()
	c, res, err := s.dialWS(t, authz, opts...)
	if err != nil {
		status := 0
		if res != nil {
			status = res.StatusCode
		}
		t.Fatalf("event stream: %v (status %d)", err, status)
	}
	return c
}

func (c *wsClient) read() {
	defer close(c.end)
	for {
		_, b, err := c.conn.ReadMessage()
		if err != nil {
			c.endErr = err
			return
		}
		var e wsEvent
		if err := json.Unmarshal(b, &e); err != nil {
			c.endErr = errors.New("undecodable frame: " + string(b))
			return
		}
		c.mu.Lock()
		c.raw = append(c.raw, b)
		c.mu.Unlock()
		c.frames <- e
	}
}

// startReading starts the reader of a paused client.
func (c *wsClient) startReading() { go c.read() }

func (c *wsClient) send(text string) {
	c.t.Helper()
	if err := c.conn.WriteMessage(websocket.TextMessage, []byte(text)); err != nil {
		c.t.Fatalf("send %q: %v", text, err)
	}
}

// next returns the first frame (kept or new) that pred accepts, within d.
func (c *wsClient) next(d time.Duration, what string, pred func(wsEvent) bool) wsEvent {
	c.t.Helper()
	if e, ok := c.take(d, pred); ok {
		return e
	}
	c.t.Fatalf("no %s within %s (stream ended: %v)", what, d, c.endErr)
	return wsEvent{}
}

func (c *wsClient) take(d time.Duration, pred func(wsEvent) bool) (wsEvent, bool) {
	c.mu.Lock()
	for i, e := range c.kept {
		if pred(e) {
			c.kept = append(c.kept[:i:i], c.kept[i+1:]...)
			c.mu.Unlock()
			return e, true
		}
	}
	c.mu.Unlock()
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case e := <-c.frames:
			if pred(e) {
				return e, true
			}
			c.mu.Lock()
			c.kept = append(c.kept, e)
			c.mu.Unlock()
		case <-c.end:
			// Frames read before the end are still in the channel.
			for {
				select {
				case e := <-c.frames:
					if pred(e) {
						return e, true
					}
					c.mu.Lock()
					c.kept = append(c.kept, e)
					c.mu.Unlock()
				default:
					return wsEvent{}, false
				}
			}
		case <-timer.C:
			return wsEvent{}, false
		}
	}
}

// none fails if a frame pred accepts arrives within d.
func (c *wsClient) none(d time.Duration, what string, pred func(wsEvent) bool) {
	c.t.Helper()
	if e, ok := c.take(d, pred); ok {
		c.t.Fatalf("got %s: %s %s %s by %s %s", what, e.Type, e.Action, e.Key, e.Principal, e.Object)
	}
}

// register sends "register f" and waits for its acknowledgement.
func (c *wsClient) register(f string) wsEvent {
	c.t.Helper()
	c.send("register " + f)
	return c.next(10*time.Second, "acknowledgement of register "+f, func(e wsEvent) bool {
		return e.Type == "websocket" && e.Key == f && e.Action == "register"
	})
}

// closed waits for the server to close the socket and returns the close
// code and reason.
func (c *wsClient) closed(d time.Duration) (int, string) {
	c.t.Helper()
	select {
	case <-c.end:
	case <-time.After(d):
		c.t.Fatalf("the stream is still open after %s", d)
	}
	var ce *websocket.CloseError
	if errors.As(c.endErr, &ce) {
		return ce.Code, ce.Text
	}
	c.t.Fatalf("the stream ended without a close frame: %v", c.endErr)
	return 0, ""
}

// is matches events by type, action and key ("" matches any).
func is(typ, action, key string) func(wsEvent) bool {
	return func(e wsEvent) bool {
		return (typ == "" || e.Type == typ) && (action == "" || e.Action == action) && (key == "" || e.Key == key)
	}
}
