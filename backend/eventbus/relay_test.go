package eventbus

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/provgate/provgate/backend"
)

// relayNet connects relays the way PostgreSQL NOTIFY does: every payload
// sent reaches every relay, its sender included.
type relayNet struct {
	mu     sync.Mutex
	relays []*Relay
	sent   []string
}

func (n *relayNet) send(_ context.Context, p string) error {
	n.mu.Lock()
	n.sent = append(n.sent, p)
	rs := append([]*Relay(nil), n.relays...)
	n.mu.Unlock()
	for _, r := range rs {
		r.Receive(p)
	}
	return nil
}

// TestRelay: notices name objects; the receiving replica reads them back
// and publishes them on its own bus, sanitized; its own notices and
// revision notices are told apart; posted events stay posted.
func TestRelay(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stored := map[string]string{
		"machines/m1": `{"Uuid":"m1","Name":"one","Secret":"never-relayed"}`,
		"jobs/j1":     `{"Uuid":"j1","Machine":"m1","State":"running","Token":"never"}`,
	}
	read := func(_ context.Context, prefix, key string) ([]byte, error) {
		if s, ok := stored[prefix+"/"+key]; ok {
			return []byte(s), nil
		}
		return nil, backend.NotFound(backend.ReadOp, prefix, key)
	}
	net := &relayNet{}
	busA, busB := NewBus(backend.NewCatalog()), NewBus(backend.NewCatalog())
	revs := make(chan struct{}, 4)
	a := NewRelay(RelayOptions{Bus: busA, Send: net.send, Read: read})
	b := NewRelay(RelayOptions{Bus: busB, Send: net.send, Read: read, OnRevision: func(context.Context) { revs <- struct{}{} }})
	net.relays = []*Relay{a, b}
	go a.Run(ctx)
	go b.Run(ctx)
	onA := busA.SubscribeAll(16, nil)
	server := busB.Subscribe(16, nil)
	stream := busB.SubscribeAll(16, nil)

	now := time.Now().UTC()
	if err := a.Send(ctx, []backend.Event{
		{Time: now, Type: "machines", Action: "update", Key: "m1", Principal: "user:bob", Object: json.RawMessage(`{"stale":true}`)},
		{Time: now, Type: "jobs", Action: "delete", Key: "j9", Principal: "user:bob", Object: json.RawMessage(`{"Machine":"m7"}`)},
		{Time: now, Type: "jobs", Action: "update", Key: "j1"},
		{Time: now, Type: "machines", Action: "update", Key: "gone"},
	}); err != nil {
		t.Fatal(err)
	}
	if len(net.sent) != 1 || strings.Contains(net.sent[0], "stale") || strings.Contains(net.sent[0], "never") {
		t.Fatalf("payloads %q: want one batch naming the objects only", net.sent)
	}
	e := receive(t, server)
	if e.Type != "machines" || e.Key != "m1" || e.Principal != "user:bob" || !e.Time.Equal(now) {
		t.Fatalf("relayed %+v", e)
	}
	if strings.Contains(string(e.Object), "Secret") || !strings.Contains(string(e.Object), `"Name":"one"`) {
		t.Fatalf("relayed object %s: want the stored one, sanitized", e.Object)
	}
	if e := receive(t, server); e.Action != "delete" || e.Object != nil || e.Owner() != "m7" {
		t.Fatalf("relayed delete %+v (owner %q)", e, e.Owner())
	}
	if e := receive(t, server); e.Key != "j1" || strings.Contains(string(e.Object), "never") || e.Owner() != "m1" {
		t.Fatalf("relayed job %+v %s", e, e.Object)
	}
	if e := receive(t, stream); e.Key != "m1" {
		t.Fatalf("stream got %+v first", e)
	}
	// An object gone since is skipped (its delete's notice follows); the
	// sender publishes nothing again.
	select {
	case e := <-server.C:
		t.Fatalf("unexpected %+v", e)
	case e := <-onA.C:
		t.Fatalf("the sender relayed its own event to itself: %+v", e)
	case <-time.After(100 * time.Millisecond):
	}

	// Posted events travel whole and stay posted; too large ones lose
	// their objects.
	if err := a.SendPosted(ctx, backend.Event{Type: "note", Action: "hi", Key: "k", Object: json.RawMessage(`{"a":1}`)}); err != nil {
		t.Fatal(err)
	}
	big := json.RawMessage(`"` + strings.Repeat("x", 10000) + `"`)
	if err := a.SendPosted(ctx, backend.Event{Type: "note", Action: "big", Key: "k", Object: big}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`{"a":1}`, "null"} {
		e := receive(t, stream)
		for !e.Posted() && e.Type != "note" {
			e = receive(t, stream) // the relayed object events before them
		}
		if !e.Posted() || e.Type != "note" || string(e.Object) != want {
			t.Fatalf("posted event %+v (posted %v)", e, e.Posted())
		}
	}
	select {
	case e := <-server.C:
		t.Fatalf("a posted event reached a server subscriber: %+v", e)
	default:
	}

	b.Receive(backend.RevisionNotice)
	select {
	case <-revs:
	case <-time.After(time.Second):
		t.Fatal("a revision notice did not reload")
	}
}
