package store_test

import (
	"context"
	"sync"
	"testing"

	"github.com/provgate/provgate/backend/store/storetest"
)

// TestEnsureSetting: a setting is made once, kept afterwards, and when
// several callers race to make it they all get the one stored.
func TestEnsureSetting(t *testing.T) {
	for _, c := range storetest.Open(t) {
		t.Run(c.Name, func(t *testing.T) {
			ctx := context.Background()
			s := c.Store
			v, err := s.EnsureSetting(ctx, "k", func() string { return "first" })
			if err != nil || v != "first" {
				t.Fatalf("create: %q, %v", v, err)
			}
			if v, err = s.EnsureSetting(ctx, "k", func() string { return "second" }); err != nil || v != "first" {
				t.Fatalf("existing setting: %q, %v", v, err)
			}
			// An empty value counts as absent.
			if err := s.SetSetting(ctx, "k", ""); err != nil {
				t.Fatal(err)
			}
			if v, err = s.EnsureSetting(ctx, "k", func() string { return "third" }); err != nil || v != "third" {
				t.Fatalf("empty setting: %q, %v", v, err)
			}

			var wg sync.WaitGroup
			got := make([]string, 8)
			errs := make([]error, len(got))
			for i := range got {
				wg.Add(1)
				go func() {
					defer wg.Done()
					got[i], errs[i] = s.EnsureSetting(ctx, "race", func() string { return string(rune('a' + i)) })
				}()
			}
			wg.Wait()
			stored, _, err := s.GetSetting(ctx, "race")
			if err != nil {
				t.Fatal(err)
			}
			for i := range got {
				if errs[i] != nil || got[i] != stored {
					t.Fatalf("caller %d got %q (%v), stored %q", i, got[i], errs[i], stored)
				}
			}
		})
	}
}
