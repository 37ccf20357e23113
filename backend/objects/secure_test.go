package objects

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/provgate/provgate/backend"
)

// TestSecureBinding: a sealed value opens only on the object and param it
// was sealed for; copies are refused on write without saying where they
// came from, and aggregation opens each value with its own object's seal.
func TestSecureBinding(t *testing.T) {
	each(t, func(t *testing.T, e env) {
		ctx := sys()
		mustCreate(t, e, "params", `{"Name":"sec/p","Secure":true}`)
		mustCreate(t, e, "params", `{"Name":"sec/q","Secure":true}`)
		victim := mustCreate(t, e, "machines", `{"Name":"victim","Params":{"sec/p":"from-machine"}}`).(*backend.Machine)
		mustCreate(t, e, "profiles", `{"Name":"prof","Params":{"sec/p":"from-profile"}}`)
		mustCreate(t, e, "stages", `{"Name":"stg","Params":{"sec/p":"from-stage"}}`)
		mustCreate(t, e, "plugins", `{"Name":"plg","Provider":"callback","Params":{"sec/p":"from-plugin"}}`)
		mine := mustCreate(t, e, "machines", `{"Name":"mine"}`).(*backend.Machine)
		stored := func(prefix, key string) any {
			v, err := e.params().GetParam(ctx, prefix, key, "sec/p", false, false)
			if _, ok := asSecureData(v); err != nil || !ok {
				t.Fatalf("%s/%s sec/p not sealed: %v %v", prefix, key, v, err)
			}
			return v
		}
		for _, src := range []struct{ prefix, key, clear string }{
			{"machines", victim.Uuid, "from-machine"}, {"profiles", "prof", "from-profile"},
			{"stages", "stg", "from-stage"}, {"plugins", "plg", "from-plugin"},
		} {
			t.Run("copied from "+src.prefix, func(t *testing.T) {
				env := stored(src.prefix, src.key)
				for _, write := range []func() error{
					func() error { _, err := e.params().SetParam(ctx, "machines", mine.Uuid, "sec/p", env); return err },
					func() error {
						_, err := e.params().SetParams(ctx, "machines", mine.Uuid, map[string]any{"sec/p": env})
						return err
					},
					func() error {
						m := machineOf(t, e, mine.Uuid)
						m.Params = map[string]any{"sec/p": env}
						_, err := e.svc.Objects.Put(ctx, "machines", mine.Uuid, []byte(toJSON(t, m)))
						return err
					},
					// Not a secure param on the target: still refused.
					func() error { _, err := e.params().SetParam(ctx, "machines", mine.Uuid, "plain/x", env); return err },
				} {
					err := write()
					wantErr(t, err, backend.EINVALID, "ValidationError", "it was not sealed for this object")
					for _, leak := range []string{src.key, src.clear, "victim", src.prefix} {
						if strings.Contains(strings.Join(backend.AsError(err).Messages, " "), leak) {
							t.Fatalf("refusal names %q: %v", leak, err)
						}
					}
				}
			})
		}
		t.Run("same object, other param", func(t *testing.T) {
			_, err := e.params().SetParam(ctx, "machines", victim.Uuid, "sec/q", stored("machines", victim.Uuid))
			wantErr(t, err, backend.EINVALID, "ValidationError", "it was not sealed for this object")
		})
		t.Run("aggregate opens each value at its source", func(t *testing.T) {
			if _, err := e.svc.Objects.Patch(ctx, "machines", mine.Uuid, []byte(`[{"op":"replace","path":"/Profiles","value":["prof"]}]`), false); err != nil {
				t.Fatal(err)
			}
			agg, err := e.params().Aggregate(ctx, machineOf(t, e, mine.Uuid), true)
			if err != nil || agg["sec/p"] != "from-profile" {
				t.Fatalf("aggregate %v %v", agg, err)
			}
			if _, err := e.svc.Objects.Patch(ctx, "machines", mine.Uuid, []byte(`[{"op":"replace","path":"/Profiles","value":[]},{"op":"replace","path":"/Stage","value":"stg"}]`), false); err != nil {
				t.Fatal(err)
			}
			agg, _ = e.params().Aggregate(ctx, machineOf(t, e, mine.Uuid), true)
			if agg["sec/p"] != "from-stage" {
				t.Fatalf("aggregate via stage %v", agg)
			}
			p, err := e.params().Params(ctx, "plugins", "plg", false, true)
			if err != nil || p["sec/p"] != "from-plugin" {
				t.Fatalf("plugin params %v %v", p, err)
			}
		})
		t.Run("a value that does not open stays sealed", func(t *testing.T) {
			// Written around the service (as a damaged or foreign store
			// would hold it): reads neither fail nor open it.
			env := stored("machines", victim.Uuid)
			rec, err := e.st.Get(ctx, "machines", mine.Uuid)
			if err != nil {
				t.Fatal(err)
			}
			var raw map[string]any
			_ = json.Unmarshal(rec.Data, &raw)
			raw["Params"].(map[string]any)["sec/q"] = env
			if _, err := e.st.Update(ctx, "machines", mine.Uuid, rec.Rev, []byte(toJSON(t, raw))); err != nil {
				t.Fatal(err)
			}
			v, err := e.params().GetParam(ctx, "machines", mine.Uuid, "sec/q", false, true)
			if _, sealed := asSecureData(v); err != nil || !sealed {
				t.Fatalf("got %v %v, want the envelope unopened", v, err)
			}
		})
	})
}

// legacySeal seals v the way the first server version did: bound to the
// param name only, with the bare key id.
func legacySeal(t *testing.T, b *secureBox, name string, v any) map[string]any {
	t.Helper()
	plain, _ := json.Marshal(v)
	nonce := make([]byte, b.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		t.Fatal(err)
	}
	ct := b.aead.Seal(nil, nonce, plain, []byte(name))
	return map[string]any{"Key": b.legacyID, "Nonce": base64.StdEncoding.EncodeToString(nonce),
		"Payload": base64.StdEncoding.EncodeToString(ct)}
}

func TestMigrateSecureParams(t *testing.T) {
	each(t, func(t *testing.T, e env) {
		ctx := sys()
		mustCreate(t, e, "params", `{"Name":"sec/p","Secure":true}`)
		m := mustCreate(t, e, "machines", `{"Name":"old1"}`).(*backend.Machine)
		mustCreate(t, e, "profiles", `{"Name":"oldp"}`)
		mustCreate(t, e, "stages", `{"Name":"olds"}`)
		mustCreate(t, e, "plugins", `{"Name":"oldg","Provider":"callback"}`)
		objs := []struct{ prefix, key, clear string }{
			{"machines", m.Uuid, "m-secret"}, {"profiles", "oldp", "p-secret"},
			{"stages", "olds", "s-secret"}, {"plugins", "oldg", "g-secret"},
		}
		legacy := map[string]map[string]any{}
		// Store values as the first version sealed them, around the
		// service, as a store written by that version holds them.
		for _, o := range objs {
			rec, err := e.st.Get(ctx, o.prefix, o.key)
			if err != nil {
				t.Fatal(err)
			}
			var raw map[string]any
			_ = json.Unmarshal(rec.Data, &raw)
			env := legacySeal(t, e.svc.c.sec, "sec/p", o.clear)
			legacy[o.prefix] = env
			raw["Params"].(map[string]any)["sec/p"] = env
			if _, err := e.st.Update(ctx, o.prefix, o.key, rec.Rev, []byte(toJSON(t, raw))); err != nil {
				t.Fatal(err)
			}
			// Before migration the first form does not open: reads keep it.
			if v, _ := e.params().GetParam(ctx, o.prefix, o.key, "sec/p", false, true); v == o.clear {
				t.Fatalf("%s: first-form seal opened before migration", o.prefix)
			}
		}
		n, err := e.svc.Params.MigrateSecureParams(ctx)
		if err != nil || n != len(objs) {
			t.Fatalf("migrated %d, %v; want %d", n, err, len(objs))
		}
		revs := map[string]int64{}
		for _, o := range objs {
			raw := rawRecord(t, e, o.prefix, o.key)
			sd, ok := asSecureData(raw["Params"].(map[string]any)["sec/p"])
			if !ok || sd.Key != e.svc.c.sec.keyID || strings.Contains(toJSON(t, raw), o.clear) {
				t.Fatalf("%s after migration: %v", o.prefix, raw["Params"])
			}
			if v, err := e.params().GetParam(ctx, o.prefix, o.key, "sec/p", false, true); err != nil || v != o.clear {
				t.Fatalf("%s decodes to %v %v, want %s", o.prefix, v, err, o.clear)
			}
			_, rev, _ := e.svc.Objects.Get(ctx, o.prefix, o.key)
			revs[o.prefix] = rev
		}
		t.Run("idempotent", func(t *testing.T) {
			if n, err := e.svc.Params.MigrateSecureParams(ctx); err != nil || n != 0 {
				t.Fatalf("second run migrated %d, %v", n, err)
			}
			for _, o := range objs {
				if _, rev, _ := e.svc.Objects.Get(ctx, o.prefix, o.key); rev != revs[o.prefix] {
					t.Fatalf("second run rewrote %s", o.prefix)
				}
			}
		})
		t.Run("first form refused from clients", func(t *testing.T) {
			_, err := e.params().SetParam(ctx, "machines", m.Uuid, "sec/p", legacy["machines"])
			wantErr(t, err, backend.EINVALID, "ValidationError", "it was not sealed for this object")
		})
	})
}
