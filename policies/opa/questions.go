package opa

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/storage"

	"github.com/provgate/provgate/policies"
)

// Questions decides each input as Question does, deciding users that
// provably get the same answer once (docs/design.md §9.8): inputs that
// differ only by the user's name, for users of the same tenant, when the
// served policy reads a user's name only as the embedded policy does
// (nameBlind) and nothing else in the input names the user. The grouping
// and the decisions see one data revision: a data write or a policy reload
// during the batch makes it start again.
func (e *Engine) Questions(ctx context.Context, ins []policies.Input) ([]policies.Decision, error) {
	for range 3 {
		p := e.policy.Load()
		seq := e.dataSeq.Load()
		if !p.nameBlind || seq%2 == 1 {
			break
		}
		out, err := e.questionsGrouped(ctx, ins)
		if err != nil {
			return nil, err
		}
		if e.policy.Load() == p && e.dataSeq.Load() == seq {
			return out, nil
		}
	}
	out := make([]policies.Decision, len(ins))
	for i, in := range ins {
		d, err := e.Question(ctx, in)
		if err != nil {
			return nil, err
		}
		out[i] = d
	}
	return out, nil
}

// questionsGrouped decides the first input of each group, on as many
// goroutines as there are CPUs, and gives its decision to the group's
// other members.
func (e *Engine) questionsGrouped(ctx context.Context, ins []policies.Input) ([]policies.Decision, error) {
	tenants, err := e.userTenants(ctx)
	if err != nil {
		return nil, err
	}
	keys := make([][sha256.Size]byte, len(ins))
	grouped := make([]bool, len(ins))
	onCPUs(len(ins), func(i int) { keys[i], grouped[i] = groupKey(ins[i], tenants) })
	rep := make([]int, len(ins)) // the input whose decision ins[i] gets
	var decide []int
	reps := map[[sha256.Size]byte]int{}
	for i := range ins {
		rep[i] = i
		if grouped[i] {
			if r, seen := reps[keys[i]]; seen {
				rep[i] = r
				continue
			}
			reps[keys[i]] = i
		}
		decide = append(decide, i)
	}
	out := make([]policies.Decision, len(ins))
	errs := make([]error, len(ins))
	onCPUs(len(decide), func(j int) {
		i := decide[j]
		if grouped[i] {
			// Cached under the group's key: the next batch finds it for
			// whichever member comes first.
			out[i], errs[i] = e.decideKeyed(ctx, ins[i], nil, &keys[i])
			return
		}
		out[i], errs[i] = e.Question(ctx, ins[i])
	})
	for i := range ins {
		if errs[i] != nil {
			return nil, errs[i]
		}
		if rep[i] != i {
			out[i] = out[rep[i]].Clone()
		}
	}
	return out, nil
}

// onCPUs runs fn(0..n-1) on as many goroutines as there are CPUs.
func onCPUs(n int, fn func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				j := int(next.Add(1)) - 1
				if j >= n {
					return
				}
				fn(j)
			}
		}()
	}
	wg.Wait()
}

// groupKey is what decides in, the user's name aside: the input without
// the name, and the user's tenant (data.provgate.user_tenant, the one
// place the policy looks a user's name up). The hashed bytes hold a zero
// byte, which no JSON encoding of an input does, so a group's key is
// never an input's own in the decision cache. ok is false for an input whose
// other parts could name the user: its object, a required specific, a
// list (whose visible keys hold the user's own name), stored or proposed
// objects, grants, a grantor.
func groupKey(in policies.Input, tenants map[string]string) (key [sha256.Size]byte, ok bool) {
	name := in.Principal.Name
	if in.Principal.Kind != "user" || name == "" || in.Principal.Grantor != "" || in.List != nil ||
		in.Stored != nil || in.Proposed != nil || len(in.Grants) > 0 {
		return key, false
	}
	if in.Object != nil && strings.Contains(in.Object.Key, name) {
		return key, false
	}
	for _, c := range in.Required {
		if strings.Contains(c.Specific, name) {
			return key, false
		}
	}
	in.Principal.Name = ""
	raw, err := json.Marshal(in)
	if err != nil {
		return key, false
	}
	h := sha256.New()
	h.Write(raw)
	h.Write([]byte{0})
	h.Write([]byte(tenants[name]))
	copy(key[:], h.Sum(nil))
	return key, true
}

// userTenants reads data.provgate.user_tenant: user name → tenant.
func (e *Engine) userTenants(ctx context.Context) (map[string]string, error) {
	txn, err := e.store.NewTransaction(ctx)
	if err != nil {
		return nil, internal("read policy data", err)
	}
	defer e.store.Abort(ctx, txn)
	v, err := e.store.Read(ctx, txn, storage.Path{"provgate", "user_tenant"})
	if storage.IsNotFound(err) {
		return map[string]string{}, nil
	}
	if err != nil {
		return nil, internal("read policy data", err)
	}
	out := map[string]string{}
	obj, ok := v.(ast.Object)
	if !ok {
		if m, isMap := v.(map[string]any); isMap {
			for k, t := range m {
				s, _ := t.(string)
				out[k] = s
			}
			return out, nil
		}
		return nil, internal("read policy data", errUndefined)
	}
	err = obj.Iter(func(k, t *ast.Term) error {
		ks, kok := k.Value.(ast.String)
		ts, tok := t.Value.(ast.String)
		if kok && tok {
			out[string(ks)] = string(ts)
		}
		return nil
	})
	return out, err
}

// principalNameBlind reports whether the compiled policy reads a user's
// name (or grantor) only as the embedded policy does: to look its tenant
// up (data.provgate.user_tenant) and to compare it with the input's object
// key and required specifics (its self claims). TestEmbeddedNameReads pins
// the embedded rules that read it. Any other module served unchanged from
// the embedded policy is trusted; every other module must not read
// input.principal.name or .grantor, input or input.principal as a whole or
// by a computed key, data or data.provgate as a whole, nor the embedded
// rules that hand the name on (the packages provgate.grants, .authz and
// .explain).
func principalNameBlind(c *ast.Compiler, sources map[string]string) bool {
	embedded := policies.Policies()
	blind := true
	var vis *ast.GenericVisitor
	vis = ast.NewGenericVisitor(func(x any) bool {
		switch v := x.(type) {
		case ast.Ref:
			if !nameBlindRef(v) {
				blind = false
			}
			for _, t := range v[1:] {
				vis.Walk(t)
			}
			return true
		case ast.Var:
			if v.Equal(ast.InputRootDocument.Value) || v.Equal(ast.DefaultRootDocument.Value) {
				blind = false
			}
		}
		return false
	})
	for name, m := range c.Modules {
		if src, ok := embedded[name]; ok && sources[name] == src {
			continue
		}
		vis.Walk(m)
	}
	return blind
}

// nameBlindRef: ref r reads neither the principal's name nor anything that
// hands it on.
func nameBlindRef(r ast.Ref) bool {
	str := func(i int) (string, bool) {
		if len(r) <= i {
			return "", false
		}
		s, ok := r[i].Value.(ast.String)
		return string(s), ok
	}
	// under: below the root's key, a ref to one of reading (or one too
	// short to tell) may read the name; any other ref does not.
	under := func(key string, reading ...string) bool {
		k, ok := str(1)
		if !ok {
			return false
		}
		if k != key {
			return true
		}
		f, ok := str(2)
		return ok && !slices.Contains(reading, f)
	}
	switch {
	case r[0].Equal(ast.InputRootDocument):
		return under("principal", "name", "grantor")
	case r[0].Equal(ast.DefaultRootDocument):
		return under("provgate", "grants", "authz", "explain")
	}
	return true
}
