package gateway

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/provgate/provgate/backend"
	"github.com/provgate/provgate/policies"
)

// denyGet allows every request but any claim of action get.
type denyGet struct{ allowAll }

func (d *denyGet) Decide(_ context.Context, in policies.Input) (policies.Decision, error) {
	for _, c := range in.Required {
		if c.Action == "get" {
			return policies.Decision{Allow: false, Reasons: []string{"Requires: " + c.String()}}, nil
		}
	}
	return policies.Decision{Allow: true, Reasons: []string{}}, nil
}

// richObjects answers writes with a machine holding more than was written.
type richObjects struct{ recObjects }

func machineWith() *backend.Machine {
	m := &backend.Machine{Uuid: "m1", Name: "secret-name", Description: "new",
		Params: map[string]any{"pub": 2.0, "secret": "s3cr3t", "obj": map[string]any{"a": 1.0, "b": "hidden"}}}
	m.Fill()
	m.Meta = map[string]string{"owner": "alice", "color": "red"}
	return m
}

func (o richObjects) Patch(context.Context, string, string, []byte, bool) (backend.Model, error) {
	return machineWith(), nil
}
func (o richObjects) Put(context.Context, string, string, []byte) (backend.Model, error) {
	return machineWith(), nil
}
func (o richObjects) Delete(context.Context, string, string) (backend.Model, error) {
	return machineWith(), nil
}
func (o richObjects) PatchParams(context.Context, string, string, []byte) (map[string]json.RawMessage, error) {
	return backend.EncodeParams(machineWith().Params)
}
func (o richObjects) SetParams(context.Context, string, string, json.RawMessage) (map[string]json.RawMessage, error) {
	return backend.EncodeParams(machineWith().Params)
}
func (o richObjects) DeleteParam(context.Context, string, string, string) (json.RawMessage, error) {
	return json.RawMessage(`"s3cr3t"`), nil
}
func (o richObjects) SetParam(_ context.Context, _, _, _ string, v json.RawMessage) (json.RawMessage, error) {
	if string(v) == `"seal-me"` {
		return json.RawMessage(`{"Key":"k","Nonce":"n","Payload":"p"}`), nil
	}
	return v, nil
}

// TestWriteReplyWithoutGet: a caller that may not get the object sees in a
// write's reply only the object's key and the values it wrote, as stored.
func TestWriteReplyWithoutGet(t *testing.T) {
	dec := &denyGet{}
	s := New(Options{Logger: slog.New(slog.DiscardHandler), Deps: Deps{Auth: dec, Policy: dec, Resolver: keyResolver{},
		Objects: richObjects{recObjects{&recorder{}}}, Params: richObjects{recObjects{&recorder{}}}}})
	for _, tc := range []struct{ method, uri, body, want string }{
		{"PATCH", "/api/v3/machines/m1", `[{"op":"replace","path":"/Description","value":"new"},{"op":"add","path":"/Params/pub","value":3}]`,
			`{"Description":"new","Uuid":"m1"}`},
		{"PATCH", "/api/v3/machines/m1", `[{"op":"add","path":"/Params/obj","value":{"a":1,"b":"mine"}}]`,
			`{"Params":{"obj":{"a":1}},"Uuid":"m1"}`},
		{"PUT", "/api/v3/machines/m1", `{"Uuid":"m1","Description":"new","Params":{"pub":2}}`, `{"Description":"new","Params":{"pub":2},"Uuid":"m1"}`},
		{"DELETE", "/api/v3/machines/m1", ``, `{"Uuid":"m1"}`},
		{"PATCH", "/api/v3/machines/m1/params", `[{"op":"replace","path":"/pub","value":2}]`, `{"pub":2}`},
		{"POST", "/api/v3/machines/m1/params", `{"pub":2,"secret":"other"}`, `{"pub":2}`},
		{"POST", "/api/v3/machines/m1/params/pub", `7`, `7`},
		{"POST", "/api/v3/machines/m1/params/sec", `"seal-me"`, `null`},
		{"DELETE", "/api/v3/machines/m1/params/secret", ``, `null`},
		{"PATCH", "/api/v3/meta/machines/m1", `[{"op":"add","path":"/color","value":"red"}]`, `{"color":"red"}`},
	} {
		ctx := serve(s, tc.method, tc.uri, []byte(tc.body))
		if ctx.Response.StatusCode() != 200 {
			t.Fatalf("%s %s: %d %s", tc.method, tc.uri, ctx.Response.StatusCode(), ctx.Response.Body())
		}
		var got, want any
		if err := json.Unmarshal(ctx.Response.Body(), &got); err != nil {
			t.Fatalf("%s %s: %s", tc.method, tc.uri, ctx.Response.Body())
		}
		_ = json.Unmarshal([]byte(tc.want), &want)
		gj, _ := json.Marshal(got)
		wj, _ := json.Marshal(want)
		if string(gj) != string(wj) {
			t.Errorf("%s %s %s: reply %s, want %s", tc.method, tc.uri, tc.body, gj, wj)
		}
	}
	// With get, the whole object.
	all := &allowAll{}
	s = New(Options{Logger: slog.New(slog.DiscardHandler), Deps: Deps{Auth: all, Policy: all, Resolver: keyResolver{},
		Objects: richObjects{recObjects{&recorder{}}}, Params: richObjects{recObjects{&recorder{}}}}})
	ctx := serve(s, "PATCH", "/api/v3/machines/m1", []byte(`[{"op":"replace","path":"/Description","value":"new"}]`))
	var m backend.Machine
	if err := json.Unmarshal(ctx.Response.Body(), &m); err != nil || m.Name != "secret-name" || m.Params["secret"] != "s3cr3t" {
		t.Errorf("reply with get: %s", ctx.Response.Body())
	}
}

type passwordUsers struct{ recUsers }

func (passwordUsers) ChangePassword(_ context.Context, name, _ string) (backend.Model, error) {
	u := &backend.User{Name: name, Roles: []string{"ops", "admin"}, Description: "private"}
	u.Fill()
	return u, nil
}

// TestPasswordReplyWithoutGet: changing another user's password does not
// read that user.
func TestPasswordReplyWithoutGet(t *testing.T) {
	dec := &denyGet{}
	s := New(Options{Logger: slog.New(slog.DiscardHandler), Deps: Deps{Auth: dec, Policy: dec, Resolver: keyResolver{},
		Users: passwordUsers{recUsers{&recorder{}}}}})
	ctx := serve(s, "PUT", "/api/v3/users/bob/password", []byte(`{"Password":"n3w-Pa55"}`))
	if got := string(ctx.Response.Body()); ctx.Response.StatusCode() != 200 || got != `{"Name":"bob"}` {
		t.Fatalf("password reply without get: %d %s", ctx.Response.StatusCode(), got)
	}
}
