package eventbus

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/provgate/provgate/backend"
)

// TestPostedEventsReachOnlyStreams: events clients post are notifications;
// the subscribers that drive server behaviour (Subscribe) never see them,
// streams to clients (SubscribeAll) see them marked.
func TestPostedEventsReachOnlyStreams(t *testing.T) {
	ctx := context.Background()
	bus := NewBus(backend.NewCatalog())
	server := bus.Subscribe(8, nil)
	defer server.Close()
	filtered := bus.Subscribe(8, func(e backend.Event) bool { return e.Type == "jobs" })
	defer filtered.Close()
	stream := bus.SubscribeAll(8, nil)
	defer stream.Close()

	posted := backend.Event{Type: "jobs", Action: "create", Key: "j1", Object: json.RawMessage(`{"State":"failed"}`)}
	bus.PublishPosted(ctx, posted)
	own := backend.Event{Type: "jobs", Action: "update", Key: "j2"}
	bus.Publish(ctx, own)

	for name, sub := range map[string]*Subscription{"Subscribe": server, "Subscribe with filter": filtered} {
		e := receive(t, sub)
		if e.Key != "j2" || e.Posted() {
			t.Errorf("%s got %+v (posted %v) first, want only the server's event", name, e, e.Posted())
		}
		select {
		case e := <-sub.C:
			t.Errorf("%s got a second event %+v", name, e)
		default:
		}
	}
	if e := receive(t, stream); e.Key != "j1" || !e.Posted() {
		t.Errorf("stream got %+v (posted %v), want the posted event marked", e, e.Posted())
	}
	if e := receive(t, stream); e.Key != "j2" || e.Posted() {
		t.Errorf("stream got %+v (posted %v), want the server's event unmarked", e, e.Posted())
	}

	// Relaying a posted event keeps its mark.
	bus.PublishPosted(ctx, backend.Event{Type: "machines", Key: "m1"})
	bus.Publish(ctx, receive(t, stream))
	if e := receive(t, stream); !e.Posted() {
		t.Error("a relayed posted event lost its mark")
	}
	select {
	case e := <-server.C:
		t.Errorf("Subscribe got the relayed posted event %+v", e)
	default:
	}
}

// TestPostedMarkNotOnTheWire: the mark is not serialized, so event streams
// show posted events exactly as they were posted.
func TestPostedMarkNotOnTheWire(t *testing.T) {
	bus := NewBus(backend.NewCatalog())
	stream := bus.SubscribeAll(1, nil)
	defer stream.Close()
	bus.PublishPosted(context.Background(), backend.Event{Type: "machines", Action: "update", Key: "m1"})
	e := receive(t, stream)
	got, _ := json.Marshal(e)
	want, _ := json.Marshal(backend.Event{Type: "machines", Action: "update", Key: "m1"})
	if string(got) != string(want) {
		t.Errorf("posted event encodes as %s, want %s", got, want)
	}
}

func receive(t *testing.T, s *Subscription) backend.Event {
	t.Helper()
	select {
	case e := <-s.C:
		return e
	case <-time.After(time.Second):
		t.Fatal("no event")
		return backend.Event{}
	}
}

// TestPostedStoreChangesRefused: a client may not post what looks like a
// change of a stored object (a stored kind with a store action, in any
// case): it is invalid and reaches no subscriber, on the bus or through
// the relay. Other posted events pass, a kind's Type written in its own
// case.
func TestPostedStoreChangesRefused(t *testing.T) {
	ctx := context.Background()
	bus := NewBus(backend.NewCatalog())
	stream := bus.SubscribeAll(16, nil)
	defer stream.Close()
	var sent []string
	relay := NewRelay(RelayOptions{Bus: bus, Send: func(_ context.Context, p string) error {
		sent = append(sent, p)
		return nil
	}})
	for _, e := range []backend.Event{
		{Type: "machines", Action: "update", Key: "m1", Object: json.RawMessage(`{"WorkflowComplete":true}`)},
		{Type: "machines", Action: "save", Key: "m1"},
		{Type: "Machines", Action: "UPDATE", Key: "m1"},
		{Type: " jobs", Action: "create ", Key: "j1"},
		{Type: "jobs", Action: "delete", Key: "j1"},
		{Type: "users", Action: "create", Key: "u1"},
	} {
		for name, post := range map[string]func(context.Context, backend.Event) error{"bus": bus.PostEvent, "relay": relay.PostEvent} {
			err := post(ctx, e)
			if backend.ErrorCode(err) != backend.EINVALID {
				t.Errorf("%s: posting %s %s: %v, want invalid", name, e.Type, e.Action, err)
			}
		}
	}
	select {
	case e := <-stream.C:
		t.Fatalf("a refused event reached a stream: %+v", e)
	default:
	}
	if len(sent) != 0 {
		t.Fatalf("a refused event was relayed: %v", sent)
	}

	for _, tc := range []struct{ in, want backend.Event }{
		{backend.Event{Type: "custom", Action: "update", Key: "k"}, backend.Event{Type: "custom", Action: "update", Key: "k"}},
		{backend.Event{Type: "machines", Action: "note", Key: "m1"}, backend.Event{Type: "machines", Action: "note", Key: "m1"}},
		{backend.Event{Type: "MACHINES", Action: "note", Key: "m1"}, backend.Event{Type: "machines", Action: "note", Key: "m1"}},
	} {
		if err := bus.PostEvent(ctx, tc.in); err != nil {
			t.Fatalf("posting %+v: %v", tc.in, err)
		}
		if e := receive(t, stream); e.Type != tc.want.Type || e.Action != tc.want.Action || !e.Posted() {
			t.Errorf("posted %+v arrived as %+v (posted %v), want %+v", tc.in, e, e.Posted(), tc.want)
		}
	}
	if _, err := backend.NewCatalog().CheckPosted(backend.Event{Type: "machines"}); backend.ErrorCode(err) != backend.EBADREQUEST {
		t.Errorf("an event without Action: %v", err)
	}
}
