package store_test

import (
	"context"
	"strconv"
	"sync"
	"testing"

	"github.com/provgate/provgate/backend/store/storetest"
)

// TestUpdateSetting: the read and the write of UpdateSetting hold the row,
// so concurrent increments of a counter lose none, on SQLite and on
// PostgreSQL; write false leaves the setting as it was.
func TestUpdateSetting(t *testing.T) {
	for _, c := range storetest.Open(t) {
		t.Run(c.Name, func(t *testing.T) {
			ctx := context.Background()
			s := c.Store
			incr := func(cur string) (string, bool) {
				n, _ := strconv.Atoi(cur) // "" for an absent setting counts as 0
				return strconv.Itoa(n + 1), true
			}
			const n = 16
			var wg sync.WaitGroup
			errs := make([]error, n)
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs[i] = s.UpdateSetting(ctx, "counter", incr)
				}()
			}
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Fatalf("update %d: %v", i, err)
				}
			}
			if v, _, err := s.GetSetting(ctx, "counter"); err != nil || v != strconv.Itoa(n) {
				t.Fatalf("counter %q (%v), want %d: an update was lost", v, err, n)
			}
			if err := s.UpdateSetting(ctx, "counter", func(string) (string, bool) { return "0", false }); err != nil {
				t.Fatal(err)
			}
			if v, _, _ := s.GetSetting(ctx, "counter"); v != strconv.Itoa(n) {
				t.Fatalf("counter %q after an update that wrote nothing", v)
			}
		})
	}
}
