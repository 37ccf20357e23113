package policydata

import (
	"context"
	"sync"

	"github.com/provgate/provgate/backend"
)

// Revisions reads the store revision, a counter every write to users,
// roles, tenants and settings bumps, and the change log of what each
// revision wrote; *store.Store satisfies it.
type Revisions interface {
	Revision(ctx context.Context) (int64, error)
	// Changes lists the entries with after < Rev <= upto, oldest first;
	// fewer than upto-after entries means the log no longer holds them.
	Changes(ctx context.Context, after, upto int64) ([]backend.Change, error)
}

// MaxIncremental is how many revisions Freshness applies one by one; a
// replica further behind reloads everything.
const MaxIncremental = 1000

// Cache is an in-memory copy of authorization data that Freshness drops
// when the store moves on (auth.SecretCache, auth.TokenCache).
type Cache interface {
	Reset()
}

// Reloader loads data anew (Sync): everything, or only what changes name.
type Reloader interface {
	Refresh(ctx context.Context) error
	Apply(ctx context.Context, changes []backend.Change) error
}

// Freshness keeps every in-memory copy of users, roles, tenants, the
// license and the system secrets in step with the store (docs/design.md
// §14.4). Writes to those bump the store revision; when several replicas
// may share the database (poll), each request reads the revision once and
// reloads when it moved, so a change made through one replica is enforced
// by the others on the very next request. When only this process writes
// the store, local writes reload directly (Refresh) and Check does nothing.
// A reload reads the change log from the revision it holds and applies only
// the roles, tenants and settings written since (Reloader.Apply); it loads
// everything at the first start, when more than MaxIncremental revisions
// passed, or when the log no longer reaches back that far.
type Freshness struct {
	rev    Revisions
	poll   bool
	policy Reloader
	caches []Cache
	// onReload runs after every reload (event streams authenticate again).
	onReload func()
	mu       sync.Mutex
	seen     int64
	loaded   bool
	// full counts complete reloads (the first load included), for tests.
	full int
}

// NewFreshness returns a tracker that reloads policy and resets caches.
func NewFreshness(rev Revisions, poll bool, policy Reloader, caches ...Cache) *Freshness {
	return &Freshness{rev: rev, poll: poll, policy: policy, caches: caches}
}

// OnReload sets fn to run after every reload, a local change or another
// replica's. Call it before the first Check or Refresh.
func (f *Freshness) OnReload(fn func()) { f.onReload = fn }

// Check runs before each request: it reloads when another replica moved
// the revision.
func (f *Freshness) Check(ctx context.Context) error {
	if !f.poll {
		return nil
	}
	rev, err := f.rev.Revision(ctx)
	if err != nil {
		return err
	}
	f.mu.Lock()
	same := rev == f.seen
	f.mu.Unlock()
	if same {
		return nil
	}
	return f.reload(ctx, rev)
}

// Refresh reloads after a local change.
func (f *Freshness) Refresh(ctx context.Context) error {
	rev, err := f.rev.Revision(ctx)
	if err != nil {
		return err
	}
	return f.reload(ctx, rev)
}

func (f *Freshness) reload(ctx context.Context, rev int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.loaded && rev <= f.seen {
		// Another request brought it here, or further, meanwhile.
		return nil
	}
	for _, c := range f.caches {
		c.Reset()
	}
	if !f.loaded || rev-f.seen > MaxIncremental || !f.apply(ctx, rev) {
		f.loaded = false
		if err := f.policy.Refresh(ctx); err != nil {
			return err
		}
		f.full++
	}
	f.seen, f.loaded = rev, true
	if f.onReload != nil {
		f.onReload()
	}
	return nil
}

// apply applies the changes from the held revision to rev, and reports
// whether it could; false asks for a complete reload.
func (f *Freshness) apply(ctx context.Context, rev int64) bool {
	changes, err := f.rev.Changes(ctx, f.seen, rev)
	if err != nil || int64(len(changes)) != rev-f.seen {
		return false
	}
	return f.policy.Apply(ctx, changes) == nil
}

// FullReloads counts complete reloads, the first load included.
func (f *Freshness) FullReloads() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.full
}
