package objects

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/provgate/provgate/backend"
	"github.com/provgate/provgate/backend/eventbus"
	"github.com/provgate/provgate/backend/store"
	"github.com/provgate/provgate/backend/store/storetest"
)

// sys is the ctx of the tests' own writes and reads: server-internal work,
// unrestricted (backend.WithSystem); tests of a caller's limits install
// that caller's Access instead.
func sys() context.Context { return backend.WithSystem(context.Background()) }

var testKey = []byte("0123456789abcdef0123456789abcdef")

// env is one service over one real store dialect.
type env struct {
	name string
	svc  *Service
	st   *store.Store
	bus  *eventbus.Bus
}

// envs returns a service per available dialect (SQLite always, PostgreSQL
// when PROVGATE_TEST_DATABASE is set).
func envs(t *testing.T, tune ...func(*Options)) []env {
	t.Helper()
	var out []env
	for _, c := range storetest.Open(t) {
		bus := eventbus.NewBus(backend.NewCatalog())
		o := Options{
			Bus:          bus,
			HashPassword: func(pw string) ([]byte, error) { return []byte("16384$8$1$73616c74$" + pw), nil },
			SecureKey:    testKey,
			Now:          func() time.Time { return time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC) },
		}
		for _, f := range tune {
			f(&o)
		}
		out = append(out, env{name: c.Name, svc: New(c.Store, o), st: c.Store, bus: bus})
	}
	return out
}

// each runs f as a subtest per dialect.
func each(t *testing.T, f func(t *testing.T, e env), tune ...func(*Options)) {
	t.Helper()
	for _, e := range envs(t, tune...) {
		t.Run(e.name, func(t *testing.T) { f(t, e) })
	}
}

func mustCreate(t *testing.T, e env, prefix, body string) backend.Model {
	t.Helper()
	m, err := e.svc.Objects.Create(sys(), prefix, []byte(body))
	if err != nil {
		t.Fatalf("create %s %s: %v", prefix, body, err)
	}
	return m
}

// wantErr checks err's code, its domain Type or else its operation
// (Operation.String), and that some message contains msg.
func wantErr(t *testing.T, err error, code, typ, msg string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %s %s %q", code, typ, msg)
	}
	be := backend.AsError(err)
	label := be.Type
	if label == "" {
		label = be.Op.String()
	}
	if be.Code != code || (typ != "" && label != typ) {
		t.Fatalf("got %s %s %v, want %s %s %q", be.Code, label, be.Messages, code, typ, msg)
	}
	for _, m := range be.Messages {
		if strings.Contains(m, msg) {
			return
		}
	}
	t.Fatalf("got messages %q, want one containing %q", be.Messages, msg)
}

func rawRecord(t *testing.T, e env, prefix, key string) map[string]any {
	t.Helper()
	rec, err := e.st.Get(sys(), prefix, key)
	if err != nil {
		t.Fatalf("raw get %s/%s: %v", prefix, key, err)
	}
	var m map[string]any
	if err := json.Unmarshal(rec.Data, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func toJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// drpcliMachine is what "drpcli machines create <name>" sends (§3.6).
func drpcliMachine(name string) string {
	return `{"Validated":false,"Available":false,"Errors":null,"ReadOnly":false,"Meta":null,"Endpoint":"","Bundle":"",
 "Partial":false,"Name":"` + name + `","Description":"","Uuid":"","CurrentJob":"","Address":"","Stage":"","BootEnv":"",
 "Profiles":null,"Params":null,"Tasks":null,"CurrentTask":0,"RetryTaskAttempt":0,"TaskErrorStacks":null,
 "Runnable":false,"Secret":"","OS":"","HardwareAddrs":null,"Workflow":"","Arch":"","Locked":false,"Context":"",
 "Fingerprint":{"SSNHash":null,"CSNHash":null,"CloudInstanceID":"","SystemUUID":"","MemoryIds":null},
 "Pool":"","PoolAllocated":false,"PoolStatus":"","WorkflowComplete":false}`
}

// goParams calls the params part with Go values and decodes its JSON
// answers, so that tests write params as Go literals.
type goParams struct{ p *Params }

func (e env) params() goParams { return goParams{e.svc.Params} }

func decodeValue(raw json.RawMessage, err error) (any, error) {
	if err != nil {
		return nil, err
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	return v, nil
}

func decodeMap(raw map[string]json.RawMessage, err error) (map[string]any, error) {
	if err != nil {
		return nil, err
	}
	return backend.DecodeParams(raw)
}

func (g goParams) Params(ctx context.Context, prefix, key string, aggregate, decode bool) (map[string]any, error) {
	return decodeMap(g.p.Params(ctx, prefix, key, aggregate, decode))
}

func (g goParams) GetParam(ctx context.Context, prefix, key, name string, aggregate, decode bool) (any, error) {
	return decodeValue(g.p.GetParam(ctx, prefix, key, name, aggregate, decode))
}

func (g goParams) SetParam(ctx context.Context, prefix, key, name string, value any) (any, error) {
	raw, err := json.Marshal(value)
	if err != nil {
		return nil, err
	}
	return decodeValue(g.p.SetParam(ctx, prefix, key, name, raw))
}

func (g goParams) SetParams(ctx context.Context, prefix, key string, params map[string]any) (map[string]any, error) {
	raw, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	return decodeMap(g.p.SetParams(ctx, prefix, key, raw))
}

func (g goParams) PatchParams(ctx context.Context, prefix, key string, patch []byte) (map[string]any, error) {
	return decodeMap(g.p.PatchParams(ctx, prefix, key, patch))
}

func (g goParams) DeleteParam(ctx context.Context, prefix, key, name string) (any, error) {
	return decodeValue(g.p.DeleteParam(ctx, prefix, key, name))
}

func (g goParams) Aggregate(ctx context.Context, m *backend.Machine, decode bool) (map[string]any, error) {
	return decodeMap(g.p.Aggregate(ctx, m, decode))
}
