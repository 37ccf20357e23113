package opa

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/provgate/provgate/backend"
	"github.com/provgate/provgate/policies"
)

// The published contract (docs/policies.md): policies/schema/input.json
// describes every input the server builds, and the example inputs of
// testdata/policy/inputs decide as their files say with the embedded
// policy and testdata/policy/data.json.

const (
	inputSchema  = "../schema/input.json"
	examplesDir  = "../../testdata/policy/inputs"
	examplesData = "../../testdata/policy/data.json"
)

func compileSchema(t *testing.T, path string) *jsonschema.Schema {
	t.Helper()
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	s, err := jsonschema.NewCompiler().Compile(abs)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func validate(t *testing.T, s *jsonschema.Schema, raw []byte, what string) {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(doc); err != nil {
		t.Errorf("%s does not match %s: %v\n%s", what, inputSchema, err, raw)
	}
}

// fullInput sets every field the gateway can set.
func fullInput() policies.Input {
	in := request(policies.Principal{Kind: "user", Name: "alice", Roles: []string{"superuser"}, TokenRoles: []string{"operator"},
		Claims: []backend.Claim{}, Restrict: []backend.Claim{claim("machines", "*", "*")},
		Auth: &policies.Auth{Method: policies.AuthBearer, Kind: policies.TokenUser, IssuedAt: 1800000000, ExpiresAt: 1800003600, ID: "abc"}},
		claim("machines", "update:/Params/x", "m1"), claim("machines", "get,list", "*"))
	in.Operation, in.Method = "patch", "PATCH"
	in.Object = &policies.Object{Scope: "machines", Key: "m1"}
	in.Stored = map[string]any{"Name": "m", "Meta": map[string]any{"a": "b"}, "Params": map[string]any{"x": policies.MaskedValue()}}
	in.Proposed = map[string]any{"Name": "m", "Params": map[string]any{"x": policies.MaskedValue()}}
	return in
}

// The schema accepts the input as Go encodes it and as the engine hands it
// to OPA (the same document, with the derived base and fallback of each
// required claim), for users, machines and lists.
func TestInputMatchesSchema(t *testing.T) {
	s := compileSchema(t, inputSchema)
	machine := request(policies.Principal{Kind: "machine", Name: "m1", Roles: []string{}, Claims: []backend.Claim{claim("profiles", "get", "*")},
		MachineToken: "operations", Auth: &policies.Auth{Method: policies.AuthMachine, Kind: policies.TokenJob, IssuedAt: 1, ExpiresAt: 2, ID: "j"}},
		claim("jobs", "create", "m1"))
	list := request(user("bob", "reader"), claim("machines", "list", ""))
	list.List = &policies.ListRequest{Scope: "machines"}
	list.Principal.Auth = &policies.Auth{Method: policies.AuthBasic}
	for name, in := range map[string]policies.Input{"full": fullInput(), "machine": machine, "list": list} {
		raw, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		validate(t, s, raw, name+" input (encoding/json)")
		v, err := inputValue(in)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := ast.JSON(v)
		if err != nil {
			t.Fatal(err)
		}
		raw, err = json.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		validate(t, s, raw, name+" input (as evaluated)")
	}
	// And it refuses what the input never has.
	doc, _ := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(`{"principal": {"kind": "user", "name": "a", "roles": [], "token_roles": null, "claims": [], "reservation_key": "x"}, "required": [], "operation": "", "method": "", "path": ""}`)))
	if err := s.Validate(doc); err == nil {
		t.Error("the schema accepts principal.reservation_key, which the input never has")
	}
}

type example struct {
	Description string            `json:"description"`
	Input       json.RawMessage   `json:"input"`
	Decision    policies.Decision `json:"decision"`
}

func TestExampleInputs(t *testing.T) {
	s := compileSchema(t, inputSchema)
	raw, err := os.ReadFile(examplesData)
	if err != nil {
		t.Fatal(err)
	}
	var data policies.Data
	if err := json.Unmarshal(raw, &data); err != nil {
		t.Fatal(err)
	}
	e := newTestEngine(t, Options{})
	if err := e.SetData(context.Background(), data); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(examplesDir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples in %s: %v", examplesDir, err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var ex example
			dec := json.NewDecoder(bytes.NewReader(b))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&ex); err != nil {
				t.Fatal(err)
			}
			validate(t, s, ex.Input, f)
			var in policies.Input
			dec = json.NewDecoder(bytes.NewReader(ex.Input))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&in); err != nil {
				t.Fatalf("the input is not a policies.Input: %v", err)
			}
			got := decide(t, e, in)
			if ex.Decision.Reasons == nil {
				ex.Decision.Reasons = []string{}
			}
			if !reflect.DeepEqual(got, ex.Decision) {
				t.Errorf("%s\ngot  %+v\nwant %+v", ex.Description, got, ex.Decision)
			}
		})
	}
}

// Decisions that depend on the token's times stay exact: iat and exp
// reach the policy as the integers the token holds.
func TestAuthTimesExact(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "t.rego", "package provgate.ext.t\n\ndeny contains \"old\" if input.principal.auth.iat < 1800000000\n")
	e := extEngine(t, dir, Options{})
	in := request(user("root", "superuser"), claim("machines", "get", "m1"))
	iat := time.Unix(1800000000, 0)
	in.Principal.Auth = &policies.Auth{Method: policies.AuthBearer, Kind: policies.TokenUser, IssuedAt: iat.Unix(), ExpiresAt: iat.Add(time.Hour).Unix()}
	if d := decide(t, e, in); !d.Allow {
		t.Errorf("iat at the bound: %+v", d)
	}
	in.Principal.Auth.IssuedAt--
	if d := decide(t, e, in); d.Allow {
		t.Errorf("iat one second before the bound: %+v", d)
	}
}
