package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// op is one request of a load leg. worker and iter let an op vary what it
// sends (e.g. a different wrong password each time). It returns
// errExhausted when there is nothing left to do (a pool with no free
// machine): that worker stops and the leg ends when all have.
type op func(ctx context.Context, worker, iter int) error

var errExhausted = errors.New("exhausted")

// legSpec is one kind of leg of an interleaved comparison.
type legSpec struct {
	Name    string
	Clients int
	Op      op
	// Prepare runs before every run of the leg, untimed (e.g. refilling a
	// pool). May be nil.
	Prepare func(ctx context.Context) error
	// Background, when set, runs for the whole leg; its requests are not
	// counted in the leg's throughput (e.g. clients sending wrong passwords).
	Background *legSpec
}

// legResult is one timed run of a leg.
type legResult struct {
	Name       string
	Round      int
	Clients    int
	OK         int
	Errors     int
	FirstError string
	Elapsed    time.Duration
	P50, P99   time.Duration
	Background *legResult
}

// Throughput is completed requests per second.
func (r legResult) Throughput() float64 {
	if r.Elapsed <= 0 || r.OK == 0 {
		return 0
	}
	return float64(r.OK) / r.Elapsed.Seconds()
}

// runLeg runs spec with its clients for dur: every client sends requests
// back to back (closed loop) on its own keep-alive connection. Requests in
// flight at the deadline complete and count; Elapsed runs until the last
// one has. The leg fails (returns an error) only when the context is done.
func runLeg(ctx context.Context, spec legSpec, dur time.Duration) (legResult, error) {
	if spec.Prepare != nil {
		if err := spec.Prepare(ctx); err != nil {
			return legResult{}, fmt.Errorf("%s: prepare: %w", spec.Name, err)
		}
	}
	var bg *runner
	if spec.Background != nil {
		bg = startRunner(ctx, *spec.Background, time.Time{})
		// Let the background load reach its steady state before timing.
		time.Sleep(200 * time.Millisecond)
	}
	r := startRunner(ctx, spec, time.Now().Add(dur))
	res := r.wait()
	if bg != nil {
		bg.stop()
		b := bg.wait()
		res.Background = &b
	}
	if err := ctx.Err(); err != nil {
		return res, err
	}
	return res, nil
}

// runner is a set of closed-loop clients of one op.
type runner struct {
	spec     legSpec
	start    time.Time
	deadline time.Time // zero: until stop
	stopc    chan struct{}
	once     sync.Once
	wg       sync.WaitGroup
	mu       sync.Mutex
	lat      []time.Duration
	ok, errs int
	firstErr string
}

func startRunner(ctx context.Context, spec legSpec, deadline time.Time) *runner {
	r := &runner{spec: spec, start: time.Now(), deadline: deadline, stopc: make(chan struct{})}
	for w := 0; w < spec.Clients; w++ {
		r.wg.Add(1)
		go r.client(ctx, w)
	}
	return r
}

func (r *runner) done() bool {
	select {
	case <-r.stopc:
		return true
	default:
	}
	return !r.deadline.IsZero() && !time.Now().Before(r.deadline)
}

func (r *runner) client(ctx context.Context, w int) {
	defer r.wg.Done()
	lat := make([]time.Duration, 0, 4096)
	ok, errs, first := 0, 0, ""
	for i := 0; !r.done() && ctx.Err() == nil; i++ {
		t0 := time.Now()
		err := r.spec.Op(ctx, w, i)
		d := time.Since(t0)
		if errors.Is(err, errExhausted) {
			break
		}
		if err != nil {
			errs++
			if first == "" {
				first = err.Error()
			}
			continue
		}
		ok++
		lat = append(lat, d)
	}
	r.mu.Lock()
	r.lat = append(r.lat, lat...)
	r.ok += ok
	r.errs += errs
	if r.firstErr == "" {
		r.firstErr = first
	}
	r.mu.Unlock()
}

func (r *runner) stop() { r.once.Do(func() { close(r.stopc) }) }

func (r *runner) wait() legResult {
	r.wg.Wait()
	elapsed := time.Since(r.start)
	slices.Sort(r.lat)
	return legResult{
		Name: r.spec.Name, Clients: r.spec.Clients,
		OK: r.ok, Errors: r.errs, FirstError: r.firstErr, Elapsed: elapsed,
		P50: percentile(r.lat, 50), P99: percentile(r.lat, 99),
	}
}

// interleave runs the legs in turn, A B C A B C ..., for rounds rounds,
// after one untimed warm-up run of each (connections, TLS sessions, caches
// and the Go runtime of both processes settle before anything counts). It
// returns every timed run, by leg name, in round order.
func interleave(ctx context.Context, legs []legSpec, rounds int, dur, warmup time.Duration, progress func(string)) (map[string][]legResult, error) {
	if warmup > 0 {
		for _, l := range legs {
			if _, err := runLeg(ctx, l, warmup); err != nil {
				return nil, fmt.Errorf("warm-up %s: %w", l.Name, err)
			}
		}
	}
	out := map[string][]legResult{}
	for round := 1; round <= rounds; round++ {
		for _, l := range legs {
			res, err := runLeg(ctx, l, dur)
			if err != nil {
				return nil, fmt.Errorf("%s round %d: %w", l.Name, round, err)
			}
			res.Round = round
			out[l.Name] = append(out[l.Name], res)
			progress(fmt.Sprintf("round %d %-22s %8.0f req/s  p50 %6.2f ms  p99 %6.2f ms  errors %d",
				round, l.Name, res.Throughput(), ms(res.P50), ms(res.P99), res.Errors))
		}
	}
	return out, nil
}

// throughputRatios returns, per round, throughput(a)/throughput(b): the
// legs of one round ran back to back, so they saw the same machine load.
func throughputRatios(a, b []legResult) []float64 {
	out := make([]float64, 0, len(a))
	for i := range a {
		if i >= len(b) {
			break
		}
		out = append(out, ratio(a[i].Throughput(), b[i].Throughput()))
	}
	return out
}

// costRatios returns, per round, the time per request of a divided by that
// of b at the same concurrency, i.e. throughput(b)/throughput(a): how much
// more a request of a costs than one of b.
func costRatios(a, b []legResult) []float64 { return throughputRatios(b, a) }

// medianDuration is the median over rounds of f(leg).
func medianDuration(legs []legResult, f func(legResult) time.Duration) float64 {
	xs := make([]float64, 0, len(legs))
	for _, l := range legs {
		xs = append(xs, ms(f(l)))
	}
	return median(xs)
}

// legErrors sums the failed requests of legs and returns the first message.
func legErrors(legs []legResult) (int, string) {
	n, first := 0, ""
	for _, l := range legs {
		n += l.Errors
		if first == "" {
			first = l.FirstError
		}
	}
	return n, first
}
