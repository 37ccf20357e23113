package main

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// End-to-end tests of params sub-resources, secure params and meta
// (docs/design.md §3.9), on SQLite and PostgreSQL. TestE2EObjects
// (objects_e2e_test.go) runs them.

// testParams: params sub-resources, aggregation, secure params, schemas (§3.9).
func testParams(t *testing.T, s *tserver) {
	m := obObj(t, obMust(t, s, 201, "POST", "/machines", `{"Name":"par1"}`))
	mp := "/machines/" + m["Uuid"].(string)
	obMust(t, s, 201, "POST", "/profiles", `{"Name":"par-prof"}`)
	obMust(t, s, 201, "POST", "/stages", `{"Name":"par-stage"}`)
	obMust(t, s, 201, "POST", "/plugins", `{"Name":"par-plug","Provider":"callback"}`)
	for _, target := range []string{mp, "/machines/Name:par1", "/profiles/par-prof", "/stages/par-stage", "/plugins/par-plug"} {
		t.Run("basic"+strings.ReplaceAll(target, "/", "_"), func(t *testing.T) {
			obMust(t, s, 200, "POST", target+"/params", `{}`)
			if got := obObj(t, obMust(t, s, 200, "GET", target+"/params", nil)); len(got) != 0 {
				t.Errorf("params %v", got)
			}
			if r := obMust(t, s, 200, "GET", target+"/params/no/such", nil); string(r.Body) != "null" {
				t.Errorf("absent param %q, want null", r.Body)
			}
			r := obMust(t, s, 200, "POST", target+"/params/foo/bar", `{"k":1}`)
			if string(r.Body) != `{"k":1}` {
				t.Errorf("set param reply %s", r.Body)
			}
			if got := obObj(t, obMust(t, s, 200, "GET", target+"/params/foo/bar", nil)); got["k"] != 1.0 {
				t.Errorf("get foo/bar %v", got)
			}
			got := obObj(t, obMust(t, s, 200, "POST", target+"/params", `{"foo/bar":{"k":2},"a-b":"x"}`))
			if !reflect.DeepEqual(got, map[string]any{"foo/bar": map[string]any{"k": 2.0}, "a-b": "x"}) {
				t.Errorf("full map %v", got)
			}
			cur := string(obMust(t, s, 200, "GET", target+"/params", nil).Body)
			got = obObj(t, obMust(t, s, 200, "PATCH", target+"/params",
				`[{"op":"test","path":"","value":`+cur+`},{"op":"add","path":"/newp","value":5}]`))
			if got["newp"] != 5.0 || got["a-b"] != "x" {
				t.Errorf("patched params %v", got)
			}
			wantDRPError(t, obCall(t, s, "PATCH", target+"/params", `[{"op":"test","path":"","from":"","value":`+cur+`},{"op":"add","path":"/x","from":"","value":5}]`),
				409, "PATCH", "").about(t,
				"*", "*")

			if r := obMust(t, s, 200, "DELETE", target+"/params/newp", nil); string(r.Body) != "5" {
				t.Errorf("delete reply %s", r.Body)
			}
			wantDRPError(t, obCall(t, s, "DELETE", target+"/params/newp", nil), 404, "DELETE", "Not Found").about(t, "params", "newp")
			if r := obMust(t, s, 200, "DELETE", target+"/params/foo/bar", nil); string(r.Body) != `{"k":2}` {
				t.Errorf("delete foo/bar reply %s", r.Body)
			}
		})
	}
	t.Run("missing-object", func(t *testing.T) {
		wantDRPError(t, obCall(t, s, "GET", "/machines/Name:nope/params", nil), 404, "GET", "Not Found").about(t, "machines", "*")
		wantDRPError(t, obCall(t, s, "POST", "/profiles/nope/params/a", `1`), 404, "", "Not Found").about(t, "profiles", "*")
	})
	t.Run("no-params-kind", func(t *testing.T) {
		r := obCall(t, s, "GET", "/users/rocketskates/params", nil)
		if r.Status != 404 {
			t.Errorf("users params: %d %s", r.Status, r.Body)
		}
	})
	t.Run("escaped-pointer", func(t *testing.T) {
		// A param with a slash and no definition: callback/callbacks is
		// Secure, and a patch cannot reach inside a sealed value.
		obMust(t, s, 200, "PATCH", mp, `[{"op":"add","path":"/Params/esc~1ptr","from":"","value":{}}]`)
		r := obMust(t, s, 200, "PATCH", mp, `[{"op":"add","path":"/Params/esc~1ptr/a","from":"","value":{"Url":"http://x"}}]`)
		p, _ := obObj(t, r)["Params"].(map[string]any)
		if !reflect.DeepEqual(p["esc/ptr"], map[string]any{"a": map[string]any{"Url": "http://x"}}) {
			t.Errorf("Params %v", p)
		}
		r = obMust(t, s, 200, "PATCH", "/plugins/par-plug", `[{"op":"add","path":"/Params/callback~1callbacks","from":"","value":{"a":{"Url":"http://x"}}}]`)
		p, _ = obObj(t, r)["Params"].(map[string]any)
		if _, ok := p["callback/callbacks"]; !ok {
			t.Errorf("plugin Params %v", p)
		}
	})
	t.Run("aggregate-order", func(t *testing.T) {
		obMust(t, s, 201, "POST", "/params", `{"Name":"agg/p","Schema":{"type":"string","default":"from-default"}}`)
		obMust(t, s, 201, "POST", "/machines", `{"Name":"agg1"}`)
		obMust(t, s, 201, "POST", "/profiles", `{"Name":"agg-prof"}`)
		obMust(t, s, 201, "POST", "/profiles", `{"Name":"agg-prof2","Params":{"agg/p":"from-profile2"}}`)
		obMust(t, s, 201, "POST", "/stages", `{"Name":"agg-stage"}`)
		if r := obCall(t, s, "GET", "/profiles/global", nil); r.Status == 404 {
			obMust(t, s, 201, "POST", "/profiles", `{"Name":"global"}`)
		}
		obMust(t, s, 200, "PATCH", "/machines/Name:agg1",
			`[{"op":"replace","path":"/Profiles","from":"","value":["agg-prof","agg-prof2"]},{"op":"replace","path":"/Stage","from":"","value":"agg-stage"}]`)
		get := func() any {
			var v any
			if err := json.Unmarshal(obMust(t, s, 200, "GET", "/machines/Name:agg1/params/agg/p?aggregate=true", nil).Body, &v); err != nil {
				t.Fatal(err)
			}
			return v
		}
		// Without aggregate the machine has nothing.
		if r := obMust(t, s, 200, "GET", "/machines/Name:agg1/params/agg/p", nil); string(r.Body) != "null" {
			t.Errorf("non-aggregate %s", r.Body)
		}
		obMust(t, s, 200, "DELETE", "/profiles/agg-prof2/params/agg/p", nil)
		if got := get(); got != "from-default" {
			t.Errorf("default layer: %v", got)
		}
		layers := []struct{ path, value string }{
			{"/profiles/global/params/agg/p", "from-global"},
			{"/stages/agg-stage/params/agg/p", "from-stage"},
			{"/profiles/agg-prof2/params/agg/p", "from-profile2"},
			{"/profiles/agg-prof/params/agg/p", "from-profile"},
			{"/machines/Name:agg1/params/agg/p", "from-machine"},
		}
		for _, l := range layers {
			obMust(t, s, 200, "POST", l.path, `"`+l.value+`"`)
			if got := get(); got != l.value {
				t.Errorf("after %s: %v, want %s", l.path, got, l.value)
			}
		}
		all := obObj(t, obMust(t, s, 200, "GET", "/machines/Name:agg1/params?aggregate=true", nil))
		if all["agg/p"] != "from-machine" {
			t.Errorf("aggregate map %v", all)
		}
		one := obObj(t, obMust(t, s, 200, "GET", "/machines/Name:agg1?aggregate=true", nil))
		if p, _ := one["Params"].(map[string]any); p["agg/p"] != "from-machine" {
			t.Errorf("aggregate object Params %v", one["Params"])
		}
		sel := obObj(t, obMust(t, s, 200, "GET", "/machines/Name:agg1/params?aggregate=true&params=agg/p", nil))
		if len(sel) != 1 {
			t.Errorf("params=agg/p: %v", sel)
		}
	})
	t.Run("secure", func(t *testing.T) {
		obMust(t, s, 201, "POST", "/params", `{"Name":"sec/p","Secure":true,"Schema":{"type":"string"}}`)
		r := obMust(t, s, 200, "POST", mp+"/params/sec/p", `"s3cret-value"`)
		if strings.Contains(string(r.Body), "s3cret-value") {
			t.Errorf("set reply shows plaintext: %s", r.Body)
		}
		for _, u := range []string{mp + "/params/sec/p", mp + "/params", mp, "/machines?Name=par1"} {
			if r := obMust(t, s, 200, "GET", u, nil); strings.Contains(string(r.Body), "s3cret-value") {
				t.Errorf("GET %s shows plaintext: %s", u, r.Body)
			}
		}
		if r := obMust(t, s, 200, "GET", mp+"/params/sec/p?decode=true", nil); string(r.Body) != `"s3cret-value"` {
			t.Errorf("decoded %s", r.Body)
		}
		if p := obObj(t, obMust(t, s, 200, "GET", mp+"?decode=true", nil))["Params"].(map[string]any); p["sec/p"] != "s3cret-value" {
			t.Errorf("decoded object %v", p["sec/p"])
		}
		if p := obObj(t, obMust(t, s, 200, "GET", mp+"/params?decode=true", nil)); p["sec/p"] != "s3cret-value" {
			t.Errorf("decoded map %v", p["sec/p"])
		}
		l := obList(t, obMust(t, s, 200, "GET", "/machines?Name=par1&decode=true", nil))
		if len(l) != 1 || l[0]["Params"].(map[string]any)["sec/p"] != "s3cret-value" {
			t.Errorf("decoded obList %v", l)
		}
		// The secure value is stored sealed: a schema violation is still caught.
		wantDRPError(t, obCall(t, s, "POST", mp+"/params/sec/p", `42`), 422, "ValidationError", "sec/p").about(t, "machines", "*")
	})
	t.Run("schema", func(t *testing.T) {
		obMust(t, s, 201, "POST", "/params", `{"Name":"int/p","Schema":{"type":"integer"}}`)
		wantDRPError(t, obCall(t, s, "POST", mp+"/params/int/p", `"str"`), 422, "ValidationError", "int/p").about(t, "machines", "*")
		wantDRPError(t, obCall(t, s, "POST", "/profiles/par-prof/params", `{"int/p":"str"}`), 422, "ValidationError", "int/p").about(t, "profiles", "*")
		wantDRPError(t, obCall(t, s, "PATCH", mp, `[{"op":"add","path":"/Params/int~1p","from":"","value":"x"}]`), 422, "ValidationError", "int/p").about(t, "machines", "*")
		obMust(t, s, 200, "POST", mp+"/params/int/p", `3`)
		wantDRPError(t, obCall(t, s, "POST", "/params", `{"Name":"bad/schema","Schema":{"type":12}}`), 422, "ValidationError", "Schema").about(t, "params", "*")
	})
}

func testMetaIndexes(t *testing.T, s *tserver) {
	m := obObj(t, obMust(t, s, 201, "POST", "/machines", `{"Name":"meta1"}`))
	p := "/meta/machines/" + m["Uuid"].(string)
	got := obObj(t, obMust(t, s, 200, "GET", p, nil))
	if got["feature-flags"] != "change-stage-v2" {
		t.Errorf("meta %v", got)
	}
	got = obObj(t, obMust(t, s, 200, "PATCH", p, `[{"op":"add","path":"/color","from":"","value":"red"}]`))
	if got["color"] != "red" {
		t.Errorf("patched meta %v", got)
	}
	got = obObj(t, obMust(t, s, 200, "GET", "/meta/machines/Name:meta1", nil))
	if got["color"] != "red" {
		t.Errorf("meta by name %v", got)
	}
	wantDRPError(t, obCall(t, s, "PATCH", p, `[{"op":"test","path":"/color","from":"","value":"blue"}]`), 409, "PATCH", "").about(t, "machines", "*")
	wantDRPError(t, obCall(t, s, "GET", "/meta/machines/Name:nope", nil), 404, "GET", "Not Found").about(t, "machines", "*")
	idx := obObj(t, obMust(t, s, 200, "GET", "/indexes/machines", nil))
	want := map[string]map[string]any{
		"Name":        {"Type": "string", "Unique": true, "Regex": true},
		"Uuid":        {"Unique": true},
		"CurrentTask": {"Type": "integer"},
		"Runnable":    {"Type": "boolean"},
		"Profiles":    {"Unordered": true},
	}
	for n, fields := range want {
		i, _ := idx[n].(map[string]any)
		if i == nil {
			t.Errorf("index %s missing: %v", n, idx)
			continue
		}
		for f, v := range fields {
			if i[f] != v {
				t.Errorf("index %s %s = %v, want %v", n, f, i[f], v)
			}
		}
	}
	wantDRPError(t, obCall(t, s, "GET", "/indexes/nope", nil), 404, "GET", "")
}
