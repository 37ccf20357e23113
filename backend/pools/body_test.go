package pools

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/provgate/provgate/backend"
)

func intp(i int) *int { return &i }

func TestParseBody(t *testing.T) {
	tests := []struct {
		name string
		body string
		want *request
	}{
		{"empty", ``, &request{}},
		{"empty object", `{}`, &request{}},
		{"null", `null`, &request{}},
		{"null values are absent", `{"pool/count":null,"pool/filter":null}`, &request{}},
		{"drpcli default", `{"pool/all-machines":false,"pool/count":1,"pool/minimum":1,"pool/wait-timeout":"","pool/workflow":""}`,
			&request{Count: intp(1), Minimum: intp(1)}},
		{"drpcli everything",
			`{"pool/add-parameters":{"x":1,"y":"z"},"pool/add-profiles":["a","b"],"pool/all-machines":true,"pool/count":0,
			 "pool/filter":["Runnable=Eq(true)","Arch=amd64"],"pool/minimum":0,"pool/remove-parameters":["p","q"],
			 "pool/remove-profiles":["c"],"pool/wait-timeout":"30s","pool/workflow":"wf2"}`,
			&request{AddParams: map[string]any{"x": json.Number("1"), "y": "z"}, AddProfiles: []string{"a", "b"},
				AllMachines: true, Count: intp(0), Filter: []string{"Runnable=Eq(true)", "Arch=amd64"}, Minimum: intp(0),
				RemoveParams: []string{"p", "q"}, RemoveProf: []string{"c"}, Wait: 30 * time.Second, Workflow: "wf2"}},
		{"machine list", `{"pool/machine-list":["Name:m1","3e7031fe-3062-45f1-835c-92541bc9cbd3"],"pool/count":0,"pool/minimum":0}`,
			&request{MachineList: []string{"Name:m1", "3e7031fe-3062-45f1-835c-92541bc9cbd3"}, Count: intp(0), Minimum: intp(0)}},
		{"terraform", `{"pool/wait-timeout":"5m"}`, &request{Wait: 5 * time.Minute}},
		{"wait seconds string", `{"pool/wait-timeout":"30"}`, &request{Wait: 30 * time.Second}},
		{"wait number", `{"pool/wait-timeout":2.5}`, &request{Wait: 2500 * time.Millisecond}},
		{"wait hours", `{"pool/wait-timeout":"10h"}`, &request{Wait: 10 * time.Hour}},
		{"wait capped", `{"pool/wait-timeout":"1000h"}`, &request{Wait: maxWait}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseBody("addMachines", "p1", []byte(tt.body))
			if err != nil {
				t.Fatalf("parseBody: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestParseBodyErrors(t *testing.T) {
	tests := []struct {
		name, body string
		want       string // substring of the message; the key it names
	}{
		{"not an object", `[1]`, "must be a JSON object"},
		{"malformed", `{"pool/count":`, "must be a JSON object"},
		{"unknown key", `{"pool/colour":"red"}`, "unknown key pool/colour"},
		{"add-parameters list", `{"pool/add-parameters":[1]}`, "pool/add-parameters must be an object"},
		{"add-parameters empty name", `{"pool/add-parameters":{"":1}}`, "pool/add-parameters: empty parameter name"},
		{"remove-parameters string", `{"pool/remove-parameters":"p"}`, "pool/remove-parameters must be a list of strings"},
		{"add-profiles numbers", `{"pool/add-profiles":[1]}`, "pool/add-profiles must be a list of strings"},
		{"remove-profiles empty entry", `{"pool/remove-profiles":[""]}`, "pool/remove-profiles must not contain empty strings"},
		{"workflow number", `{"pool/workflow":3}`, "pool/workflow must be a string"},
		{"count negative", `{"pool/count":-1}`, "pool/count must be a non-negative integer"},
		{"count fraction", `{"pool/count":1.5}`, "pool/count must be a non-negative integer"},
		{"count string", `{"pool/count":"2"}`, "pool/count must be a non-negative integer"},
		{"all-machines string", `{"pool/all-machines":"yes"}`, "pool/all-machines must be true or false"},
		{"machine-list object", `{"pool/machine-list":{"a":1}}`, "pool/machine-list must be a list of strings"},
		{"minimum negative", `{"pool/minimum":-2}`, "pool/minimum must be a non-negative integer"},
		{"wait negative", `{"pool/wait-timeout":"-5s"}`, "pool/wait-timeout cannot be negative"},
		{"wait negative seconds", `{"pool/wait-timeout":"-5"}`, "pool/wait-timeout cannot be negative"},
		{"wait negative number", `{"pool/wait-timeout":-1}`, "pool/wait-timeout cannot be negative"},
		{"wait malformed", `{"pool/wait-timeout":"soon"}`, "pool/wait-timeout must be"},
		{"wait bool", `{"pool/wait-timeout":true}`, "pool/wait-timeout must be"},
		{"filter string", `{"pool/filter":"Arch=amd64"}`, "pool/filter must be a list of strings"},
		{"list with count", `{"pool/machine-list":["Name:m1"],"pool/count":2}`, "pool/machine-list cannot be combined"},
		{"list with all", `{"pool/machine-list":["Name:m1"],"pool/all-machines":true}`, "pool/machine-list cannot be combined"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseBody("addMachines", "p1", []byte(tt.body))
			if got := backend.ErrorCode(err); got != backend.EBADREQUEST {
				t.Fatalf("code %q (%v), want %q", got, err, backend.EBADREQUEST)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not contain %q", err.Error(), tt.want)
			}
		})
	}
}

func TestPlan(t *testing.T) {
	tests := []struct {
		name    string
		r       request
		want    selection
		wantErr bool
	}{
		{"nothing: one machine, minimum one", request{}, selection{count: 1, minimum: 1}, false},
		{"count 0 means 1", request{Count: intp(0)}, selection{count: 1, minimum: 1}, false},
		{"count defaults minimum", request{Count: intp(3)}, selection{count: 3, minimum: 3}, false},
		{"lower minimum: partial", request{Count: intp(3), Minimum: intp(1)}, selection{count: 3, minimum: 1}, false},
		{"minimum zero", request{Count: intp(3), Minimum: intp(0)}, selection{count: 3, minimum: 0}, false},
		{"minimum above count", request{Count: intp(2), Minimum: intp(3)}, selection{}, true},
		{"minimum above default count", request{Minimum: intp(2)}, selection{}, true},
		{"all: minimum 0", request{AllMachines: true, Count: intp(0)}, selection{all: true, count: maxAll}, false},
		{"all with minimum", request{AllMachines: true, Minimum: intp(5)}, selection{all: true, count: maxAll, minimum: 5}, false},
		{"list: all of them", request{MachineList: []string{"a", "b"}, Minimum: intp(0)}, selection{list: true, count: 2, minimum: 2}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.r.plan("p1")
			if tt.wantErr {
				if backend.ErrorCode(err) != backend.EBADREQUEST || !strings.Contains(err.Error(), "pool/minimum") {
					t.Fatalf("got %v, want a 400 naming pool/minimum", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestApplyTo(t *testing.T) {
	wf := &backend.Workflow{Name: "wf", Stages: []string{"s1"}}
	empty := &backend.Workflow{Name: "empty"}
	stages := map[string]*backend.Stage{"s1": {Name: "s1", BootEnv: "local", Tasks: []string{"t1"}}}
	tests := []struct {
		name       string
		v          backend.PoolVerb
		wf         *backend.Workflow
		allocated  bool
		wantStatus string
		wantAlloc  bool
	}{
		{"add with workflow", backend.PoolAdd, wf, false, backend.PoolJoining, false},
		{"add without workflow", backend.PoolAdd, nil, false, backend.PoolFree, false},
		{"add with empty workflow", backend.PoolAdd, empty, false, backend.PoolFree, false},
		{"remove with workflow", backend.PoolRemove, wf, false, backend.PoolJoining, false},
		{"allocate with workflow", backend.PoolAllocate, wf, false, backend.PoolBuilding, true},
		{"allocate without workflow", backend.PoolAllocate, nil, false, backend.PoolInUse, true},
		{"release with workflow", backend.PoolRelease, wf, true, backend.PoolDestroying, false},
		{"release without workflow", backend.PoolRelease, nil, true, backend.PoolFree, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &backend.Machine{Name: "m1", Uuid: "u1", Pool: "p1", PoolAllocated: tt.allocated,
				Profiles: []string{"keep", "drop"}, Params: map[string]any{"old": 1, "gone": 2}}
			m.Fill()
			a := &actionSet{wf: tt.wf, stages: stages, groups: []*backend.PoolTransitionActions{
				{AddProfiles: []string{"pool-prof", "keep"}, AddParameters: map[string]any{"old": "pool", "p": 1}},
				{AddProfiles: []string{"body-prof"}, RemoveProfiles: []string{"drop", "pool-prof", "absent"},
					AddParameters: map[string]any{"p": 2}, RemoveParameters: []string{"gone", "absent"}},
			}}
			a.applyTo(tt.v, "p2", m)
			if m.PoolStatus != tt.wantStatus || m.PoolAllocated != tt.wantAlloc {
				t.Errorf("status %s allocated %v, want %s %v", m.PoolStatus, m.PoolAllocated, tt.wantStatus, tt.wantAlloc)
			}
			wantPool := "p1"
			if tt.v == backend.PoolAdd || tt.v == backend.PoolRemove {
				wantPool = "p2"
			}
			if m.Pool != wantPool {
				t.Errorf("pool %s, want %s", m.Pool, wantPool)
			}
			if want := []string{"keep", "body-prof"}; !reflect.DeepEqual(m.Profiles, want) {
				t.Errorf("profiles %v, want %v", m.Profiles, want)
			}
			if want := map[string]any{"old": "pool", "p": 2}; !reflect.DeepEqual(m.Params, want) {
				t.Errorf("params %v, want %v", m.Params, want)
			}
			if tt.wf == wf {
				if want := []string{"stage:s1", "bootenv:local", "t1"}; !reflect.DeepEqual(m.Tasks, want) || m.CurrentTask != -1 || m.WorkflowComplete {
					t.Errorf("tasks %v current %d complete %v", m.Tasks, m.CurrentTask, m.WorkflowComplete)
				}
			}
		})
	}
}

func TestPoolStatusMovesAgree(t *testing.T) {
	// Every transitional status a verb sets must complete to the stable
	// status of that verb, and fail to its Hold status.
	for _, tt := range []struct{ status, complete, failure string }{
		{backend.PoolJoining, backend.PoolFree, backend.PoolHoldJoin},
		{backend.PoolBuilding, backend.PoolInUse, backend.PoolHoldBuild},
		{backend.PoolDestroying, backend.PoolFree, backend.PoolHoldDestroy},
		{backend.PoolLeaving, backend.PoolFree, backend.PoolHoldLeave},
		{backend.PoolHoldJoin, backend.PoolFree, backend.PoolHoldJoin},
		{backend.PoolHoldBuild, backend.PoolInUse, backend.PoolHoldBuild},
		{backend.PoolHoldDestroy, backend.PoolFree, backend.PoolHoldDestroy},
		{backend.PoolHoldLeave, backend.PoolFree, backend.PoolHoldLeave},
		{backend.PoolFree, backend.PoolFree, backend.PoolFree},
		{backend.PoolInUse, backend.PoolInUse, backend.PoolInUse},
	} {
		if got := backend.PoolStatusOnComplete(tt.status); got != tt.complete {
			t.Errorf("OnComplete(%s) = %s, want %s", tt.status, got, tt.complete)
		}
		if got := backend.PoolStatusOnFailure(tt.status); got != tt.failure {
			t.Errorf("OnFailure(%s) = %s, want %s", tt.status, got, tt.failure)
		}
	}
}
