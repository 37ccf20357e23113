package policydata

import (
	"context"
	"sync"
)

// Revisions reads the store revision, a counter every write to users,
// roles, tenants and settings bumps; *store.Store satisfies it.
type Revisions interface {
	Revision(ctx context.Context) (int64, error)
}

// Cache is an in-memory copy of authorization data that Freshness drops
// when the store moves on (auth.SecretCache, auth.TokenCache).
type Cache interface {
	Reset()
}

// Reloader loads data anew (Sync).
type Reloader interface {
	Refresh(ctx context.Context) error
}

// Freshness keeps every in-memory copy of users, roles, tenants, the
// license and the system secrets in step with the store (docs/design.md
// §14.4). Writes to those bump the store revision; when several replicas
// may share the database (poll), each request reads the revision once and
// reloads when it moved, so a change made through one replica is enforced
// by the others on the very next request. When only this process writes
// the store, local writes reload directly (Refresh) and Check does nothing.
type Freshness struct {
	rev    Revisions
	poll   bool
	policy Reloader
	caches []Cache
	// onReload runs after every reload (event streams authenticate again).
	onReload func()
	mu       sync.Mutex
	seen     int64
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
	for _, c := range f.caches {
		c.Reset()
	}
	if err := f.policy.Refresh(ctx); err != nil {
		return err
	}
	f.seen = rev
	if f.onReload != nil {
		f.onReload()
	}
	return nil
}
