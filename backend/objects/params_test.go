package objects

import (
	"strings"
	"testing"

	"github.com/provgate/provgate/backend"
)

func TestParamsSubresource(t *testing.T) {
	each(t, func(t *testing.T, e env) {
		ctx := sys()
		m := mustCreate(t, e, "machines", `{"Name":"pm","Params":{"a":1}}`).(*backend.Machine)
		t.Run("set and get", func(t *testing.T) {
			v, err := e.params().SetParam(ctx, "machines", m.Uuid, "foo/bar", "x")
			if err != nil || v != "x" {
				t.Fatalf("got %v %v", v, err)
			}
			got, err := e.params().GetParam(ctx, "machines", "Name:pm", "foo/bar", false, false)
			if err != nil || got != "x" {
				t.Fatalf("got %v %v", got, err)
			}
		})
		t.Run("JSON in and out", func(t *testing.T) {
			v, err := e.svc.Params.SetParam(ctx, "machines", m.Uuid, "j/son", []byte(` {"n": [1, 2.5, "<b>"]} `))
			if err != nil || string(v) != `{"n":[1,2.5,"\u003cb\u003e"]}` {
				t.Fatalf("got %s %v", v, err)
			}
			all, err := e.svc.Params.Params(ctx, "machines", m.Uuid, false, false)
			if err != nil || string(all["j/son"]) != string(v) || string(all["a"]) != "1" {
				t.Fatalf("got %s %v", all, err)
			}
			_, err = e.svc.Params.SetParam(ctx, "machines", m.Uuid, "j/son", []byte(`{"n":`))
			wantErr(t, err, backend.EBADREQUEST, "action", "unexpected end of JSON input")
			_, err = e.svc.Params.SetParams(ctx, "machines", m.Uuid, []byte(`[1]`))
			wantErr(t, err, backend.EBADREQUEST, "action", "cannot unmarshal array")
			if _, err := e.svc.Params.DeleteParam(ctx, "machines", m.Uuid, "j/son"); err != nil {
				t.Fatal(err)
			}
		})
		t.Run("absent is null", func(t *testing.T) {
			got, err := e.params().GetParam(ctx, "machines", m.Uuid, "nope", false, false)
			if err != nil || got != nil {
				t.Fatalf("got %v %v", got, err)
			}
		})
		t.Run("patch params like drpcli add", func(t *testing.T) {
			cur, _ := e.params().Params(ctx, "machines", m.Uuid, false, false)
			p := `[{"op":"test","path":"","from":"","value":` + toJSON(t, cur) + `},{"op":"add","path":"/newp","from":"","value":5}]`
			got, err := e.params().PatchParams(ctx, "machines", m.Uuid, []byte(p))
			if err != nil || got["newp"] != float64(5) || got["a"] != float64(1) {
				t.Fatalf("got %v %v", got, err)
			}
			_, err = e.params().PatchParams(ctx, "machines", m.Uuid, []byte(`[{"op":"test","path":"/a","value":2}]`))
			wantErr(t, err, backend.ECONFLICT, "patch", `"/a"`)
		})
		t.Run("delete", func(t *testing.T) {
			old, err := e.params().DeleteParam(ctx, "machines", m.Uuid, "newp")
			if err != nil || old != float64(5) {
				t.Fatalf("got %v %v", old, err)
			}
			_, err = e.params().DeleteParam(ctx, "machines", m.Uuid, "newp")
			wantErr(t, err, backend.ENOTFOUND, "delete", "Not Found")
			if be := backend.AsError(err); be.Model != "params" || be.Key != "newp" {
				t.Fatalf("got %+v", be)
			}
		})
		t.Run("replace all", func(t *testing.T) {
			got, err := e.params().SetParams(ctx, "machines", m.Uuid, map[string]any{"z": true})
			if err != nil || toJSON(t, got) != `{"z":true}` {
				t.Fatalf("got %v %v", got, err)
			}
		})
		t.Run("schema checked on set", func(t *testing.T) {
			mustCreate(t, e, "params", `{"Name":"port","Schema":{"type":"integer"}}`)
			_, err := e.params().SetParam(ctx, "machines", m.Uuid, "port", "eighty")
			wantErr(t, err, backend.EINVALID, "ValidationError", "Invalid value for param port")
		})
		t.Run("no params on roles", func(t *testing.T) {
			mustCreate(t, e, "roles", `{"Name":"rr"}`)
			_, err := e.params().Params(ctx, "roles", "rr", false, false)
			wantErr(t, err, backend.ENOTFOUND, "read", "no params")
		})
	})
}

func TestAggregateOrder(t *testing.T) {
	each(t, func(t *testing.T, e env) {
		ctx := sys()
		mustCreate(t, e, "params", `{"Name":"only-default","Schema":{"type":"string","default":"dflt"}}`)
		mustCreate(t, e, "params", `{"Name":"level","Schema":{"type":"string","default":"dflt"}}`)
		mustCreate(t, e, "profiles", `{"Name":"global","Params":{"level":"global","in-global":"g"}}`)
		mustCreate(t, e, "profiles", `{"Name":"nested","Params":{"level":"nested","in-nested":"n"}}`)
		mustCreate(t, e, "profiles", `{"Name":"p1","Profiles":["nested"],"Params":{"in-p1":"p1"}}`)
		mustCreate(t, e, "profiles", `{"Name":"p2","Params":{"level":"p2","in-p2":"p2","in-nested":"p2"}}`)
		mustCreate(t, e, "stages", `{"Name":"st","Params":{"level":"stage","in-stage":"s"}}`)
		m := mustCreate(t, e, "machines", `{"Name":"agg","Stage":"st","Profiles":["p1","p2"],"Params":{"own":"m"}}`).(*backend.Machine)
		tests := []struct{ name, param, want string }{
			{"machine own", "own", "m"},
			{"first profile then its nested before second profile", "level", "nested"},
			{"nested beats later profile", "in-nested", "n"},
			{"second profile", "in-p2", "p2"},
			{"stage", "in-stage", "s"},
			{"global", "in-global", "g"},
			{"schema default", "only-default", "dflt"},
		}
		got, err := e.params().Aggregate(ctx, m, false)
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				if got[tc.param] != tc.want {
					t.Fatalf("got %s=%v, want %q (all: %v)", tc.param, got[tc.param], tc.want, got)
				}
			})
		}
		t.Run("stage over global", func(t *testing.T) {
			if _, err := e.svc.Objects.Patch(ctx, "machines", m.Uuid, []byte(`[{"op":"replace","path":"/Profiles","value":[]}]`), false); err != nil {
				t.Fatal(err)
			}
			v, _ := e.params().GetParam(ctx, "machines", m.Uuid, "level", true, false)
			if v != "stage" {
				t.Fatalf("got %v", v)
			}
		})
	})
}

// TestAggregateAfterChanges: aggregated params read profiles, stages and
// schema defaults through the read cache; each change made since the
// previous read (a global profile created, a profile or stage patched, a
// param definition created, changed or deleted) shows in the next.
func TestAggregateAfterChanges(t *testing.T) {
	each(t, func(t *testing.T, e env) {
		ctx := sys()
		mustCreate(t, e, "stages", `{"Name":"st2","Params":{"in-stage":"s1"}}`)
		m := mustCreate(t, e, "machines", `{"Name":"agg2","Stage":"st2"}`).(*backend.Machine)
		get := func(name string) any {
			t.Helper()
			got, err := e.params().Aggregate(ctx, m, false)
			if err != nil {
				t.Fatal(err)
			}
			return got[name]
		}
		if v := get("in-global"); v != nil {
			t.Fatalf("no global profile yet, got %v", v)
		}
		mustCreate(t, e, "profiles", `{"Name":"global","Params":{"in-global":"g1"}}`)
		if v := get("in-global"); v != "g1" {
			t.Fatalf("global profile created: got %v", v)
		}
		if _, err := e.svc.Objects.Patch(ctx, "profiles", "global", []byte(`[{"op":"replace","path":"/Params/in-global","value":"g2"}]`), false); err != nil {
			t.Fatal(err)
		}
		if _, err := e.svc.Objects.Patch(ctx, "stages", "st2", []byte(`[{"op":"replace","path":"/Params/in-stage","value":"s2"}]`), false); err != nil {
			t.Fatal(err)
		}
		if v, w := get("in-global"), get("in-stage"); v != "g2" || w != "s2" {
			t.Fatalf("profile and stage patched: got %v, %v", v, w)
		}
		if v := get("dflt2"); v != nil {
			t.Fatalf("no definition yet, got %v", v)
		}
		mustCreate(t, e, "params", `{"Name":"dflt2","Schema":{"type":"string","default":"d1"}}`)
		if v := get("dflt2"); v != "d1" {
			t.Fatalf("definition created: got %v", v)
		}
		if _, err := e.svc.Objects.Patch(ctx, "params", "dflt2", []byte(`[{"op":"replace","path":"/Schema/default","value":"d2"}]`), false); err != nil {
			t.Fatal(err)
		}
		if v := get("dflt2"); v != "d2" {
			t.Fatalf("definition patched: got %v", v)
		}
		if _, err := e.svc.Objects.Delete(ctx, "params", "dflt2"); err != nil {
			t.Fatal(err)
		}
		if _, err := e.svc.Objects.Delete(ctx, "profiles", "global"); err != nil {
			t.Fatal(err)
		}
		if v, w := get("dflt2"), get("in-global"); v != nil || w != nil {
			t.Fatalf("definition and global profile deleted: got %v, %v", v, w)
		}
	})
}

func TestSecureParams(t *testing.T) {
	each(t, func(t *testing.T, e env) {
		ctx := sys()
		mustCreate(t, e, "params", `{"Name":"ipmi/password","Secure":true,"Schema":{"type":"string","minLength":3}}`)
		m := mustCreate(t, e, "machines", `{"Name":"sec1","Params":{"ipmi/password":"hunter2"}}`).(*backend.Machine)
		t.Run("ciphertext at rest", func(t *testing.T) {
			raw := rawRecord(t, e, "machines", m.Uuid)
			v := raw["Params"].(map[string]any)["ipmi/password"]
			sd, ok := asSecureData(v)
			if !ok || strings.Contains(toJSON(t, raw), "hunter2") || sd.Payload == "" {
				t.Fatalf("got stored %v", v)
			}
		})
		t.Run("envelope unless decode", func(t *testing.T) {
			v, _ := e.params().GetParam(ctx, "machines", m.Uuid, "ipmi/password", false, false)
			if _, ok := asSecureData(v); !ok {
				t.Fatalf("got %v", v)
			}
			v, _ = e.params().GetParam(ctx, "machines", m.Uuid, "ipmi/password", true, true)
			if v != "hunter2" {
				t.Fatalf("got %v", v)
			}
			got, _, _ := e.svc.Objects.Get(ctx, "machines", m.Uuid)
			if err := e.svc.Objects.Shape(ctx, got, backend.Query{Decode: true}); err != nil || got.(*backend.Machine).Params["ipmi/password"] != "hunter2" {
				t.Fatalf("got %v %v", got.(*backend.Machine).Params, err)
			}
		})
		t.Run("round trip keeps envelope", func(t *testing.T) {
			got, _, _ := e.svc.Objects.Get(ctx, "machines", m.Uuid)
			before := toJSON(t, got.(*backend.Machine).Params)
			got.(*backend.Machine).Description = "rt"
			after, err := e.svc.Objects.Put(ctx, "machines", m.Uuid, []byte(toJSON(t, got)))
			if err != nil || toJSON(t, after.(*backend.Machine).Params) != before {
				t.Fatalf("got %v %v", after, err)
			}
		})
		t.Run("set param encrypts and validates", func(t *testing.T) {
			v, err := e.params().SetParam(ctx, "machines", m.Uuid, "ipmi/password", "s3cret")
			if _, ok := asSecureData(v); err != nil || !ok {
				t.Fatalf("got %v %v", v, err)
			}
			_, err = e.params().SetParam(ctx, "machines", m.Uuid, "ipmi/password", "no")
			wantErr(t, err, backend.EINVALID, "ValidationError", "Invalid value for param ipmi/password")
		})
		t.Run("foreign envelope refused", func(t *testing.T) {
			_, err := e.params().SetParam(ctx, "machines", m.Uuid, "ipmi/password", map[string]any{"Key": "x", "Nonce": "y", "Payload": "z"})
			wantErr(t, err, backend.EINVALID, "ValidationError", "Invalid secure value")
		})
		t.Run("envelope bound to param name", func(t *testing.T) {
			mustCreate(t, e, "params", `{"Name":"other/secret","Secure":true}`)
			v, _ := e.params().GetParam(ctx, "machines", m.Uuid, "ipmi/password", false, false)
			_, err := e.params().SetParam(ctx, "machines", m.Uuid, "other/secret", v)
			wantErr(t, err, backend.EINVALID, "ValidationError", "Invalid secure value")
		})
	})
}
