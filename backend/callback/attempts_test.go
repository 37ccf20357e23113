package callback

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/provgate/provgate/backend"
)

// seeOnly is a caller that sees the machines listed, and every other scope.
type seeOnly struct {
	machines map[string]bool
	err      error
	asked    int
}

func (a *seeOnly) CanSee(_ context.Context, scope, key string) (bool, error) {
	a.asked++
	if a.err != nil {
		return false, a.err
	}
	return scope != "machines" || a.machines[key], nil
}

func (a *seeOnly) Can(context.Context, ...backend.Claim) (bool, error) { return false, nil }

func (a *seeOnly) Ungranted(_ context.Context, gs ...backend.Grant) ([]backend.Claim, error) {
	return ungrantedAll(gs), nil
}

// TestAttemptsFollowMachineVisibility: a caller lists only the attempts of
// machines it may see; a hidden machine looks like one without attempts,
// and the limit counts visible attempts only.
func TestAttemptsFollowMachineVisibility(t *testing.T) {
	e := newEnv(t, nil)
	at := time.Now()
	record := func(machine string, n int) {
		for range n {
			at = at.Add(time.Millisecond)
			_ = e.store.RecordAttempts(context.Background(), []backend.CallbackAttempt{{Plugin: "cb", Callback: "c", Machine: machine, At: at}})
		}
	}
	// The seen machine's attempts sit between more hidden attempts than fit
	// on one page of the store, and another plugin's attempts.
	record("hidden", 250)
	record("seen", 3)
	_ = e.store.RecordAttempts(context.Background(), []backend.CallbackAttempt{{Plugin: "other", Callback: "c", Machine: "seen", At: at.Add(time.Millisecond)}})
	record("hidden", 150)

	caller := &seeOnly{machines: map[string]bool{"seen": true}}
	ctx := backend.WithAccess(context.Background(), caller)
	machines := func(l []backend.CallbackAttempt) map[string]int {
		out := map[string]int{}
		for _, a := range l {
			out[a.Machine+"/"+a.Plugin]++
		}
		return out
	}
	tests := []struct {
		name    string
		machine string
		limit   int
		want    int
	}{
		{"all", "", 0, 3},
		{"limit counts visible attempts", "", 2, 2},
		{"visible machine", "seen", 10, 3},
		{"hidden machine", "hidden", 10, 0},
		{"unknown machine", "nope", 10, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := e.svc.Attempts(ctx, "cb", tt.machine, tt.limit)
			if err != nil {
				t.Fatal(err)
			}
			if got == nil || len(got) != tt.want || machines(got)["seen/cb"] != tt.want {
				t.Fatalf("attempts %v, want %d of seen/cb", machines(got), tt.want)
			}
			for i := 1; i < len(got); i++ {
				if got[i].At.After(got[i-1].At) {
					t.Fatalf("not newest first: %v", got)
				}
			}
		})
	}
	t.Run("hidden machine filter reads nothing", func(t *testing.T) {
		before := e.store.listCalls
		if _, err := e.svc.Attempts(ctx, "cb", "hidden", 10); err != nil {
			t.Fatal(err)
		}
		if e.store.listCalls != before {
			t.Error("the attempts of a hidden machine were read")
		}
	})
	t.Run("server-internal work sees everything", func(t *testing.T) {
		sys := backend.WithSystem(context.Background())
		got, err := e.svc.Attempts(sys, "cb", "", MaxAttemptsLimit)
		if err != nil || len(got) != 403 {
			t.Fatalf("got %d attempts, %v; want 403", len(got), err)
		}
		if got, _ := e.svc.Attempts(sys, "cb", "", MaxAttemptsLimit+1); len(got) != DefaultAttemptsLimit {
			t.Fatalf("a limit above the maximum gave %d attempts, want the default %d", len(got), DefaultAttemptsLimit)
		}
	})
	t.Run("no declared access fails closed", func(t *testing.T) {
		for _, m := range []string{"", "seen"} {
			got, err := e.svc.Attempts(context.Background(), "cb", m, 10)
			if !errors.Is(err, backend.ErrNoAccess) || len(got) != 0 {
				t.Errorf("machine %q: %d attempts, err %v; want ErrNoAccess", m, len(got), err)
			}
		}
	})
	t.Run("visibility errors fail closed", func(t *testing.T) {
		broken := backend.WithAccess(context.Background(), &seeOnly{err: errors.New("policy down")})
		for _, m := range []string{"", "seen"} {
			if got, err := e.svc.Attempts(broken, "cb", m, 10); err == nil || len(got) != 0 {
				t.Errorf("machine %q: %d attempts, err %v; want an error", m, len(got), err)
			}
		}
	})
}

// TestAttemptLog: records added from many goroutines all reach the store,
// in fewer writes than records while writes are slow, and flush returns
// only when every record added before it is stored.
func TestAttemptLog(t *testing.T) {
	st := &slowStore{fakeStore: &fakeStore{now: time.Now}}
	l := newAttemptLog(st, slog.New(slog.NewTextHandler(io.Discard, nil)))
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				l.add(backend.CallbackAttempt{Plugin: "p", Callback: "c", Machine: fmt.Sprintf("m%d-%d", g, i)})
			}
		}()
	}
	wg.Wait()
	l.flush()
	if n := len(st.Attempts()); n != 400 {
		t.Fatalf("stored %d attempts, want 400", n)
	}
	if w := st.writes.Load(); w >= 400 || w < 1 {
		t.Fatalf("%d writes for 400 attempts: not batched", w)
	}
	l.flush() // nothing queued: returns at once
}

// slowStore takes a millisecond per write, as a busy database would.
type slowStore struct {
	*fakeStore
	writes atomic.Int64
}

func (s *slowStore) RecordAttempts(ctx context.Context, as []backend.CallbackAttempt) error {
	s.writes.Add(1)
	time.Sleep(time.Millisecond)
	return s.fakeStore.RecordAttempts(ctx, as)
}

// TestAttemptLogDelay: without a flush, records added together share a
// write, made attemptBatchDelay after the first of them, and are in
// the store within that delay plus the write (docs/design.md §12.8).
func TestAttemptLogDelay(t *testing.T) {
	st := &slowStore{fakeStore: &fakeStore{now: time.Now}}
	l := newAttemptLog(st, slog.New(slog.NewTextHandler(io.Discard, nil)))
	start := time.Now()
	for i := 0; i < 10; i++ {
		l.add(backend.CallbackAttempt{Plugin: "p", Callback: "c", Machine: fmt.Sprintf("m%d", i)})
	}
	for len(st.Attempts()) < 10 {
		if time.Since(start) > 5*time.Second {
			t.Fatalf("%d of 10 attempts stored after 5 s", len(st.Attempts()))
		}
		time.Sleep(time.Millisecond)
	}
	if d := time.Since(start); d < attemptBatchDelay {
		t.Errorf("stored after %v, before the batch delay %v", d, attemptBatchDelay)
	}
	// One write unless this goroutine was held off the CPU for the whole
	// delay between two adds.
	if w := st.writes.Load(); w >= 10 {
		t.Errorf("%d writes for 10 attempts added together: not batched", w)
	}
	l.flush()
}
