package pools

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/provgate/provgate/backend"
	"github.com/provgate/provgate/backend/eventbus"
	"github.com/provgate/provgate/backend/store/storetest"
)

// TestConcurrentAllocate: 32 callers allocating 1 to 3 machines at a time
// from 1,000 never share a machine, and each gets exactly what it asked for.
func TestConcurrentAllocate(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	each(t, func(t *testing.T, f *fixture) {
		const machines, callers = 1000, 32
		rounds := 8
		if f.st.Dialect() == "sqlite" {
			// SQLite serializes the transactions anyway, and the pure-Go
			// driver is slow under -race: fewer rounds prove the same.
			rounds = 2
		}
		f.machines(1, machines, "big", nil)

		var mu sync.Mutex
		owner := map[string]int{}
		var dups, wrong, failed atomic.Int64
		var wg sync.WaitGroup
		for g := 0; g < callers; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < rounds; i++ {
					count := (g+i)%3 + 1
					res, err := f.svc.Allocate(f.ctx, "big", body(map[string]any{"pool/count": count}), backend.PoolOptions{})
					if err != nil {
						failed.Add(1)
						t.Errorf("caller %d: %v", g, err)
						return
					}
					if len(res) != count {
						wrong.Add(1)
					}
					mu.Lock()
					for _, r := range res {
						if _, taken := owner[r.Uuid]; taken {
							dups.Add(1)
						}
						owner[r.Uuid] = g
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if dups.Load() != 0 || wrong.Load() != 0 || failed.Load() != 0 {
			t.Fatalf("duplicates %d, wrong counts %d, failures %d", dups.Load(), wrong.Load(), failed.Load())
		}
		st, err := f.svc.Status(f.ctx, "big", nil)
		if err != nil {
			t.Fatal(err)
		}
		inUse := st[backend.PoolInUse]
		if len(inUse) != len(owner) || len(st[backend.PoolFree])+len(inUse) != machines {
			t.Fatalf("store has %d InUse and %d Free; callers got %d", len(inUse), len(st[backend.PoolFree]), len(owner))
		}
		for _, r := range inUse {
			if _, ok := owner[r.Uuid]; !ok || !r.Allocated {
				t.Errorf("%s is InUse but no caller got it", r.Name)
			}
		}
		t.Logf("%d callers got %d machines", callers, len(owner))
	})
}

// TestConcurrentExhaustion: 32 callers racing for 10 machines: exactly 10
// succeed, the rest are told there were not enough.
func TestConcurrentExhaustion(t *testing.T) {
	each(t, func(t *testing.T, f *fixture) {
		f.machines(1, 10, "small", nil)
		var ok, conflict atomic.Int64
		var wg sync.WaitGroup
		for g := 0; g < 32; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := f.svc.Allocate(f.ctx, "small", nil, backend.PoolOptions{})
				switch backend.ErrorCode(err) {
				case "":
					ok.Add(1)
				case backend.ECONFLICT:
					conflict.Add(1)
				default:
					t.Errorf("unexpected error: %v", err)
				}
			}()
		}
		wg.Wait()
		if ok.Load() != 10 || conflict.Load() != 22 {
			t.Errorf("%d succeeded and %d conflicted, want 10 and 22", ok.Load(), conflict.Load())
		}
	})
}

// BenchmarkAllocate measures one-machine allocations on PostgreSQL with 1
// and 8 concurrent callers (skipped without PROVGATE_TEST_DATABASE).
func BenchmarkAllocate(b *testing.B) {
	for _, callers := range []int{1, 8} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			st := storetest.Postgres(b)
			if st == nil {
				b.Skip("PostgreSQL not configured")
			}
			f := &fixture{t: b, ctx: backend.WithSystem(context.Background()), st: st, bus: eventbus.NewBus(backend.NewCatalog())}
			f.svc = New(st, Options{Bus: f.bus})
			f.machines(1, b.N+callers, "bench", nil)
			var next atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			for c := 0; c < callers; c++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for next.Add(1) <= int64(b.N) {
						if _, err := f.svc.Allocate(f.ctx, "bench", nil, backend.PoolOptions{}); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
		})
	}
}
