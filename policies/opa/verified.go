package opa

import (
	"crypto/sha256"
	"encoding/json"
	"maps"
	"slices"
	"sync"

	"github.com/open-policy-agent/opa/v1/ast"
)

// verifiedMax bounds the contents a Verified remembers; the oldest go
// first.
const verifiedMax = 64

// Verified remembers the policies whose Rego suites passed, by what the
// suites depend on (suiteKey): the policy and test modules, the extension
// data and TestClock. The suites are deterministic in that (the clock is
// fixed), so loading the same policy again, in a later reload or in
// another engine of the process, needs no second run: the guarantee that a policy is
// served only after its tests pass holds (docs/design.md §9.3). Two
// loads of one content at once run its suites once. Failures are not
// remembered: a failed run is run again. A Verified is safe for concurrent
// use; engines of one process may share one (Options.Verified).
type Verified struct {
	mu      sync.Mutex
	entries map[[sha256.Size]byte]*verifiedEntry
	order   [][sha256.Size]byte // passed contents, oldest first
}

type verifiedEntry struct {
	done   chan struct{} // closed when the run ends
	passed bool
}

// NewVerified returns an empty Verified.
func NewVerified() *Verified {
	return &Verified{entries: map[[sha256.Size]byte]*verifiedEntry{}}
}

// run calls suites unless the content of key already passed, or waits for
// a run of the same content in progress and takes its pass.
func (v *Verified) run(key [sha256.Size]byte, suites func() error) error {
	for {
		v.mu.Lock()
		e, ok := v.entries[key]
		if !ok {
			e = &verifiedEntry{done: make(chan struct{})}
			v.entries[key] = e
			v.mu.Unlock()
			err := suites()
			v.finish(key, e, err == nil)
			return err
		}
		v.mu.Unlock()
		<-e.done
		if e.passed {
			return nil
		}
		// The other run failed (perhaps its context ended): run again.
	}
}

func (v *Verified) finish(key [sha256.Size]byte, e *verifiedEntry, passed bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	e.passed = passed
	close(e.done)
	if !passed {
		delete(v.entries, key)
		return
	}
	v.order = append(v.order, key)
	if len(v.order) > verifiedMax {
		delete(v.entries, v.order[0])
		v.order = v.order[1:]
	}
}

// suiteKey names what a suite run depends on: each parsed module (its
// rules, imports and METADATA annotations, in the form ast.Module.String
// prints, which leaves out comments and positions), whether it is a test,
// the extension data and TestClock. Files that differ only in comments
// and layout are one policy to its tests.
func suiteKey(mods map[string]*ast.Module, tests map[string]string, extData map[string]any) ([sha256.Size]byte, error) {
	h := sha256.New()
	for _, n := range slices.Sorted(maps.Keys(mods)) {
		_, test := tests[n]
		src := mods[n].String()
		// Lengths first, so that no two different sets of files hash
		// alike.
		b, _ := json.Marshal([]any{test, len(n), n, len(src)})
		h.Write(b)
		h.Write([]byte(src))
	}
	data, err := json.Marshal(extData) // map keys are sorted
	if err != nil {
		return [sha256.Size]byte{}, err
	}
	b, _ := json.Marshal([]any{"data", len(data), TestClock.UnixNano()})
	h.Write(b)
	h.Write(data)
	var key [sha256.Size]byte
	h.Sum(key[:0])
	return key, nil
}
