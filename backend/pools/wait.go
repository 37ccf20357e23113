package pools

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/provgate/provgate/backend"
	"github.com/provgate/provgate/backend/eventbus"
)

// waiter follows the machines of one operation on the bus. It subscribes
// before the transaction and learns the machine keys inside it, so every
// update published after the commit reaches it.
type waiter struct {
	sub  *eventbus.Subscription
	keys atomic.Pointer[map[string]bool]
}

// waitBuffer bounds the events queued for one wait; events are only
// wake-ups (the machines are re-read), so an overflow loses nothing that the
// next wake-up or re-check does not recover.
const waitBuffer = 64

func (s *Service) newWaiter() *waiter {
	w := &waiter{}
	if s.bus != nil {
		w.sub = s.bus.Subscribe(waitBuffer, func(e backend.Event) bool {
			keys := w.keys.Load()
			return e.Type == "machines" && keys != nil && (*keys)[e.Key]
		})
	}
	return w
}

func (w *waiter) watch(changes []change) {
	keys := make(map[string]bool, len(changes))
	for _, c := range changes {
		keys[c.now.Uuid] = true
	}
	w.keys.Store(&keys)
}

func (w *waiter) close() {
	if w.sub != nil {
		w.sub.Close()
	}
}

// settled reports whether a machine is done with the workflow a pool
// operation gave it: in a stable status (Free, InUse), in a Hold* status
// (its workflow failed, nothing more will happen without an operator), or
// with its workflow complete.
func settled(m *backend.Machine) bool {
	switch m.PoolStatus {
	case backend.PoolFree, backend.PoolInUse,
		backend.PoolHoldJoin, backend.PoolHoldBuild, backend.PoolHoldDestroy, backend.PoolHoldLeave:
		return true
	}
	return m.WorkflowComplete
}

// wait blocks until every changed machine has settled, timeout passes, ctx
// ends or the wait is stopped (backend.WithWaitStop), and returns each
// machine's status at that moment. A timeout is not an error: the reply shows which machines are still transitional. Bus events
// only wake the wait; the machines are then re-read from the store, so event
// order and lost events do not matter. A slow periodic re-read catches
// changes made on other replicas.
func (s *Service) wait(ctx context.Context, w *waiter, changes []change, timeout time.Duration) []backend.PoolResult {
	cur := make(map[string]*backend.Machine, len(changes))
	for _, c := range changes {
		cur[c.now.Uuid] = c.now
	}
	pending := func() []string {
		var out []string
		for k, m := range cur {
			if !settled(m) {
				out = append(out, k)
			}
		}
		return out
	}
	results := func() []backend.PoolResult {
		out := make([]backend.PoolResult, 0, len(cur))
		for _, m := range cur {
			out = append(out, result(m))
		}
		return out
	}
	refresh := func(ctx context.Context, keys []string) {
		if len(keys) == 0 {
			return
		}
		// Visible, not a Uuid In filter: the keys travel as one bound
		// value however many machines the operation took.
		recs, _, _, err := s.st.List(ctx, "machines", backend.Query{Limit: -1, Slim: slimMachines, Visible: keys})
		if err != nil {
			s.log.WarnContext(ctx, "pool wait re-read", "err", err)
			return
		}
		for _, r := range recs {
			if m, err := decodeMachine(r.Data); err == nil {
				cur[m.Uuid] = m
			}
		}
	}

	timer := time.NewTimer(timeout)
	defer timer.Stop()
	tick := time.NewTicker(s.recheck)
	defer tick.Stop()
	var events <-chan backend.Event
	if w.sub != nil {
		events = w.sub.C
	}
	stop := backend.WaitStop(ctx)
	for {
		p := pending()
		if len(p) == 0 {
			return results()
		}
		select {
		case <-ctx.Done():
			return results()
		case <-stop:
			// The server drains: answer now, as a timeout would.
			refresh(ctx, p)
			return results()
		case <-timer.C:
			// The reply is each machine's status at the moment of return.
			refresh(ctx, p)
			return results()
		case _, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			// Coalesce a burst of completions into one read.
			for drained := false; !drained; {
				select {
				case _, ok := <-events:
					if !ok {
						events = nil
						drained = true
					}
				default:
					drained = true
				}
			}
			refresh(ctx, p)
		case <-tick.C:
			refresh(ctx, p)
		}
	}
}
