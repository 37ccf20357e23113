package prefs_test

import (
	"context"
	"testing"
	"time"

	"github.com/provgate/provgate/backend"
	"github.com/provgate/provgate/backend/prefs"
	"github.com/provgate/provgate/backend/store/storetest"
)

func TestPrefs(t *testing.T) {
	for _, c := range storetest.Open(t) {
		t.Run(c.Name, func(t *testing.T) {
			ctx := context.Background()
			p := prefs.New(c.Store)
			all, err := p.Prefs(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if all[prefs.KnownTokenTimeout] != "3600" || all[prefs.UnknownTokenTimeout] != "600" ||
				all[prefs.DebugEnable] != "false" || all["defaultStage"] != "none" || len(all) != 6 {
				t.Fatalf("defaults %v", all)
			}
			if p.KnownTokenTTL(ctx) != time.Hour || p.UnknownTokenTTL(ctx) != 10*time.Minute || p.Debug() {
				t.Fatal("default TTLs or debug wrong")
			}

			// A refused write changes nothing, not even its valid entries.
			_, err = p.SetPrefs(ctx, map[string]string{prefs.KnownTokenTimeout: "60", "nope": "1",
				prefs.UnknownTokenTimeout: "-5", prefs.DebugEnable: "maybe"})
			if !backend.IsCode(err, backend.EINVALID) {
				t.Fatalf("invalid prefs: %v", err)
			}
			msgs := backend.AsError(err).Messages
			// In name order ("nope" sorts before "rs-"), one per bad entry.
			want := []string{"Unknown Preference nope", "Preference rs-debug-enable must be true or false",
				`Preference unknownTokenTimeout: "-5" is not a number of seconds`}
			if len(msgs) != len(want) || msgs[0] != want[0] || msgs[1] != want[1] || msgs[2] != want[2] {
				t.Fatalf("messages %q", msgs)
			}
			if p.KnownTokenTTL(ctx) != time.Hour {
				t.Fatal("a refused write changed knownTokenTimeout")
			}

			all, err = p.SetPrefs(ctx, map[string]string{prefs.KnownTokenTimeout: "60", prefs.DebugEnable: "true"})
			if err != nil {
				t.Fatal(err)
			}
			if all[prefs.KnownTokenTimeout] != "60" || p.KnownTokenTTL(ctx) != time.Minute || !p.Debug() {
				t.Fatalf("after set: %v", all)
			}
		})
	}
}
