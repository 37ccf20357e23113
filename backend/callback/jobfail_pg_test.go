package callback

import (
	"bytes"
	"context"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/provgate/provgate/backend"
	"github.com/provgate/provgate/backend/store"
	"github.com/provgate/provgate/backend/store/storetest"
)

// TestJobFailStopDuringClaimCommit: on PostgreSQL, a worker stopped while
// its claim's COMMIT is done on the server but not yet answered leaves the
// delivery due at once for the restarted server, not leased to nobody until
// the lease runs out (docs/design.md §12.9). A proxy between the store and
// PostgreSQL holds the COMMIT's answer back until the worker is stopped.
func TestJobFailStopDuringClaimCommit(t *testing.T) {
	dsn := storetest.PostgresDSN(t)
	if dsn == "" {
		t.Skip("no PostgreSQL test database")
	}
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy := newCommitHold(t, u.Host)
	u.Host = proxy.addr()
	ctx := context.Background()
	st, err := store.Open(ctx, u.String(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })

	rc := newReceiver(t, nil)
	e := newEnv(t, func(o *Options) { o.Store = st })
	e.plugins.list = []*backend.Plugin{plugin(map[string]any{JobFail: map[string]any{"Url": rc.URL}}, nil)}
	if err := e.svc.JobChanged(backend.WithSystem(ctx), testJob(backend.JobRunning), testJob(backend.JobFailed)); err != nil {
		t.Fatal(err)
	}

	worker, stop := context.WithCancel(ctx)
	defer stop()
	proxy.arm()
	worked := make(chan struct{})
	go func() {
		defer proxy.release()
		select {
		case <-proxy.answered:
		case <-time.After(30 * time.Second):
			t.Error("no COMMIT came through the proxy")
		}
		// The claim is done on the server; its answer waits in the proxy.
		stop()
		// A worker that gives up on the answer returns; one that waits
		// gets it after a while.
		select {
		case <-worked:
		case <-time.After(time.Second):
		}
	}()
	_, err = e.svc.WorkOnce(worker)
	close(worked)
	if err != nil && worker.Err() == nil {
		t.Fatal(err)
	}
	if n := len(rc.requests()); n != 0 {
		t.Fatalf("the stopped worker sent %d requests", n)
	}
	ds, err := st.ListDeliveries(ctx, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 1 {
		t.Fatalf("%d deliveries, want 1", len(ds))
	}
	if d := ds[0]; d.State != backend.DeliveryPending || d.Attempts != 1 || !d.LeaseUntil.IsZero() || d.NextAt.After(time.Now()) {
		t.Fatalf("after the stopped worker's claim: state %s, %d attempts, leased until %s, due %s; want pending, 1, no lease, due now",
			d.State, d.Attempts, d.LeaseUntil, d.NextAt)
	}
	// The restarted server's worker sends it at once.
	if n, err := e.svc.WorkOnce(ctx); n != 1 || err != nil {
		t.Fatalf("the next claim took %d deliveries (%v), want 1", n, err)
	}
	if n := len(rc.requests()); n != 1 {
		t.Fatalf("%d requests, want 1", n)
	}
}

// commitHold is a TCP proxy to PostgreSQL that, once armed, holds back the
// server's answer to the next COMMIT a client sends until release: the
// transaction is committed while its client still waits for the answer.
type commitHold struct {
	ln       net.Listener
	target   string
	armed    atomic.Bool
	answered chan struct{} // closed when the held answer has arrived
	released chan struct{}
	once     sync.Once
}

func newCommitHold(t *testing.T, target string) *commitHold {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &commitHold{ln: ln, target: target, answered: make(chan struct{}), released: make(chan struct{})}
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		p.release()
		_ = ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				_ = c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, s)
			mu.Unlock()
			go p.pipe(c, s)
		}
	}()
	return p
}

func (p *commitHold) addr() string { return p.ln.Addr().String() }

// arm makes the next COMMIT's answer wait for release.
func (p *commitHold) arm() { p.armed.Store(true) }

func (p *commitHold) release() { p.once.Do(func() { close(p.released) }) }

// pipe copies client c to server s and back; the answer after a COMMIT
// sent while armed waits for release.
func (p *commitHold) pipe(c, s net.Conn) {
	var held atomic.Bool
	go func() {
		buf := make([]byte, 64<<10)
		for {
			n, err := c.Read(buf)
			if n > 0 {
				// pgx sends COMMIT as the simple query "commit".
				if bytes.Contains(buf[:n], []byte("commit")) && p.armed.CompareAndSwap(true, false) {
					held.Store(true)
				}
				if _, werr := s.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				_ = s.Close()
				return
			}
		}
	}()
	buf := make([]byte, 64<<10)
	for {
		n, err := s.Read(buf)
		if n > 0 {
			if held.CompareAndSwap(true, false) {
				close(p.answered)
				<-p.released
			}
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			_ = c.Close()
			return
		}
	}
}
