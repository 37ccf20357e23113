package opa

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sync"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage/inmem"

	"github.com/provgate/provgate/backend"
	"github.com/provgate/provgate/policies"
)

// plainVeto is an extension refusing one user's writes, so that the one
// pass of authz.plainly_allowed meets a veto too.
const plainVeto = `package provgate.ext.plainveto

deny contains "vetoed" if {
	input.principal.name == "vera"
	input.method != "GET"
}
`

// plainWorld is the world both one-pass comparisons run over: roles,
// tenants, the principals, the scopes, actions and specifics of wanted
// claims, and objects, and the embedded policy compiled with an extension
// that vetoes.
type plainWorld struct {
	compiler   *ast.Compiler
	roles      []backend.Role
	tenants    []backend.Tenant
	principals []policies.Principal
	scopes     []string
	actions    []string
	specifics  []string
	objects    []*policies.Object
}

func newPlainWorld(t *testing.T) plainWorld {
	t.Helper()
	roles := []backend.Role{
		{Name: "superuser", Claims: []backend.Claim{claim("*", "*", "*")}},
		{Name: "params", Claims: []backend.Claim{claim("machines", "get,list,update:/Params", "m1,m2,m3"), claim("pools", "*", "p1")}},
		{Name: "exact", Claims: []backend.Claim{claim("machines", "update:/Params/a", "m2"), claim("machines", "update", "*")}},
		{Name: "actions", Claims: []backend.Claim{claim("machines", "action", "m1"), claim("machines", "action:x", "m2")}},
		{Name: "rbac", Claims: []backend.Claim{claim("roles,tenants", "list,get,update", "*")}},
		{Name: "users", Claims: []backend.Claim{claim("users", "*", "*"), claim("info", "get", "*")}},
		{Name: "empty"},
	}
	tenants := []backend.Tenant{
		{Name: "t1", Members: map[string][]string{"machines": {"m1", "m2"}}, Users: []string{"tina", "vera"}},
		{Name: "t2", Members: map[string][]string{"pools": {"p2"}, "machines": {}}, Users: []string{"tom"}},
		{Name: "t3", Members: map[string][]string{"pools": {"p1"}}, Users: []string{"una"}},
	}
	var principals []policies.Principal
	for _, name := range []string{"tina", "tom", "una", "noel", "vera"} {
		for _, rs := range [][]string{{"superuser"}, {"params", "exact"}, {"exact", "actions"}, {"rbac", "users"}, {"empty", "missing"}, {"params", "superuser"}} {
			principals = append(principals, user(name, rs...))
		}
	}
	restricted := user("noel", "params", "exact")
	restricted.TokenRoles = []string{"params"}
	principals = append(principals, restricted)
	restricted = user("tina", "superuser")
	restricted.Restrict = []backend.Claim{claim("machines", "get", "*")}
	principals = append(principals, restricted, policies.Principal{Kind: "machine", Name: "m1", MachineToken: "operations"})
	direct := user("noel")
	direct.Claims = []backend.Claim{claim("machines", "get", "m1")}
	principals = append(principals, direct)
	// Direct claims beside roles: the pass can allow through a role
	// while a direct claim covers too.
	direct = user("noel", "params", "exact")
	direct.Claims = []backend.Claim{claim("machines", "get,update", "m1,m3")}
	principals = append(principals, direct)
	// The same on every object of two scopes, so that any sample of the
	// world holds requests the pass allows while a direct claim covers.
	direct = user("una", "superuser")
	direct.Claims = []backend.Claim{claim("machines,pools", "*", "*")}
	principals = append(principals, direct)

	objects := []*policies.Object{nil, {Scope: "machines", Key: "m1"}, {Scope: "machines", Key: "m3"}, {Scope: "pools", Key: "p1"}, {Scope: "roles", Key: "params"}}

	files := policies.Policies()
	files["plainveto.rego"] = plainVeto
	c := compileFiles(t, files)
	return plainWorld{
		compiler: c, roles: roles, tenants: tenants, principals: principals, objects: objects,
		scopes: []string{"machines", "pools", "roles", "tenants", "users", "info", "bogus"},
		actions: []string{"get", "list", "update", "update:", "update:/Params", "update:/Params/a",
			"update:/Params/a/b", "update:/Name", "update:Params", "action", "action:x", "password", "bogus"},
		specifics: []string{"", "m1", "m2", "p1", "noel", "*"},
	}
}

// prepare prepares query against the world's data with license lic.
func (w plainWorld) prepare(t *testing.T, lic policies.LicenseData, query string) rego.PreparedEvalQuery {
	t.Helper()
	store := inmem.NewFromObject(map[string]any{"provgate": toAny(policies.NewData(w.roles, w.tenants, lic))})
	pq, err := rego.New(rego.Query(query), rego.Compiler(w.compiler), rego.Store(store)).PrepareForEval(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return pq
}

// sample calls fn with a stratified sample of the world's requests, as
// policy inputs. Every cell (principal, scope, action) is asked, each
// with 3 of its 30 pairs of specific and object; the 13 cells of one
// principal and scope take the pairs of one random permutation in turn,
// so that each principal asks in each scope with every specific on every
// object. Which action meets which pair is what the seed picks: runs
// with other seeds cover the rest of the world.
func (w plainWorld) sample(t *testing.T, rng *rand.Rand, fn func(in policies.Input, value ast.Value)) {
	t.Helper()
	pairs := len(w.specifics) * len(w.objects)
	for _, p := range w.principals {
		for _, scope := range w.scopes {
			strata(rng, len(w.actions), perCell(len(w.actions), pairs), pairs, func(cell, pair int) {
				c := claim(scope, w.actions[cell], w.specifics[pair/len(w.objects)])
				i := pair % len(w.objects)
				in := request(p, c)
				in.Object, in.Method = w.objects[i], "PATCH"
				if i%2 == 0 {
					in.Method = "GET"
				}
				if c.Action == "get" && c.Specific == "m2" {
					// Two claims: never decided by the pass.
					in.Required = append(in.Required, claim("machines", "get", "m1"))
				}
				value, err := inputValue(in)
				if err != nil {
					t.Fatal(err)
				}
				fn(in, value)
			})
		}
	}
}

// plainTally is what one license's walk over the sample found.
type plainTally struct {
	lic policies.LicenseData
	// passed and other count the requests the one pass decided and
	// those outcome decided alone; agree is the first request where
	// decision, outcome and the pass disagree, if any.
	passed, other int
	agree         string
	// compared counts the allowed requests whose trails were compared,
	// written those of them the one pass allowed, and covers the covers
	// their trails name, by source; trail is the first request whose
	// written-out trail differs from the steps' trail, if any.
	compared, written int
	covers            map[string]int
	trail             string
}

// plainWalk is one walk over a sample of the world for both licenses. The
// two comparisons ask of every request the same decision, so one walk
// serves both tests: the test that walks leaves the walk for the other
// one, which takes it; a test that finds no walk left by the other test
// walks anew (so either test run alone, or run again by -count, walks
// itself).
type plainWalk struct {
	by      string
	seed    uint64
	tallies []plainTally
}

var plainWalks struct {
	mu   sync.Mutex
	left *plainWalk
}

// sharedPlainWalk returns the walk the other comparison left, or walks.
func sharedPlainWalk(t *testing.T) *plainWalk {
	t.Helper()
	plainWalks.mu.Lock()
	defer plainWalks.mu.Unlock()
	if w := plainWalks.left; w != nil && w.by != t.Name() {
		plainWalks.left = nil
		t.Logf("the sample %s walked, seed %d (%s=%d replays it)", w.by, w.seed, seedEnv, w.seed)
		return w
	}
	w := walkPlainWorld(t)
	plainWalks.left = w
	return w
}

// walkPlainWorld asks of every request of a sample of the world, for both
// licenses, the decision, outcome and whether the one pass allows; of
// the allowed requests it also asks the written-out trail and the step
// rules' trail.
func walkPlainWorld(t *testing.T) *plainWalk {
	t.Helper()
	ctx := context.Background()
	world := newPlainWorld(t)
	rng, seed := sampleRand(t, "plainWorld")
	walk := &plainWalk{by: t.Name(), seed: seed}
	const trails = `x := [data.provgate.explain.trail, {
		"tenant": data.provgate.explain.tenant_step,
		"license": data.provgate.explain.license_step,
		"claims": [data.provgate.explain.claim_step(c) | some c in input.required],
		"vetoes_consulted": data.provgate.explain.vetoes_consulted,
		"vetoes": data.provgate.explain.veto_steps,
	}, data.provgate.explain.explanation]`
	// One sample for both licenses, so that each request is compared
	// under both.
	var inputs []policies.Input
	var values []ast.Value
	world.sample(t, rng, func(in policies.Input, value ast.Value) {
		inputs, values = append(inputs, in), append(values, value)
	})
	for _, lic := range []policies.LicenseData{{Valid: true, Features: []string{"rbac"}}, {}} {
		decided := world.prepare(t, lic, "x := [data.provgate.authz.decision, data.provgate.authz.outcome, {true | data.provgate.authz.plainly_allowed}]")
		steps := world.prepare(t, lic, trails)
		licensed := world.prepare(t, lic, LicensedPath)
		tally := plainTally{lic: lic, covers: map[string]int{}}
		for j, in := range inputs {
			p, obj, value := in.Principal, in.Object, values[j]
			rs, err := decided.Eval(ctx, rego.EvalParsedInput(value))
			if err != nil || len(rs) != 1 {
				t.Fatalf("%+v: %v %v", in, rs, err)
			}
			got := rs[0].Bindings["x"].([]any)
			if tally.agree == "" && !reflect.DeepEqual(got[0], got[1]) {
				tally.agree = fmt.Sprintf("%+v %v %v: decision %v, outcome %v", p, in.Required, obj, got[0], got[1])
			}
			plainly := len(got[2].([]any)) == 1
			if plainly {
				tally.passed++
				if d, _ := decisionValue(got[1]); !d.Allow && tally.agree == "" {
					tally.agree = fmt.Sprintf("%+v %v %v: plainly allowed, outcome %v", p, in.Required, obj, got[1])
				}
			} else {
				tally.other++
			}
			if got[0].(map[string]any)["allow"] != true {
				continue
			}
			tally.compared++
			rs, err = steps.Eval(ctx, rego.EvalParsedInput(value), rego.EvalGenerateJSON(asTerm))
			if err != nil || len(rs) != 1 {
				t.Fatalf("%+v: %v %v", in, rs, err)
			}
			trail := rs[0].Bindings["x"].(*ast.Term).Value.(*ast.Array)
			if tally.trail == "" && !trail.Elem(0).Equal(trail.Elem(1)) {
				tally.trail = fmt.Sprintf("%+v %v %v:\ntrail %v\nsteps %v", p, in.Required, obj, trail.Elem(0), trail.Elem(1))
			}
			stepped, err := trailFrom(trail.Elem(1))
			if err != nil {
				t.Fatal(err)
			}
			written, err := explanationFrom(trail.Elem(2), in, func() (bool, error) {
				rs, err := licensed.Eval(ctx)
				return err == nil && len(rs) == 1 && rs[0].Expressions[0].Value == true, err
			})
			if err != nil {
				t.Fatalf("%+v %v %v: %v", p, in.Required, obj, err)
			}
			if tally.trail == "" && !reflect.DeepEqual(written, stepped) {
				tally.trail = fmt.Sprintf("%+v %v %v:\nexplanation %v\nwritten %+v\nsteps %+v", p, in.Required, obj, trail.Elem(2), written, stepped)
			}
			if plainly {
				tally.written++
				if _, ok := trail.Elem(2).Value.(ast.Object).Get(ast.StringTerm("pass")).Value.(ast.Object); !ok && tally.trail == "" {
					tally.trail = fmt.Sprintf("%+v %v %v: plainly allowed, explained by %v", p, in.Required, obj, trail.Elem(2))
				}
				for _, step := range written.Claims {
					for _, c := range step.CoveredBy {
						tally.covers[c.Source]++
					}
				}
			}
		}
		walk.tallies = append(walk.tallies, tally)
	}
	return walk
}

// authz.plainly_allowed decides the common request in one pass; outcome
// decides every request step by step. Wherever the pass allows, outcome
// must allow too, so the decision equals outcome for every request that
// is not a list. Compared here over principals (tenants, token roles,
// restrictions, machines, vetoes, direct claims), objects the tenant
// lists or hides, wanted claims of every form, and both licenses; the
// pass must also actually decide some of them, or the comparison would
// say nothing. Each run compares a sample (plainWorld.sample): every
// principal, scope and action, and in each scope every specific on every
// object, with the pairing drawn from the logged seed.
func TestPlainlyAllowedAgreesWithOutcome(t *testing.T) {
	for _, tally := range sharedPlainWalk(t).tallies {
		if tally.agree != "" {
			t.Fatal(tally.agree)
		}
		lic := tally.lic
		t.Logf("license %v: %d decided by the one pass, %d by outcome alone", lic.Valid, tally.passed, tally.other)
		if tally.passed < 100 || tally.other < 100 {
			t.Errorf("license %v: %d decided by the one pass, %d by outcome alone: the comparison needs both", lic.Valid, tally.passed, tally.other)
		}
	}
}

// For every request the one pass allows, the explain trail is written
// from its lookups: by the policy's trail (policies/explain.rego) and, from
// the values the explanation hands over, by the server (explanationFrom).
// Both must be the trail the step rules give (tenant_step, license_step,
// claim_step, veto_steps). Compared for every allowed request of the
// sample, so that the other written-out trail (an allowed request of an
// unrestricted token) and the explanation that carries a whole trail are
// compared as well. A refused request's trail is the step rules' own
// (explain.rego's last branch), so comparing it would compare the steps
// with themselves: only allowed requests are compared, by the decision the
// walk asks for TestPlainlyAllowedAgreesWithOutcome too.
func TestExplainTrailIsTheStepsTrail(t *testing.T) {
	for _, tally := range sharedPlainWalk(t).tallies {
		if tally.trail != "" {
			t.Fatal(tally.trail)
		}
		lic, passed, covers := tally.lic, tally.written, tally.covers
		t.Logf("license %v: %d allowed requests compared, %d trails written for the one pass, naming covers %v", lic.Valid, tally.compared, passed, covers)
		if passed < 100 || tally.compared <= passed || covers["role"] <= passed || covers["self"] == 0 || covers["claim"] == 0 {
			t.Errorf("license %v: %d trails written for the one pass, covers %v: the comparison needs them", lic.Valid, passed, covers)
		}
	}
}
