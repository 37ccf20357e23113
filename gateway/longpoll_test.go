package gateway

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/provgate/provgate/backend"
)

// waitingObjects holds a long poll until changed is closed, then reports a
// change.
type waitingObjects struct {
	recObjects
	waiting chan struct{}
	changed chan struct{}
}

func (o waitingObjects) Wait(context.Context, string, string, string, time.Duration) (bool, error) {
	close(o.waiting)
	<-o.changed
	return true, nil
}

// TestLongPollReauthorized: a long poll that wakes after the caller lost
// access answers as for a missing object, not with the object.
func TestLongPollReauthorized(t *testing.T) {
	dec := &hiding{}
	obj := waitingObjects{recObjects{&recorder{}}, make(chan struct{}), make(chan struct{})}
	s := New(Options{Logger: slog.New(slog.DiscardHandler), Deps: Deps{Auth: dec, Policy: dec, Resolver: keyResolver{}, Objects: obj}})
	etag := backend.ModelETag(fakeModel("machines", "native-m1"), 1)
	go func() {
		<-obj.waiting
		dec.revoked = true
		close(obj.changed)
	}()
	ctx := serveWith(s, "GET", "/api/v3/machines/Name:m1", "If-None-Match", etag, "Prefer", "wait=10s")
	if ctx.Response.StatusCode() != 404 {
		t.Fatalf("long poll after losing access: %d %s", ctx.Response.StatusCode(), ctx.Response.Body())
	}
	if e := errorOf(t, ctx.Response.Body()); e.Key != "Name:m1" || e.Model != "machines" {
		t.Errorf("404 %+v", e)
	}
	if len(ctx.Response.Header.Peek("ETag")) != 0 {
		t.Errorf("404 carries the ETag %s", ctx.Response.Header.Peek("ETag"))
	}
}

// serveWith is serve with request headers (name, value pairs).
func serveWith(s *Server, method, uri string, hdrs ...string) *fastCtx {
	return serveHeaders(s, method, uri, nil, hdrs...)
}
