package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

// Leg names of figure 8.
const (
	legWriteSubs   = "write+100-subscribers"
	legWriteAlone  = "write-no-subscribers"
	legFanout      = "fanout"
	eventWriters   = 8
	eventMachines  = eventWriters
	eventSubsTotal = 100
)

// eventsResult is figure 8: the event stream on the SQLite server.
type eventsResult struct {
	Legs map[string][]legResult
	// Fanout per round: events delivered per second to all subscribers
	// together, and the writes that caused them.
	Delivered []float64
	// Latencies from a write's start to its event reaching a subscriber,
	// over every delivery of the single-writer legs with subscribers.
	LatencyP50, LatencyP99 time.Duration
	Deliveries             int
	setup
}

// subscriber is one event stream client (gorilla/websocket, as drpcli).
type subscriber struct {
	conn *websocket.Conn
	acks chan struct{}
}

// eventSink counts deliveries and keeps write-to-event latencies.
type eventSink struct {
	delivered atomic.Int64
	last      atomic.Int64 // unix nanos of the last delivery
	mu        sync.Mutex
	keep      bool
	lat       []time.Duration
}

func (s *eventSink) record(sent int64) {
	now := time.Now()
	s.delivered.Add(1)
	s.last.Store(now.UnixNano())
	if sent == 0 {
		return
	}
	s.mu.Lock()
	if s.keep {
		s.lat = append(s.lat, now.Sub(time.Unix(0, sent)))
	}
	s.mu.Unlock()
}

// runEvents measures figure 8 on its own SQLite server: 100 users, each
// with a non-superuser role and its own token, hold one event stream each
// registered for every machine update, so every write is authorized once
// per subscriber by the policies (each principal decides for itself).
func runEvents(ctx context.Context, cfg config, tmp, pub, lic string, logf func(string, ...any)) (*eventsResult, error) {
	adminPW := randomSecret()
	srv, err := startServer(ctx, "events", cfg.Server, tmp+"/events", "", adminPW, "--license-public-key", pub,
		"--license", lic)
	if err != nil {
		return nil, err
	}
	defer srv.Stop()
	logf("events server at %s (log %s)", srv.Base, srv.LogPath)
	a := api{base: srv.Base, c: newClient(eventWriters)}
	adminTok, err := a.as(basicAuth("rocketskates", adminPW)).token(ctx, "rocketskates", 2*time.Hour)
	if err != nil {
		return nil, err
	}
	admin := a.as(adminTok)
	if _, err := admin.do(ctx, "POST", "/api/v3/roles", map[string]any{"Name": "bench-watcher", "Claims": []map[string]string{
		{"scope": "machines", "action": "get,list", "specific": "*"}}}, 201, nil); err != nil {
		return nil, err
	}
	uuids, err := admin.createMachines(ctx, "bench-ev-", eventMachines, 4)
	if err != nil {
		return nil, err
	}

	sink := &eventSink{}
	dialer := websocket.Dialer{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // loopback server
		HandshakeTimeout: 10 * time.Second}
	wsURL := strings.Replace(srv.Base, "https://", "wss://", 1) + "/api/v3/ws"
	subs := make([]*subscriber, 0, eventSubsTotal)
	defer func() {
		for _, s := range subs {
			_ = s.conn.Close()
		}
	}()
	for i := 0; i < eventSubsTotal; i++ {
		name, pw := fmt.Sprintf("bench-watcher-%03d", i), randomSecret()
		if _, err := admin.do(ctx, "POST", "/api/v3/users", map[string]any{"Name": name, "Password": pw,
			"Roles": []string{"bench-watcher"}}, 201, nil); err != nil {
			return nil, err
		}
		tok, err := a.as(basicAuth(name, pw)).token(ctx, name, 2*time.Hour)
		if err != nil {
			return nil, err
		}
		conn, _, err := dialer.DialContext(ctx, wsURL, http.Header{"Authorization": {tok}})
		if err != nil {
			return nil, fmt.Errorf("event stream %d: %w", i, err)
		}
		s := &subscriber{conn: conn, acks: make(chan struct{}, 4)}
		subs = append(subs, s)
		go s.read(sink)
	}
	// toggle registers or deregisters every subscriber and waits for the
	// acknowledgements, so that a leg starts with the fan-out it measures.
	toggle := func(on bool) func(ctx context.Context) error {
		verb := "deregister"
		if on {
			verb = "register"
		}
		return func(ctx context.Context) error {
			for _, s := range subs {
				if err := s.conn.WriteMessage(websocket.TextMessage, []byte(verb+" machines.update.*")); err != nil {
					return err
				}
			}
			for _, s := range subs {
				select {
				case <-s.acks:
				case <-time.After(10 * time.Second):
					return fmt.Errorf("no acknowledgement of %s", verb)
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			// Deliveries of the previous leg drain before this one starts.
			settle(sink, 200*time.Millisecond, 10*time.Second)
			return nil
		}
	}
	write := func(ctx context.Context, worker, _ int) error {
		body := []byte(`[{"op":"replace","path":"/Description","value":"` + strconv.FormatInt(time.Now().UnixNano(), 10) + `"}]`)
		return send(ctx, a.c, request{Method: "PATCH", URL: srv.Base + "/api/v3/machines/" + uuids[worker%len(uuids)],
			Auth: adminTok, ContentType: "application/json", Body: body, Want: 200}, nil)
	}
	res := &eventsResult{Legs: map[string][]legResult{}}
	subsOn, subsOff := toggle(true), toggle(false)
	legs := []legSpec{
		{Name: legWriteSubs, Clients: 1, Op: write, Prepare: func(ctx context.Context) error {
			if err := subsOn(ctx); err != nil {
				return err
			}
			sink.mu.Lock()
			sink.keep = true
			sink.mu.Unlock()
			return nil
		}},
		{Name: legWriteAlone, Clients: 1, Op: write, Prepare: func(ctx context.Context) error {
			sink.mu.Lock()
			sink.keep = false
			sink.mu.Unlock()
			return subsOff(ctx)
		}},
	}
	fanout := legSpec{Name: legFanout, Clients: eventWriters, Op: write, Prepare: subsOn}
	logf("figure 8: %d subscribers, %d rounds", len(subs), cfg.Rounds)
	if res.Legs, err = interleave(ctx, legs, cfg.Rounds, cfg.Leg, cfg.Warmup, func(s string) { logf("  %s", s) }); err != nil {
		return nil, err
	}
	sink.mu.Lock()
	sink.keep = false
	lat := slices.Clone(sink.lat)
	sink.mu.Unlock()
	slices.Sort(lat)
	res.LatencyP50, res.LatencyP99, res.Deliveries = percentile(lat, 50), percentile(lat, 99), len(lat)

	// Fan-out: eight writers as fast as they go, every write reaching all
	// subscribers; the rate is what the subscribers received, counted
	// until the last delivery of the leg's writes.
	for round := 1; round <= cfg.Rounds; round++ {
		if err := fanout.Prepare(ctx); err != nil {
			return nil, err
		}
		before := sink.delivered.Load()
		start := time.Now()
		r, err := runLeg(ctx, legSpec{Name: fanout.Name, Clients: fanout.Clients, Op: fanout.Op}, cfg.Leg)
		if err != nil {
			return nil, err
		}
		r.Round = round
		settle(sink, 300*time.Millisecond, 30*time.Second)
		n := sink.delivered.Load() - before
		end := time.Unix(0, sink.last.Load())
		rate := float64(n) / end.Sub(start).Seconds()
		res.Delivered = append(res.Delivered, rate)
		res.Legs[legFanout] = append(res.Legs[legFanout], r)
		logf("  round %d fanout: %d writes, %d deliveries, %.0f events/s (%.1f per write)", round, r.OK, n, rate,
			float64(n)/float64(max(r.OK, 1)))
	}
	res.Notes = append(res.Notes, fmt.Sprintf("figure 8: %d users with the role machines get,list * and one event stream each (its own token), all registered for machines.update.*; writes are PATCHes of %d machines' Description by the admin", eventSubsTotal, eventMachines))
	return res, nil
}

// settle waits until no delivery happened for quiet (at most limit).
func settle(sink *eventSink, quiet, limit time.Duration) {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		last := time.Unix(0, sink.last.Load())
		if time.Since(last) >= quiet {
			return
		}
		time.Sleep(quiet / 4)
	}
}

// read counts the subscriber's events; a write's event carries the time it
// was sent in the machine's Description.
func (s *subscriber) read(sink *eventSink) {
	for {
		_, b, err := s.conn.ReadMessage()
		if err != nil {
			return
		}
		// Only what the measurement needs is read from the frame, so the
		// load generator spends as little of the shared CPUs as it can.
		if bytes.Contains(b, []byte(`"Type":"websocket"`)) {
			s.acks <- struct{}{}
			continue
		}
		var sent int64
		if _, rest, ok := bytes.Cut(b, []byte(`"Description":"`)); ok {
			if v, _, ok := bytes.Cut(rest, []byte(`"`)); ok {
				sent, _ = strconv.ParseInt(string(v), 10, 64)
			}
		}
		sink.record(sent)
	}
}

// eventFigures computes figure 8.
func eventFigures(r *eventsResult, skipped string) []figure {
	if r == nil {
		return skippedFigures(skipped, "8a", "8b", "8c", "8d")
	}
	fan := fromRounds("8a", r.Delivered, fmt.Sprintf("events received per second by %d subscribers together while %d clients PATCH machines as fast as they can; each event authorized for each subscriber (its own user and token) at send time", eventSubsTotal, eventWriters))
	p50 := spec("8b")
	p50.Value = ms(r.LatencyP50)
	p50.Note = fmt.Sprintf("from a PATCH's start to its event reaching a subscriber, over all %d deliveries of the single-writer legs with %d subscribers", r.Deliveries, eventSubsTotal)
	p99 := spec("8c")
	p99.Value, p99.Note = ms(r.LatencyP99), p50.Note
	ratios := make([]float64, 0, len(r.Legs[legWriteSubs]))
	for i, l := range r.Legs[legWriteSubs] {
		if i < len(r.Legs[legWriteAlone]) {
			ratios = append(ratios, ratio(ms(l.P50), ms(r.Legs[legWriteAlone][i].P50)))
		}
	}
	lat := fromRounds("8d", ratios, fmt.Sprintf("p50 latency of one client's back-to-back PATCHes while %d subscribers receive every event, vs the same with the streams open but registered for nothing", eventSubsTotal))
	return []figure{fan, p50, p99, lat}
}
