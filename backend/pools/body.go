package pools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/provgate/provgate/backend"
)

// Body keys of the manage request (docs/design.md §11.1).
const (
	keyAddParams    = "pool/add-parameters"
	keyRemoveParams = "pool/remove-parameters"
	keyAddProfiles  = "pool/add-profiles"
	keyRemoveProf   = "pool/remove-profiles"
	keyWorkflow     = "pool/workflow"
	keyCount        = "pool/count"
	keyAllMachines  = "pool/all-machines"
	keyMachineList  = "pool/machine-list"
	keyMinimum      = "pool/minimum"
	keyWaitTimeout  = "pool/wait-timeout"
	keyFilter       = "pool/filter"
)

// request is a decoded manage body. Pointers distinguish "absent" from zero
// where the defaults depend on it.
type request struct {
	AddParams    map[string]any
	RemoveParams []string
	AddProfiles  []string
	RemoveProf   []string
	Workflow     string
	Count        *int
	AllMachines  bool
	MachineList  []string
	Minimum      *int
	Wait         time.Duration
	Filter       []string
}

// overrides is the body's own action group, applied after the pools' groups.
func (r *request) overrides() *backend.PoolTransitionActions {
	return &backend.PoolTransitionActions{
		Workflow:         r.Workflow,
		AddProfiles:      r.AddProfiles,
		AddParameters:    r.AddParams,
		RemoveProfiles:   r.RemoveProf,
		RemoveParameters: r.RemoveParams,
	}
}

// parseBody decodes a manage body strictly: every error is a bad request
// naming the key and the type it needs. An empty body is an empty object;
// JSON null for a key means the key is absent.
func parseBody(verb, pool string, body []byte) (*request, error) {
	bad := func(format string, args ...any) error {
		return backend.OpError(backend.EBADREQUEST, backend.ActionOp, "pools", pool, fmt.Sprintf(format, args...))
	}
	r := &request{}
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return r, nil
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, bad("%s body must be a JSON object: %s", verb, err.Error())
	}
	if raw == nil {
		return r, nil
	}
	// The string-list keys, in the order the check for empty strings
	// below reports them.
	type list struct {
		key string
		to  *[]string
	}
	lists := []list{{keyAddProfiles, &r.AddProfiles}, {keyRemoveProf, &r.RemoveProf}, {keyRemoveParams, &r.RemoveParams},
		{keyMachineList, &r.MachineList}, {keyFilter, &r.Filter}}
	for _, k := range slices.Sorted(maps.Keys(raw)) {
		v := raw[k]
		if string(v) == "null" {
			continue
		}
		var err error
		switch k {
		case keyAddParams:
			err = decodeParams(v, &r.AddParams)
		case keyWorkflow:
			err = decodeAs(v, &r.Workflow, "must be a string")
		case keyAllMachines:
			err = decodeAs(v, &r.AllMachines, "must be true or false")
		case keyCount:
			r.Count, err = decodeCount(v)
		case keyMinimum:
			r.Minimum, err = decodeCount(v)
		case keyWaitTimeout:
			r.Wait, err = decodeWait(v)
		default:
			i := slices.IndexFunc(lists, func(l list) bool { return l.key == k })
			if i < 0 {
				return nil, bad("unknown key %s", k)
			}
			err = decodeAs(v, lists[i].to, "must be a list of strings")
		}
		if err != nil {
			return nil, bad("%s %s", k, err.Error())
		}
	}
	// Param names are not checked against the name rules: drpcli's own
	// example sends {"x":1}; only an empty name is refused.
	if _, ok := r.AddParams[""]; ok {
		return nil, bad("%s: empty parameter name", keyAddParams)
	}
	for _, l := range lists {
		for _, s := range *l.to {
			if strings.TrimSpace(s) == "" {
				return nil, bad("%s must not contain empty strings", l.key)
			}
		}
	}
	if len(r.MachineList) > 0 && (r.AllMachines || (r.Count != nil && *r.Count > 0)) {
		return nil, bad("%s cannot be combined with %s or %s", keyMachineList, keyCount, keyAllMachines)
	}
	return r, nil
}

// selection says how many machines an operation takes.
type selection struct {
	list    bool // exactly the machines of pool/machine-list
	all     bool // every eligible machine
	count   int  // with neither: up to count machines
	minimum int  // fewer eligible than this: nothing changes
}

// maxAll bounds one all-machines operation (one store page).
const maxAll = backend.MaxLimit

// plan turns the body's selection keys into a selection:
//   - pool/machine-list: every named machine must be eligible (minimum is
//     ignored: naming a machine means wanting it);
//   - pool/all-machines: every eligible machine, minimum defaults to 0;
//   - otherwise count machines, count absent or 0 meaning 1 (Terraform sends
//     no count); minimum defaults to that count, so a caller that gives
//     neither (Terraform reads pr[0]) gets an error rather than an empty
//     reply, and a smaller explicit minimum allows partial success. A
//     minimum above the count is a bad request.
func (r *request) plan(pool string) (selection, error) {
	switch {
	case len(r.MachineList) > 0:
		return selection{list: true, count: len(r.MachineList), minimum: len(r.MachineList)}, nil
	case r.AllMachines:
		sel := selection{all: true, count: maxAll}
		if r.Minimum != nil {
			sel.minimum = *r.Minimum
		}
		return sel, nil
	}
	sel := selection{count: 1}
	if r.Count != nil && *r.Count > 0 {
		sel.count = *r.Count
	}
	sel.minimum = sel.count
	if r.Minimum != nil {
		if *r.Minimum > sel.count {
			return sel, backend.OpError(backend.EBADREQUEST, backend.ActionOp, "pools", pool,
				fmt.Sprintf("%s (%d) cannot be greater than %s (%d)", keyMinimum, *r.Minimum, keyCount, sel.count))
		}
		sel.minimum = *r.Minimum
	}
	return sel, nil
}

// decodeAs decodes v into out; a value of another JSON type fails with the
// words want.
func decodeAs(v json.RawMessage, out any, want string) error {
	if err := json.Unmarshal(v, out); err != nil {
		return errors.New(want)
	}
	return nil
}

func decodeParams(v json.RawMessage, out *map[string]any) error {
	// UseNumber keeps integers exact: they are re-encoded verbatim.
	d := json.NewDecoder(bytes.NewReader(v))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil || m == nil {
		return fmt.Errorf("must be an object of parameter names to values")
	}
	*out = m
	return nil
}

func decodeCount(v json.RawMessage) (*int, error) {
	var n json.Number
	if err := json.Unmarshal(v, &n); err != nil || !isJSONNumber(v) {
		return nil, fmt.Errorf("must be a non-negative integer")
	}
	i, err := strconv.ParseInt(n.String(), 10, 32)
	if err != nil || i < 0 {
		return nil, fmt.Errorf("must be a non-negative integer, not %s", n.String())
	}
	c := int(i)
	return &c, nil
}

// isJSONNumber tells a JSON number from a JSON string: json.Number accepts
// a quoted number too, which the count keys do not.
func isJSONNumber(v json.RawMessage) bool {
	return len(v) > 0 && v[0] != '"'
}

// maxWait bounds a wait so that a typo such as "100000h" cannot pin a
// request forever.
const maxWait = 24 * time.Hour

// decodeWait reads pool/wait-timeout: "" (no wait), seconds ("30" or the
// JSON number 30, fractions allowed), or a Go duration ("30s", "5m", "10h").
func decodeWait(v json.RawMessage) (time.Duration, error) {
	const want = `must be "", a number of seconds or a duration such as "30s", "5m" or "10h"`
	if isJSONNumber(v) {
		var f float64
		if err := decodeAs(v, &f, want); err != nil {
			return 0, err
		}
		return seconds(f)
	}
	var s string
	if err := decodeAs(v, &s, want); err != nil {
		return 0, err
	}
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, nil
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		return seconds(f)
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%s, not %q", want, s)
	}
	if d < 0 {
		return 0, fmt.Errorf("cannot be negative")
	}
	return min(d, maxWait), nil
}

// seconds is a wait of f seconds, at most maxWait.
func seconds(f float64) (time.Duration, error) {
	if f < 0 || math.IsNaN(f) {
		return 0, fmt.Errorf("cannot be negative")
	}
	if f >= maxWait.Seconds() {
		return maxWait, nil
	}
	return time.Duration(f * float64(time.Second)), nil
}
