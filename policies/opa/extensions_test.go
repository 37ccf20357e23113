package opa

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/provgate/provgate/backend"
	"github.com/provgate/provgate/policies"
)

// examples is where the example extensions of docs/policies.md live.
const examples = "../../testdata/policy/extensions"

// copyDir copies the files of the example extension name into a new
// directory, so a test may change them.
func copyExample(t *testing.T, name string) string {
	t.Helper()
	dir := t.TempDir()
	entries, err := os.ReadDir(filepath.Join(examples, name))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(examples, name, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, dir, e.Name(), string(b))
	}
	return dir
}

func extEngine(t *testing.T, dir string, opts Options) *Engine {
	t.Helper()
	opts.PolicyDir = dir
	return newTestEngine(t, opts)
}

func decide(t *testing.T, e *Engine, in policies.Input) policies.Decision {
	t.Helper()
	d, err := e.Decide(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// A directory of extension packages keeps the embedded policy as its base:
// what the base allows and refuses is unchanged, and the extension's deny
// refuses what the base would allow, with its message as the reason.
func TestExtensionVetoesOnEmbeddedBase(t *testing.T) {
	e := extEngine(t, filepath.Join(examples, "protected"), Options{})
	if n := e.Needs(); !n.Stored || n.Proposed {
		t.Errorf("Needs() = %+v, want stored only", n)
	}
	del := func(meta map[string]any) policies.Input {
		in := request(user("root", "superuser"), claim("machines", "delete", "m1"))
		in.Method, in.Operation, in.Path = "DELETE", "delete", "/machines/m1"
		in.Object = &policies.Object{Scope: "machines", Key: "m1"}
		in.Stored = map[string]any{"Name": "db1", "Uuid": "m1", "Meta": meta}
		return in
	}
	d := decide(t, e, del(map[string]any{"protected": "true"}))
	if d.Allow || len(d.Reasons) != 1 || !strings.Contains(d.Reasons[0], "machine db1 is protected") {
		t.Errorf("protected delete: %+v", d)
	}
	if d := decide(t, e, del(map[string]any{"protected": "false"})); !d.Allow {
		t.Errorf("unprotected delete: %+v", d)
	}
	// The base still refuses on its own, with its own reasons.
	in := del(map[string]any{})
	in.Principal = user("olga", "operator")
	if d := decide(t, e, in); d.Allow || d.Reasons[0] != "Requires: machines delete m1" {
		t.Errorf("base refusal: %+v", d)
	}
	// A hidden object stays not found: a veto never turns 404 into 403.
	in = del(map[string]any{"protected": "true"})
	in.Principal = user("tina", "superuser")
	in.Object.Key, in.Required[0].Specific = "m9", "m9"
	if d := decide(t, e, in); !d.NotFound {
		t.Errorf("hidden object: %+v", d)
	}

	embedded := newTestEngine(t, Options{})
	if n := embedded.Needs(); n.Stored || n.Proposed {
		t.Errorf("the embedded policy reads no object, Needs() = %+v", n)
	}
}

// Data files of the directory are loaded under data.provgate_ext, and a
// change to them alone is a reload.
func TestExtensionDataAndReload(t *testing.T) {
	dir := copyExample(t, "freeze")
	e := extEngine(t, dir, Options{})
	patch := func(name string) policies.Input {
		in := request(user(name, "superuser"), claim("machines", "update:/Description", "m1"))
		in.Method, in.Operation = "PATCH", "patch"
		return in
	}
	if d := decide(t, e, patch("carol")); d.Allow || d.Reasons[0] != "change freeze for carol: release weekend, ask the on-call lead" {
		t.Errorf("frozen user: %+v", d)
	}
	if d := decide(t, e, patch("dave")); !d.Allow {
		t.Errorf("other user: %+v", d)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e.WatchDir(ctx, 10*time.Millisecond)
	before, _ := e.Revisions()
	writeFile(t, dir, "data.json", `{"freeze": {"users": [], "reason": "lifted"}}`)
	waitRevision(t, e, before, "data.json changed")
	if d := decide(t, e, patch("carol")); !d.Allow {
		t.Errorf("lifted freeze: %+v", d)
	}
}

// A failing extension test keeps the running policy, and an extension that
// breaks an embedded suite is refused as well.
func TestFailingExtensionTestKeepsPolicy(t *testing.T) {
	dir := copyExample(t, "freeze")
	e := extEngine(t, dir, Options{})
	carol := request(user("carol", "superuser"), claim("machines", "update:/Description", "m1"))
	carol.Method = "PATCH"

	// A data file its test finds mistyped (a string for the list of users):
	// refused.
	writeFile(t, dir, "data.json", `{"freeze": {"users": "dave", "reason": "x"}}`)
	err := e.Reload(context.Background())
	if err == nil || !strings.Contains(err.Error(), "test_data_shape") {
		t.Fatalf("Reload = %v, want the failing test named", err)
	}
	if d := decide(t, e, carol); d.Allow || !strings.Contains(d.Reasons[0], "release weekend") {
		t.Errorf("old policy not kept: %+v", d)
	}

	// An extension that refuses what the embedded suites expect allowed
	// loads: vetoes only narrow the base, and the embedded suites test the
	// embedded policy (docs/design.md §9.6).
	writeFile(t, dir, "data.json", `{"freeze": {"users": ["carol"], "reason": "release weekend, ask the on-call lead"}}`)
	writeFile(t, dir, "everything.rego", "package provgate.ext.everything\n\ndeny contains \"no users\" if input.principal.kind == \"user\"\n")
	if err := e.Reload(context.Background()); err != nil {
		t.Fatalf("Reload of a broad veto = %v, want it loaded", err)
	}
	if d := decide(t, e, request(user("dave", "superuser"), claim("machines", "update:/Description", "m1"))); d.Allow {
		t.Errorf("broad veto not served: %+v", d)
	}
}

// A change freeze keyed on the weekday loads on the very weekday it
// freezes (its suites run at TestClock, not the server's clock) and
// refuses changes that day, and only that day.
func TestWeekdayFreezeLoadsOnItsDay(t *testing.T) {
	friday := time.Date(2026, 1, 9, 10, 0, 0, 0, time.UTC)
	now := friday
	e := extEngine(t, filepath.Join(examples, "weekday_freeze"), Options{Now: func() time.Time { return now }, CacheSize: -1})
	patch := request(user("ops", "superuser"), claim("machines", "update:/Description", "m1"))
	patch.Method = "PATCH"
	if d := decide(t, e, patch); d.Allow || len(d.Reasons) != 1 || !strings.Contains(d.Reasons[0], "Friday") {
		t.Errorf("Friday PATCH: %+v", d)
	}
	get := patch
	get.Method = "GET"
	if d := decide(t, e, get); !d.Allow {
		t.Errorf("Friday GET: %+v", d)
	}
	now = friday.Add(-24 * time.Hour)
	if d := decide(t, e, patch); !d.Allow {
		t.Errorf("Thursday PATCH: %+v", d)
	}
	if err := e.Reload(context.Background()); err != nil {
		t.Errorf("reload on Thursday: %v", err)
	}
}

// Every suite runs at TestClock: a test that reads the clock unmocked sees
// it, one that mocks it sees its own.
func TestSuitesRunAtTestClock(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "c.rego", "package provgate.ext.c\n\ndeny contains \"x\" if false\n")
	writeFile(t, dir, "c_test.rego", fmt.Sprintf("package provgate.ext.c_test\n\n"+
		"test_clock if time.now_ns() == %d\n\ntest_mocked if time.now_ns() == 7 with time.now_ns as 7\n", TestClock.UnixNano()))
	extEngine(t, dir, Options{})
	writeFile(t, dir, "c_test.rego", "package provgate.ext.c_test\n\ntest_clock if time.now_ns() == 1\n")
	if _, err := New(context.Background(), Options{PolicyDir: dir}); err == nil || !strings.Contains(err.Error(), "test_clock") {
		t.Errorf("a test expecting another clock: %v", err)
	}
}

// Deny rules the base never reads are refused at load, with the reason.
func TestExtensionShapeChecked(t *testing.T) {
	for name, src := range map[string]string{
		"never consulted": "package provgate.ext.a.b\n\ndeny contains \"x\" if input.method == \"PUT\"\n",
		"not a set":       "package provgate.ext.a\n\ndeny if input.method == \"PUT\"\n",
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, dir, "x.rego", src)
			_, err := New(context.Background(), Options{PolicyDir: dir})
			if err == nil || backend.ErrorCode(err) != backend.EINVALID {
				t.Fatalf("New = %v, want a refusal", err)
			}
			t.Log(err)
		})
	}
}

// docs/design.md §9.4: a decision that read the clock is never served
// from the cache. A deadline rule allows an identical request before the
// deadline and refuses it after, though the policy, data and input are the
// same; a decision that used no such built-in is cached as before.
func TestDeadlineNeverStale(t *testing.T) {
	deadline := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	dir := t.TempDir()
	writeFile(t, dir, "deadline.rego", `package provgate.ext.deadline

deny contains "writes closed at the deadline" if {
	input.method != "GET"
	time.now_ns() >= data.provgate_ext.deadline_ns
}
`)
	writeFile(t, dir, "data.json", `{"deadline_ns": `+strconv.FormatInt(deadline.UnixNano(), 10)+`}`)
	var mu sync.Mutex
	now := deadline.Add(-time.Second)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	e := extEngine(t, dir, Options{Now: clock})

	write := request(user("root", "superuser"), claim("machines", "update:/Description", "m1"))
	write.Method = "PATCH"
	for i := range 3 {
		if d := decide(t, e, write); !d.Allow {
			t.Fatalf("before the deadline, try %d: %+v", i, d)
		}
	}
	if n := e.cache.len(); n != 0 {
		t.Errorf("%d decisions that read the clock were cached", n)
	}
	mu.Lock()
	now = deadline
	mu.Unlock()
	if d := decide(t, e, write); d.Allow || d.Reasons[0] != "writes closed at the deadline" {
		t.Fatalf("at the deadline: %+v", d)
	}

	// A read never reaches time.now_ns: it is cached.
	read := request(user("root", "superuser"), claim("machines", "get", "m1"))
	decide(t, e, read)
	if n := e.cache.len(); n != 1 {
		t.Errorf("cache holds %d decisions after one deterministic one, want 1", n)
	}
}

// Needs finds the input parts a policy reads, conservatively: a reference
// to input as a whole or by a computed key counts as reading everything.
func TestInputNeeds(t *testing.T) {
	for _, tt := range []struct {
		rule string
		want policies.Needs
	}{
		{`deny contains "x" if input.method == "PUT"`, policies.Needs{}},
		{`deny contains "x" if input.stored.Meta.a == "b"`, policies.Needs{Stored: true}},
		{`deny contains "x" if input.proposed.Name == "b"`, policies.Needs{Proposed: true}},
		{`deny contains "x" if { some k in ["stored"]; input[k] }`, policies.Needs{Stored: true, Proposed: true}},
		{`deny contains "x" if { x := input; x.method == "PUT" }`, policies.Needs{Stored: true, Proposed: true}},
		{`deny contains "x" if { some c in input.required; c.specific == input.stored.Name }`, policies.Needs{Stored: true}},
	} {
		dir := t.TempDir()
		writeFile(t, dir, "x.rego", "package provgate.ext.x\n\n"+tt.rule+"\n")
		e := extEngine(t, dir, Options{})
		if got := e.Needs(); got != tt.want {
			t.Errorf("%s: Needs() = %+v, want %+v", tt.rule, got, tt.want)
		}
	}
}
