package claims

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/provgate/provgate/backend"
)

// errTooManyOps refuses a patch of more than MaxPatchOps operations.
var errTooManyOps = fmt.Errorf("a patch may hold at most %d operations", MaxPatchOps)

// patch is what a JSON Patch (RFC 6902) does, for authorization.
type patch struct {
	// changed are the pointers it changes, in op order: path of every op
	// but test, and also from of move (which removes its from).
	changed []string
	// reads is set when an op reads a value: test compares one, copy
	// copies its from.
	reads bool
	// written are the values of add and replace ops, at their path.
	written []Write
}

// parsePatch reads a JSON Patch the way the object service applies it. Ops
// are decoded as exact-case maps, as json-patch reads them: a struct decode
// would fold "Path" into "path" and authorize a different pointer than the
// one applied. The ops are counted before any is decoded, so an oversized
// patch costs one pass over the array.
//
// An empty body and null are the empty patch, as the object service reads
// them.
func parsePatch(body []byte) (patch, error) {
	var p patch
	if len(bytes.TrimSpace(body)) == 0 {
		return p, nil
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		return p, errors.New("patch must be a JSON array of operations")
	}
	if len(raw) > MaxPatchOps {
		return p, fmt.Errorf("%w; this one holds %d", errTooManyOps, len(raw))
	}
	p.changed = make([]string, 0, len(raw))
	for i, r := range raw {
		var op map[string]json.RawMessage
		if err := json.Unmarshal(r, &op); err != nil || op == nil {
			return p, fmt.Errorf("op %d: not an object", i)
		}
		var name string
		if err := json.Unmarshal(op["op"], &name); err != nil {
			return p, fmt.Errorf("op %d: missing or malformed op", i)
		}
		path, err := opPointer(op, "path")
		if err != nil {
			return p, fmt.Errorf("op %d: %w", i, err)
		}
		switch name {
		case "test":
			p.reads = true
		case "add", "replace":
			p.changed = append(p.changed, path)
			if v, ok := op["value"]; ok {
				p.written = append(p.written, Write{Pointer: path, Value: v})
			}
		case "remove":
			p.changed = append(p.changed, path)
		case "move", "copy":
			from, err := opPointer(op, "from")
			if err != nil {
				return p, fmt.Errorf("op %d: %w", i, err)
			}
			p.changed = append(p.changed, path)
			if name == "move" {
				p.changed = append(p.changed, from)
			} else {
				p.reads = true
			}
		default:
			return p, fmt.Errorf("op %d: unknown op %q", i, name)
		}
	}
	return p, nil
}

// patchPointers returns the pointers a patch changes (parsePatch).
func patchPointers(body []byte) ([]string, error) {
	p, err := parsePatch(body)
	return p.changed, err
}

func opPointer(op map[string]json.RawMessage, field string) (string, error) {
	raw, ok := op[field]
	if !ok {
		return "", fmt.Errorf("missing %s", field)
	}
	var p string
	if err := json.Unmarshal(raw, &p); err != nil {
		return "", fmt.Errorf("malformed %s", field)
	}
	if !backend.ValidPointer(p) {
		return "", fmt.Errorf("invalid JSON pointer %q in %s", p, field)
	}
	return p, nil
}

// jobMachine reads the Machine field of a job create body. It decodes into a
// struct, as the job handler does, so that case variants of the field name
// resolve to the same value here and there.
func jobMachine(body []byte) (string, error) {
	var j struct {
		Machine string `json:"Machine"`
	}
	if err := json.Unmarshal(body, &j); err != nil {
		return "", backend.NewError(backend.EBADREQUEST, "POST", "jobs", "", "malformed job: "+err.Error())
	}
	if j.Machine == "" {
		return "", backend.NewError(backend.EBADREQUEST, "POST", "jobs", "", "Create request must have Machine field")
	}
	return j.Machine, nil
}

// envelopeIgnored are fields the server computes (docs/design.md §4.1): a PUT
// body's values are advisory and never change the object.
var envelopeIgnored = map[string]bool{"Validated": true, "Available": true, "Errors": true}

// sanitized are fields GET never returns; a PUT body built from a GET lacks
// them, which is not a request to clear them. A non-empty value is a change.
var sanitized = map[string]bool{"Secret": true, "PasswordHash": true}

// fieldNames holds the top-level JSON field names of each kind's model.
var fieldNames = buildFieldNames()

func buildFieldNames() map[string]map[string]bool {
	out := map[string]map[string]bool{}
	for _, p := range kinds.Prefixes() {
		names := map[string]bool{}
		collectFields(reflect.TypeOf(kinds.Kind(p).New()).Elem(), names)
		out[p] = names
	}
	return out
}

func collectFields(t reflect.Type, names map[string]bool) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == "-" {
			continue
		}
		if f.Anonymous && tag == "" && f.Type.Kind() == reflect.Struct {
			collectFields(f.Type, names)
			continue
		}
		if !f.IsExported() {
			continue
		}
		if tag == "" {
			tag = f.Name
		}
		names[tag] = true
	}
}

// putPointers compares a PUT body with the stored object and returns the
// pointers of the changed leaves, sorted, with the body's values at those
// of them it spells exactly. Objects recurse; arrays and scalars are
// leaves; a member present on one side only is changed.
//
// The top level follows how the object service reads a PUT body: it decodes
// it into the model struct, so an absent field equals its zero value, fields
// the model lacks are dropped, a field name differing only in case sets that
// field (required as a whole, since which spelling wins depends on document
// order), and an empty key field keeps the stored key.
func putPointers(scope, key string, cur, body []byte) ([]string, []Write, error) {
	b, ok := decodeObject(body)
	if !ok {
		return nil, nil, backend.NewError(backend.EBADREQUEST, "PUT", scope, key, "body must be a JSON object")
	}
	c, ok := decodeObject(cur)
	if !ok {
		return nil, nil, &backend.Error{Code: backend.EINTERNAL, Type: "PUT", Model: scope, Key: key,
			Messages: []string{"internal error"}, Err: errors.New("stored object is not a JSON object")}
	}
	kind := kinds.Kind(scope)
	fields := fieldNames[scope]
	skip := func(k string, bv any) bool {
		return envelopeIgnored[k] || ((sanitized[k] || k == kind.KeyField) && isZero(bv))
	}
	set := map[string]bool{}
	for k, bv := range b {
		if fields[k] {
			if !skip(k, bv) && !(isZero(bv) && isZero(c[k])) {
				diff("/"+backend.EscapePointer(k), bv, c[k], set)
			}
			continue
		}
		for f := range fields {
			if strings.EqualFold(k, f) && !skip(f, bv) {
				set["/"+backend.EscapePointer(f)] = true
			}
		}
	}
	for k, cv := range c {
		if _, inBody := b[k]; inBody || !fields[k] || skip(k, nil) {
			continue
		}
		if !isZero(cv) {
			set["/"+backend.EscapePointer(k)] = true
		}
	}
	out := make([]string, 0, len(set))
	for p := range set {
		out = append(out, p)
	}
	sort.Strings(out)
	var written []Write
	for _, p := range out {
		if spellings(b, p) != 1 {
			// Which spelling the model keeps depends on document order.
			continue
		}
		if v, ok := backend.LookupPointer(b, p); ok {
			if raw, err := json.Marshal(v); err == nil {
				written = append(written, Write{Pointer: p, Value: raw})
			}
		}
	}
	return out, written, nil
}

// spellings counts the body's top-level members naming the field of p in
// any case.
func spellings(b map[string]any, p string) int {
	field, _, _ := strings.Cut(strings.TrimPrefix(p, "/"), "/")
	field = backend.UnescapePointer(field)
	n := 0
	for k := range b {
		if strings.EqualFold(k, field) {
			n++
		}
	}
	return n
}

// topLevel reduces pointers to their top-level fields ("/Params/a" to
// "/Params"), deduplicated and sorted.
func topLevel(ptrs []string) []string {
	set := map[string]bool{}
	for _, p := range ptrs {
		if i := strings.IndexByte(p[min(1, len(p)):], '/'); i >= 0 {
			p = p[:i+1]
		}
		set[p] = true
	}
	out := make([]string, 0, len(set))
	for p := range set {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

func decodeObject(data []byte) (map[string]any, bool) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil || m == nil {
		return nil, false
	}
	if _, err := d.Token(); err == nil {
		return nil, false // trailing data
	}
	return m, true
}

func diff(ptr string, a, b any, set map[string]bool) {
	am, aObj := a.(map[string]any)
	bm, bObj := b.(map[string]any)
	if !aObj || !bObj {
		if !jsonEqual(a, b) {
			set[ptr] = true
		}
		return
	}
	for k, av := range am {
		p := ptr + "/" + backend.EscapePointer(k)
		if bv, ok := bm[k]; ok {
			diff(p, av, bv, set)
		} else {
			set[p] = true
		}
	}
	for k := range bm {
		if _, ok := am[k]; !ok {
			set[ptr+"/"+backend.EscapePointer(k)] = true
		}
	}
}

// jsonEqual is deep JSON equality; numbers compare by value, so 1 and 1.0
// are equal.
func jsonEqual(a, b any) bool {
	switch av := a.(type) {
	case nil:
		return b == nil
	case bool, string:
		return a == b
	case json.Number:
		bv, ok := b.(json.Number)
		if !ok {
			return false
		}
		if av == bv {
			return true
		}
		// Values held as any decode to float64, so equal floats are the
		// same stored value; beyond 2^53 distinct spellings stay distinct
		// (fail closed). big.Rat is avoided: "1e999999" would be costly.
		x, errx := strconv.ParseFloat(string(av), 64)
		y, erry := strconv.ParseFloat(string(bv), 64)
		return errx == nil && erry == nil && x == y && math.Abs(x) < 1<<53
	case []any:
		bv, ok := b.([]any)
		if !ok || len(av) != len(bv) {
			return false
		}
		for i := range av {
			if !jsonEqual(av[i], bv[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok || len(av) != len(bv) {
			return false
		}
		for k, x := range av {
			y, ok := bv[k]
			if !ok || !jsonEqual(x, y) {
				return false
			}
		}
		return true
	}
	return false
}

// isZero reports whether v decodes to a Go zero value (or an empty list or
// map, which Fill makes of nil): absent, null, false, 0, "", [], {}.
func isZero(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case bool:
		return !x
	case string:
		return x == ""
	case json.Number:
		f, err := strconv.ParseFloat(string(x), 64)
		return err == nil && f == 0
	case []any:
		return len(x) == 0
	case map[string]any:
		return len(x) == 0
	}
	return false
}
