package callback

import (
	"context"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/provgate/provgate/backend"
	"github.com/provgate/provgate/backend/render"
)

const securePlain = "s3cr3t-param-value"

// fakeMachines serves one machine whose hierarchy has a profile param and a
// secure param that is only in the clear when decoded.
type fakeMachines struct {
	machines map[string]*backend.Machine
}

func (f *fakeMachines) GetMachine(_ context.Context, uuid string) (*backend.Machine, error) {
	m, ok := f.machines[uuid]
	if !ok {
		return nil, backend.NotFound(backend.ReadOp, "machines", uuid)
	}
	cp := *m
	return &cp, nil
}

func (f *fakeMachines) MachineParams(_ context.Context, m *backend.Machine, aggregate, decode bool) (map[string]any, error) {
	out := maps.Clone(m.Params)
	if aggregate {
		out["profile/param"] = "from-profile"
	}
	if decode {
		out["secure/param"] = securePlain
	} else {
		out["secure/param"] = map[string]any{"Key": "k", "Nonce": "n", "Payload": "encrypted"}
	}
	return out, nil
}

type fakePlugins struct{ list []*backend.Plugin }

func (f *fakePlugins) ListPlugins(context.Context) ([]*backend.Plugin, error) { return f.list, nil }

// fakeStore is an in-memory delivery queue and attempt log.
type fakeStore struct {
	mu         sync.Mutex
	now        func() time.Time
	deliveries []*backend.Delivery
	attempts   []backend.CallbackAttempt
	listCalls  int
}

func (f *fakeStore) EnqueueDelivery(_ context.Context, d backend.Delivery) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, x := range f.deliveries {
		if x.Plugin == d.Plugin && x.Callback == d.Callback && x.Job == d.Job {
			return 0, backend.Errorf(backend.ECONFLICT, "delivery exists")
		}
	}
	d.ID = int64(len(f.deliveries) + 1)
	f.deliveries = append(f.deliveries, &d)
	return d.ID, nil
}

func (f *fakeStore) ClaimDeliveries(_ context.Context, n int, lease time.Duration) ([]backend.Delivery, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	var out []backend.Delivery
	for _, d := range f.deliveries {
		if len(out) == n {
			break
		}
		if d.State == backend.DeliveryPending && !d.NextAt.After(now) && !d.LeaseUntil.After(now) {
			d.Attempts++
			d.LeaseUntil = now.Add(lease)
			out = append(out, *d)
		}
	}
	return out, nil
}

// stopOnClaim stops the worker while its claim commits: the claim is
// written, and the answer is the context's end when the context given has
// ended, as the PostgreSQL driver answers when the context ends with the
// COMMIT in flight.
type stopOnClaim struct {
	*fakeStore
	stop func()
}

func (s *stopOnClaim) ClaimDeliveries(ctx context.Context, n int, lease time.Duration) ([]backend.Delivery, error) {
	s.stop()
	ds, err := s.fakeStore.ClaimDeliveries(ctx, n, lease)
	if err == nil && ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return ds, err
}

func (f *fakeStore) FinishDelivery(_ context.Context, id int64, state backend.DeliveryState, lastErr string, nextAt time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, d := range f.deliveries {
		if d.ID == id {
			d.State, d.LastError, d.NextAt, d.LeaseUntil = state, lastErr, nextAt, time.Time{}
		}
	}
	return nil
}

func (f *fakeStore) RecordAttempts(_ context.Context, as []backend.CallbackAttempt) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.attempts = append(f.attempts, as...)
	return nil
}

// ListAttempts pages through the recorded attempts newest first; ID is
// the position of the attempt in the log, so At ties keep their order.
func (f *fakeStore) ListAttempts(_ context.Context, q backend.AttemptQuery) ([]backend.CallbackAttempt, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.listCalls++
	var out []backend.CallbackAttempt
	for i := len(f.attempts) - 1; i >= 0; i-- {
		a := f.attempts[i]
		a.ID = int64(i + 1)
		if (q.Plugin != "" && a.Plugin != q.Plugin) || (q.Machine != "" && a.Machine != q.Machine) {
			continue
		}
		if q.AfterID != 0 && (a.At.After(q.AfterAt) || (a.At.Equal(q.AfterAt) && a.ID >= q.AfterID)) {
			continue
		}
		out = append(out, a)
		if q.Limit > 0 && len(out) == q.Limit {
			break
		}
	}
	return out, nil
}

func (f *fakeStore) Attempts() []backend.CallbackAttempt {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]backend.CallbackAttempt(nil), f.attempts...)
}

// recorded is one request a receiver saw.
type recorded struct {
	Method string
	Path   string
	Query  string
	Header http.Header
	Body   []byte
}

// receiver is an httptest server that records requests and answers with
// respond (default 200 "ok").
type receiver struct {
	*httptest.Server
	mu      sync.Mutex
	reqs    []recorded
	respond func(w http.ResponseWriter, r *http.Request, n int)
}

func newReceiver(t *testing.T, respond func(w http.ResponseWriter, r *http.Request, n int)) *receiver {
	rc := &receiver{respond: respond}
	rc.Server = httptest.NewServer(http.HandlerFunc(rc.handle))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *receiver) handle(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	rc.reqs = append(rc.reqs, recorded{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Clone(), b})
	n := len(rc.reqs)
	rc.mu.Unlock()
	if rc.respond == nil {
		_, _ = io.WriteString(w, "ok")
		return
	}
	rc.respond(w, r, n)
}

func (rc *receiver) requests() []recorded {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]recorded(nil), rc.reqs...)
}

func testMachine() *backend.Machine {
	return &backend.Machine{
		Name: "node1.example.com", Uuid: "3f1b9a3e-0000-4000-8000-000000000001", Address: "192.168.1.10",
		Secret: "machine-secret-value", HardwareAddrs: []string{"aa:bb:cc:dd:ee:ff"},
		Params: map[string]any{"own/param": "own", "big/param": "xxxxxxxx"},
	}
}

type env struct {
	svc      *Service
	store    *fakeStore
	machines *fakeMachines
	plugins  *fakePlugins
}

func newEnv(t *testing.T, mutate func(*Options)) *env {
	t.Helper()
	m := testMachine()
	e := &env{
		store:    &fakeStore{now: time.Now},
		machines: &fakeMachines{machines: map[string]*backend.Machine{m.Uuid: m}},
		plugins:  &fakePlugins{},
	}
	opts := Options{
		Store: e.store, Machines: e.machines, Plugins: e.plugins,
		Info: func() render.Info { return render.Info{Address: "10.0.0.1", ApiPort: 8092, FilePort: 8091} },
	}
	// The receivers are httptest servers on the loopback address.
	opts.Destinations = Destinations{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}
	if mutate != nil {
		mutate(&opts)
	}
	e.svc = New(opts)
	return e
}

func plugin(callbacks, auths map[string]any) *backend.Plugin {
	p := &backend.Plugin{Name: "cb", Provider: ProviderName, Params: map[string]any{ParamCallbacks: callbacks}}
	if auths != nil {
		p.Params[ParamAuths] = auths
	}
	return p
}

// attempts is what the service recorded, once its queued records are written.
func (e *env) attempts() []backend.CallbackAttempt {
	e.svc.FlushAttempts()
	return e.store.Attempts()
}
