package callback

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/provgate/provgate/backend"
)

// ProviderName is the Provider of callback plugins.
const ProviderName = "callback"

// JobFailPayload is what a jobfail delivery remembers about the failure; the
// request body itself is the machine object (docs/design.md §12.9), and
// the job travels in X-Provgate-Job.
type JobFailPayload struct {
	Job       string `json:"Job"`
	Machine   string `json:"Machine"`
	Task      string `json:"Task"`
	Stage     string `json:"Stage"`
	State     string `json:"State"`
	ExitState string `json:"ExitState"`
}

// JobChanged queues jobfail deliveries for a job that just moved to failed
// (the edge: a job saved again while already failed queues nothing). The
// object service calls it inside the job update's transaction, so the
// delivery is stored atomically with the failure: a crash can lose neither
// one without the other. It is the only source of jobfail deliveries: the
// server's own job transitions; events on the bus, which clients can post,
// never queue one.
func (s *Service) JobChanged(ctx context.Context, old, job *backend.Job) error {
	if job.State != backend.JobFailed || (old != nil && old.State == backend.JobFailed) {
		return nil
	}
	return s.enqueueJobFail(ctx, job)
}

func (s *Service) enqueueJobFail(ctx context.Context, job *backend.Job) error {
	if s.opts.Store == nil || s.opts.Plugins == nil {
		return errors.New("jobfail: no delivery store or plugin list configured")
	}
	plugins, err := s.opts.Plugins.ListPlugins(ctx)
	if err != nil {
		return fmt.Errorf("jobfail: listing plugins: %w", err)
	}
	payload, err := json.Marshal(JobFailPayload{Job: job.Uuid, Machine: job.Machine, Task: job.Task,
		Stage: job.Stage, State: job.State, ExitState: job.ExitState})
	if err != nil {
		return fmt.Errorf("jobfail: encoding the payload of job %s: %w", job.Uuid, err)
	}
	now := s.opts.Now()
	var errs []error
	for _, p := range plugins {
		if p.Provider != ProviderName {
			continue
		}
		if st := s.state(p); st.cfg.Callbacks[JobFail] == nil {
			continue
		}
		_, err := s.opts.Store.EnqueueDelivery(ctx, backend.Delivery{
			Plugin: p.Name, Callback: JobFail, Machine: job.Machine, Job: job.Uuid, Payload: payload,
			State: backend.DeliveryPending, NextAt: now, CreatedAt: now, UpdatedAt: now,
		})
		if err != nil && !backend.IsCode(err, backend.ECONFLICT) {
			errs = append(errs, fmt.Errorf("jobfail: queueing for plugin %s: %w", p.Name, err))
		}
	}
	return errors.Join(errs...)
}

// RunWorker sends queued deliveries until ctx ends, polling every interval
// (and at once again while batches come back full).
func (s *Service) RunWorker(ctx context.Context, interval time.Duration) {
	// Attempt records still queued are written before the worker stops.
	defer s.FlushAttempts()
	if interval <= 0 {
		interval = 5 * time.Second
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		n, err := s.WorkOnce(ctx)
		if err != nil && ctx.Err() == nil {
			s.log.Warn("callback: claiming deliveries failed", "err", err)
		}
		if ctx.Err() != nil {
			return
		}
		s.rounds.Add(1)
		if n == s.opts.WorkerBatch {
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// WorkOnce claims one batch of due deliveries, sends them concurrently and
// finishes each; it returns how many it claimed.
func (s *Service) WorkOnce(ctx context.Context) (int, error) {
	// Deliveries are the server's own work, for no caller (docs/design.md §2.3).
	ctx = backend.WithSystem(ctx)
	if s.opts.Store == nil {
		return 0, errors.New("callback: no delivery store configured")
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	// The claim is not cut short by a stopping worker: a claim whose
	// context ends while its COMMIT is in flight may be written yet answer
	// an error (the PostgreSQL driver gives up on the answer), and its
	// leases would keep the deliveries from everyone, unsent, until they
	// run out. A claim that finishes is known, and a stopping worker hands
	// its deliveries back below (docs/design.md §12.9).
	claimCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), claimTimeout)
	ds, err := s.opts.Store.ClaimDeliveries(claimCtx, s.opts.WorkerBatch, s.opts.DeliveryLease)
	cancel()
	if err != nil {
		return 0, err
	}
	if ctx.Err() != nil {
		s.release(ctx, ds)
		return len(ds), nil
	}
	sends, stop := s.sendContext(ctx)
	defer stop()
	var wg sync.WaitGroup
	for _, d := range ds {
		wg.Go(func() { s.deliver(sends, d) })
	}
	wg.Wait()
	return len(ds), nil
}

// sendContext is the context of a batch's sends. A worker that stops
// claims nothing more, but the sends it has started go on for StopGrace:
// a send cut short has reached the receiver or not, so it is sent again
// after the restart, and the receiver may get it twice; a send let finish
// is done once (docs/design.md §12.9).
func (s *Service) sendContext(worker context.Context) (context.Context, context.CancelFunc) {
	if s.opts.StopGrace <= 0 {
		return context.WithCancel(worker)
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(worker))
	stopAfter := context.AfterFunc(worker, func() { time.AfterFunc(s.opts.StopGrace, cancel) })
	return ctx, func() {
		stopAfter()
		cancel()
	}
}

// claimTimeout bounds a claim, which a stopping worker does not cancel,
// and a stopping worker's release of what it claimed.
const claimTimeout = 30 * time.Second

// release hands deliveries claimed by a worker that stopped before sending
// them back: pending, due at once and no longer leased, for the restarted
// server or another replica. The claim's attempt stays counted, and the
// last error stays the last send's. A release that fails leaves the leases
// to run out, as after a crash.
func (s *Service) release(worker context.Context, ds []backend.Delivery) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(worker), claimTimeout)
	defer cancel()
	now := s.opts.Now()
	for _, d := range ds {
		if err := s.opts.Store.FinishDelivery(ctx, d.ID, backend.DeliveryPending, d.LastError, now); err != nil {
			s.log.Warn("callback: releasing a delivery failed", "delivery", d.ID, "err", err)
		}
	}
}

func (s *Service) deliver(worker context.Context, d backend.Delivery) {
	// Stay inside the lease, so that no other worker takes the delivery
	// over while this one is still sending it.
	ctx, cancel := context.WithTimeout(worker, s.opts.DeliveryLease*9/10)
	defer cancel()
	state, lastErr := s.sendDelivery(ctx, d)
	next := time.Time{}
	if state == backend.DeliveryPending {
		attempts := max(d.Attempts, 1)
		switch {
		case worker.Err() != nil:
			// Shutdown cut the attempt short, which says nothing about the
			// receiver: the delivery is due again at once, for the restarted
			// server or another replica, rather than after a backoff.
			next = s.opts.Now()
		case attempts >= s.opts.MaxDeliveryAttempts:
			state = backend.DeliveryFailed
		default:
			next = s.opts.Now().Add(redeliveryDelay(attempts))
		}
	}
	switch state {
	case backend.DeliveryPending:
		s.deliveryCounts.Add("retry")
	case backend.DeliveryFailed:
		s.deliveryCounts.Add("failed")
	default:
		s.deliveryCounts.Add(string(state))
	}
	if state == backend.DeliveryFailed {
		s.log.Warn("callback: delivery failed for good", "plugin", d.Plugin, "callback", d.Callback,
			"machine", d.Machine, "job", d.Job, "attempts", d.Attempts, "err", lastErr)
	}
	if err := s.opts.Store.FinishDelivery(context.WithoutCancel(ctx), d.ID, state, lastErr, next); err != nil {
		s.log.Warn("callback: finishing a delivery failed", "delivery", d.ID, "err", err)
	}
}

// sendDelivery returns the delivery's next state: done, pending (try again
// later) or failed (retrying cannot help).
func (s *Service) sendDelivery(ctx context.Context, d backend.Delivery) (backend.DeliveryState, string) {
	if s.opts.Plugins == nil || s.opts.Machines == nil {
		return backend.DeliveryPending, "callback service not fully configured"
	}
	plugins, err := s.opts.Plugins.ListPlugins(ctx)
	if err != nil {
		return backend.DeliveryPending, "listing plugins: " + err.Error()
	}
	var plugin *backend.Plugin
	for _, p := range plugins {
		if p.Name == d.Plugin && p.Provider == ProviderName {
			plugin = p
		}
	}
	if plugin == nil {
		return backend.DeliveryFailed, "plugin " + d.Plugin + " no longer exists"
	}
	st := s.state(plugin)
	cb := st.cfg.Callbacks[d.Callback]
	if cb == nil {
		return backend.DeliveryFailed, fmt.Sprintf("callback %q is no longer configured", d.Callback)
	}
	if errs := st.problemsOf(d.Callback, cb); len(errs) > 0 {
		// The operator may fix the configuration before the attempts run out.
		return backend.DeliveryPending, errs[0]
	}
	m, err := s.opts.Machines.GetMachine(ctx, d.Machine)
	if err != nil {
		if backend.IsCode(err, backend.ENOTFOUND) {
			return backend.DeliveryFailed, "machine " + d.Machine + " no longer exists"
		}
		return backend.DeliveryPending, "reading the machine: " + err.Error()
	}
	h := http.Header{}
	h.Set("X-Provgate-Event", JobFail)
	h.Set("X-Provgate-Delivery", strconv.FormatInt(d.ID, 10))
	if d.Job != "" {
		h.Set("X-Provgate-Job", d.Job)
	}
	_, err = s.run(ctx, st, d.Callback, cb, m, nil, false, backend.SourceJobFail, h)
	if err == nil {
		return backend.DeliveryDone, ""
	}
	switch backend.ErrorCode(err) {
	case backend.EBADREQUEST, backend.ECONFLICT:
		return backend.DeliveryFailed, err.Error()
	}
	return backend.DeliveryPending, err.Error()
}

// redeliveryDelay backs off 30 s, 1 min, 2 min ... up to an hour, with a
// little jitter so that deliveries failed together do not return together.
func redeliveryDelay(attempts int) time.Duration {
	d := 30 * time.Second
	for i := 1; i < attempts && d < time.Hour; i++ {
		d *= 2
	}
	d = min(d, time.Hour)
	return d + rand.N(d/10+1)
}
