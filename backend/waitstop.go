package backend

import "context"

// waitStopKey carries the channel that ends waits early (WithWaitStop).
var waitStopKey = ctxKey[<-chan struct{}]{"wait stop"}

// WithWaitStop returns ctx carrying stop: once stop is closed, the waits of
// requests made with ctx (long polls, pool waits) end at once, as if their
// timeout had passed, while the request itself goes on to answer. The
// server closes it when it starts draining (docs/design.md §15.7).
func WithWaitStop(ctx context.Context, stop <-chan struct{}) context.Context {
	return waitStopKey.with(ctx, stop)
}

// WaitStop is the channel WithWaitStop put in ctx; nil (never ready in a
// select) when there is none.
func WaitStop(ctx context.Context) <-chan struct{} {
	return waitStopKey.from(ctx)
}
