package backend

import "context"

// Access answers, for the caller of the current request, questions the
// backend must ask about objects the request did not name itself: the
// profiles, stages, tasks, workflows and pools an object refers to, and the
// machines a pool operation picks. The gateway builds it from the same
// policies that authorized the request and puts it in the request's ctx.
//
// A ctx without an Access is server-internal work (bootstrap, job
// bookkeeping, background workers) and is not restricted.
type Access interface {
	// CanSee reports whether the caller may see scope/key: its tenant shows
	// it and one of its claims grants get on it. A hidden object must be
	// treated exactly like a missing one, in results and in messages.
	CanSee(ctx context.Context, scope, key string) (bool, error)
	// Can reports whether the caller holds every one of claims.
	Can(ctx context.Context, claims ...Claim) (bool, error)
	// Ungranted returns what grants would hand out that the caller does
	// not hold (docs/design.md §5.9), as atomic claims (one scope, one
	// action, one specific or "*"): empty when the caller may hand out
	// all of it. Held means allowed by the caller's token now, self claims
	// not counted; machine and job tokens hold nothing to hand out. One
	// policy query answers all of grants.
	Ungranted(ctx context.Context, grants ...Grant) ([]Claim, error)
}

type accessKey struct{}

// WithAccess returns ctx carrying a.
func WithAccess(ctx context.Context, a Access) context.Context {
	return context.WithValue(ctx, accessKey{}, a)
}

// AccessFrom returns the caller's Access, or nil for server-internal work.
func AccessFrom(ctx context.Context) Access {
	a, _ := ctx.Value(accessKey{}).(Access)
	return a
}

// CanSee is AccessFrom(ctx).CanSee, true when ctx carries no Access.
func CanSee(ctx context.Context, scope, key string) (bool, error) {
	a := AccessFrom(ctx)
	if a == nil {
		return true, nil
	}
	return a.CanSee(ctx, scope, key)
}

type principalKey struct{}

type tenantKey struct{}

// WithPrincipal records who makes the change ("user:bob", "runner:<uuid>");
// it goes into the Principal of the events the change publishes.
func WithPrincipal(ctx context.Context, p string) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom is the principal WithPrincipal recorded, "" for none.
func PrincipalFrom(ctx context.Context) string {
	p, _ := ctx.Value(principalKey{}).(string)
	return p
}

// WithTenant records the caller's tenant: objects it creates in a scope the
// tenant restricts are appended to the tenant's Members (docs/design.md §6).
func WithTenant(ctx context.Context, tenant string) context.Context {
	return context.WithValue(ctx, tenantKey{}, tenant)
}

// TenantFrom is the tenant WithTenant recorded, "" for none.
func TenantFrom(ctx context.Context) string {
	t, _ := ctx.Value(tenantKey{}).(string)
	return t
}
