package policydata_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/provgate/provgate/backend"
	"github.com/provgate/provgate/backend/store/storetest"
	"github.com/provgate/provgate/policies"
	"github.com/provgate/provgate/policies/policydata"
)

type fixedLicense backend.LicenseState

func (l fixedLicense) LicenseState(context.Context) backend.LicenseState {
	return backend.LicenseState(l)
}

// engine keeps the last data it was given.
type engine struct {
	d   policies.Data
	n   int
	err error
}

func (e *engine) PatchData(context.Context, []policies.DataPatch) error {
	return errors.New("not used")
}

func (e *engine) SetData(_ context.Context, d policies.Data) error {
	e.n++
	if e.err != nil {
		return e.err
	}
	e.d = d
	return nil
}

func TestSync(t *testing.T) {
	for _, c := range storetest.Open(t) {
		t.Run(c.Name, func(t *testing.T) {
			ctx := context.Background()
			put := func(prefix, key string, v any) {
				b, err := json.Marshal(v)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := c.Store.Create(ctx, prefix, key, b); err != nil {
					t.Fatal(err)
				}
			}
			put("roles", "ops", backend.Role{Name: "ops", Claims: []backend.Claim{{Scope: "machines", Action: "get", Specific: "*"}}})
			put("tenants", "t1", backend.Tenant{Name: "t1", Users: []string{"bob"}, Members: map[string][]string{"machines": {"m1"}}})
			e := &engine{}
			s := policydata.NewSync(c.Store, fixedLicense{Valid: true, Features: []string{"rbac"}}, e, backend.NewCatalog())
			if got := s.TenantOf("bob"); got != "" {
				t.Fatalf("tenant before the first refresh: %q", got)
			}
			if err := s.Refresh(ctx); err != nil {
				t.Fatal(err)
			}
			if _, ok := e.d.Roles["ops"]; !ok || len(e.d.Roles) != 1 {
				t.Fatalf("roles %v", e.d.Roles)
			}
			if !e.d.License.Valid || len(e.d.License.Features) != 1 || e.d.License.Features[0] != "rbac" {
				t.Fatalf("license %+v", e.d.License)
			}
			if s.TenantOf("bob") != "t1" || s.TenantOf("alice") != "" {
				t.Fatalf("tenants: bob %q, alice %q", s.TenantOf("bob"), s.TenantOf("alice"))
			}
			// An engine that refuses the data keeps the tenants it had.
			e.err = errors.New("refused")
			if err := s.Refresh(ctx); err == nil || s.TenantOf("bob") != "t1" {
				t.Fatalf("refused data: %v, bob in %q", err, s.TenantOf("bob"))
			}
		})
	}
}

type revisions struct {
	rev int64
	err error
}

func (r *revisions) Revision(context.Context) (int64, error) { return r.rev, r.err }

// Changes reports nothing, so every reload is a complete one.
func (r *revisions) Changes(context.Context, int64, int64) ([]backend.Change, error) {
	return nil, r.err
}

type cache struct{ resets int }

func (c *cache) Reset() { c.resets++ }

type reloader struct{ n int }

func (r *reloader) Refresh(context.Context) error { r.n++; return nil }

func (r *reloader) Apply(context.Context, []backend.Change) error { return errors.New("not used") }

func TestFreshness(t *testing.T) {
	ctx := context.Background()
	rev, c1, c2, pol := &revisions{rev: 1}, &cache{}, &cache{}, &reloader{}
	f := policydata.NewFreshness(rev, true, pol, c1, c2)
	if err := f.Refresh(ctx); err != nil || pol.n != 1 || c1.resets != 1 || c2.resets != 1 {
		t.Fatalf("refresh: %v, reloads %d, resets %d %d", err, pol.n, c1.resets, c2.resets)
	}
	// The same revision: nothing to do.
	if err := f.Check(ctx); err != nil || pol.n != 1 || c1.resets != 1 {
		t.Fatalf("check at the same revision reloaded: %v, %d", err, pol.n)
	}
	// Another replica wrote.
	rev.rev = 2
	if err := f.Check(ctx); err != nil || pol.n != 2 || c1.resets != 2 || c2.resets != 2 {
		t.Fatalf("check after a write: %v, reloads %d, resets %d %d", err, pol.n, c1.resets, c2.resets)
	}
	// An unreadable revision is an error, never a silent pass.
	rev.err = errors.New("db down")
	if err := f.Check(ctx); err == nil {
		t.Fatal("check passed without reading the revision")
	}
	// Without polling (one process owns the store) Check reads nothing.
	g := policydata.NewFreshness(rev, false, pol, c1)
	if err := g.Check(ctx); err != nil || pol.n != 2 {
		t.Fatalf("check without polling: %v, %d", err, pol.n)
	}
}

// changeLog is a store revision with a change log that may have been pruned.
type changeLog struct {
	rev    int64
	oldest int64 // entries before this revision are gone
}

func (c *changeLog) Revision(context.Context) (int64, error) { return c.rev, nil }

func (c *changeLog) Changes(_ context.Context, after, upto int64) ([]backend.Change, error) {
	var out []backend.Change
	for r := max(after+1, c.oldest); r <= upto; r++ {
		out = append(out, backend.Change{Rev: r, Prefix: backend.PrefixRoles, Key: "r"})
	}
	return out, nil
}

// applier counts complete loads and applied changes.
type applier struct {
	loads   int
	applied []int64
	fail    bool
}

func (a *applier) Refresh(context.Context) error { a.loads++; return nil }

func (a *applier) Apply(_ context.Context, cs []backend.Change) error {
	if a.fail {
		return errors.New("patch refused")
	}
	for _, c := range cs {
		a.applied = append(a.applied, c.Rev)
	}
	return nil
}

// TestFreshnessIncremental: after the first complete load, a moved revision
// is applied from the change log, entry by entry; a log that no longer
// reaches back, a replica more than MaxIncremental behind, or a refused
// patch loads everything again. Caches are reset on every reload.
func TestFreshnessIncremental(t *testing.T) {
	ctx := context.Background()
	log, a, c := &changeLog{rev: 5, oldest: 1}, &applier{}, &cache{}
	f := policydata.NewFreshness(log, true, a, c)
	if err := f.Refresh(ctx); err != nil || a.loads != 1 || len(a.applied) != 0 {
		t.Fatalf("first load: %v, loads %d, applied %v", err, a.loads, a.applied)
	}
	log.rev = 8
	if err := f.Check(ctx); err != nil || a.loads != 1 || len(a.applied) != 3 || a.applied[0] != 6 || c.resets != 2 {
		t.Fatalf("three writes: %v, loads %d, applied %v, resets %d", err, a.loads, a.applied, c.resets)
	}
	// Nothing moved: nothing to do, even when asked to refresh.
	if err := f.Refresh(ctx); err != nil || a.loads != 1 || len(a.applied) != 3 || c.resets != 2 {
		t.Fatalf("refresh at the same revision: %v, loads %d, applied %v", err, a.loads, a.applied)
	}
	// The log was pruned past the held revision.
	log.rev, log.oldest = 12, 10
	if err := f.Check(ctx); err != nil || a.loads != 2 || len(a.applied) != 3 {
		t.Fatalf("pruned log: %v, loads %d, applied %v", err, a.loads, a.applied)
	}
	// Too far behind.
	log.rev, log.oldest = 12+policydata.MaxIncremental+1, 1
	if err := f.Check(ctx); err != nil || a.loads != 3 || len(a.applied) != 3 {
		t.Fatalf("far behind: %v, loads %d, applied %v", err, a.loads, a.applied)
	}
	// A patch the engine refuses: everything is loaded instead.
	a.fail = true
	log.rev++
	if err := f.Check(ctx); err != nil || a.loads != 4 || f.FullReloads() != 4 {
		t.Fatalf("refused patch: %v, loads %d, full %d", err, a.loads, f.FullReloads())
	}
}
