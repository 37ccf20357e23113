package claims

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/provgate/provgate/backend"
	"github.com/provgate/provgate/backend/objects"
)

// addGoldenSeeds seeds f with every request of the golden table, so the
// fuzzer starts from one valid request per route form.
func addGoldenSeeds(f *testing.F, add func(tc testCase)) {
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "claims", "derive.golden.json"))
	if err != nil {
		f.Fatal(err)
	}
	var cases []golden
	if err := json.Unmarshal(b, &cases); err != nil {
		f.Fatal(err)
	}
	for _, c := range cases {
		add(c.testCase)
	}
}

// FuzzDerive runs Derive on arbitrary requests: no panic, refusals are 4xx
// *backend.Error values, and every derived claim names a known scope and an
// action valid in it (a claim the policy cannot compile would be refused
// anyway, but deriving one means the route table and the scope table
// disagree), with update pointers that are RFC 6901 pointers.
func FuzzDerive(f *testing.F) {
	addGoldenSeeds(f, func(tc testCase) { f.Add(tc.Method, tc.Path, tc.Query, []byte(tc.Body)) })
	for _, s := range [][4]string{
		{"GET", "/api/v3/params/../../etc/passwd", "", ""},
		{"GET", "/api/v3/machines/Name:%00", "", ""},
		{"PATCH", "/api/v3/machines/" + m1, "", `[{"op":"move","from":"/Secret","path":"/Description"}]`},
		{"PATCH", "/api/v3/machines/" + m1 + "/params", "", `[{"op":"add","path":"","value":{}}]`},
		{"PUT", "/api/v3/users/bob", "", `{"Name":"bob","Roles":["superuser"]}`},
		{"POST", "/api/v3/jobs", "", `{"Machine":"Name:m1"}`},
		{"GET", "/api/v3/profiles", "decode=maybe", ""},
		{"POST", "/api/v3/machines/" + m1 + "/actions/callbackDo", "plugin=callback", `{}`},
		{"POST", "/api/v3/system/actions/x", "", ``},
		{"GET", "/api/v3/machines/a%2Fb", "", ""},
		{"GET", "/api/v3//machines", "", ""},
	} {
		f.Add(s[0], s[1], s[2], []byte(s[3]))
	}
	f.Fuzz(func(t *testing.T, method, path, query string, body []byte) {
		q, _ := url.ParseQuery(query)
		res, err := Derive(context.Background(), Request{Method: method, Path: path, Query: q, Body: body}, &fakeResolver{})
		if err != nil {
			var be *backend.Error
			if !errors.As(err, &be) {
				t.Fatalf("error is %T: %v", err, err)
			}
			switch be.Code {
			case backend.EBADREQUEST, backend.ENOTFOUND, backend.EINVALID, backend.ETOOLARGE:
			default:
				t.Fatalf("code %s: %v", be.Code, err)
			}
			return
		}
		if res.Public {
			t.Fatalf("public route %s %s", method, path)
		}
		if len(res.Claims) == 0 {
			t.Fatalf("no claims for %s %s", method, path)
		}
		for _, c := range res.Claims {
			actions := kinds.Actions(c.Scope)
			ok := kinds.ValidScope(c.Scope)
			if !ok {
				t.Fatalf("unknown scope in %q (%s %s)", c, method, path)
			}
			base, rest, hasArg := strings.Cut(c.Action, ":")
			if !slices.Contains(actions, base) {
				t.Fatalf("action %q not valid in %s (%s %s)", c.Action, c.Scope, method, path)
			}
			if base == "update" && hasArg && !backend.ValidPointer(rest) {
				t.Fatalf("invalid pointer in %q", c.Action)
			}
		}
	})
}

// FuzzPatchPointers checks the JSON pointers an update is authorized by
// against the patch the object service applies. For every patch
// objects.PatchOps accepts, patchPointers must accept it too and name the
// path of every op that changes something (and the from of every move), so
// no field can change without its update:<pointer> claim.
func FuzzPatchPointers(f *testing.F) {
	for _, s := range []string{
		`[]`, `null`, ``, `[{"op":"replace","path":"/Description","value":"x"}]`,
		`[{"op":"test","path":"/Description","from":"","value":"old"},{"op":"replace","path":"/Description","from":"","value":"new"}]`,
		`[{"op":"move","from":"/Params/a~1b","path":"/Params/c~0d"}]`, `[{"op":"copy","from":"/Name","path":"/Description"}]`,
		`[{"op":"remove","path":"/Meta/color"}]`, `[{"op":"add","path":"","value":{}}]`,
		`[{"Op":"replace","Path":"/Roles","op":"replace","path":"/Description","value":1}]`,
		`[{"op":"replace","path":"/Description","value":1,"path":"/Roles"}]`, `[{"op":"replace","path":"Description","value":1}]`,
		`[{"op":"replace","path":"/a~2","value":1}]`, `[{"op":"add","path":"/Profiles/-","value":"p"}]`, `[null]`, `{}`,
		"[{\"op\":\"replace\",\"path\":\"/Descr\\u0069ption\",\"value\":1}]", `[{"op":"replace","path":"/Description","value":1}]  x`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		ops, err := objects.PatchOps(body)
		if err != nil {
			return
		}
		ptrs, err := patchPointers(body)
		if len(ops) > MaxPatchOps {
			// Refused before any claim is derived (413).
			if !errors.Is(err, errTooManyOps) {
				t.Fatalf("patch of %d ops: %v, want the op limit", len(ops), err)
			}
			return
		}
		if err != nil {
			t.Fatalf("object service accepts %q, claims refuse it: %v", body, err)
		}
		var want []string
		for _, o := range ops {
			switch o.Op {
			case "test":
			case "move":
				want = append(want, o.Path, o.From)
			default:
				want = append(want, o.Path)
			}
		}
		for _, w := range want {
			if !slices.Contains(ptrs, w) {
				t.Fatalf("patch %q changes %q, claims only %q", body, w, ptrs)
			}
		}
		for _, p := range ptrs {
			if !backend.ValidPointer(p) {
				t.Fatalf("invalid pointer %q from %q", p, body)
			}
		}
	})
}
