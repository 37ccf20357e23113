package backend

import (
	"context"
	"errors"
)

// Access answers, for the caller of the current request, questions the
// backend must ask about objects the request did not name itself: the
// profiles, stages, tasks, workflows and pools an object refers to, and the
// machines a pool operation picks. The gateway builds it from the same
// policies that authorized the request and puts it in the request's ctx.
//
// Every check fails closed (docs/design.md §2.3): a ctx that carries no
// Access is refused with ErrNoAccess, never allowed. Server-internal work
// (bootstrap, job bookkeeping, background workers) declares itself with
// WithSystem.
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

// The values a request context carries, each under its own key.
var (
	accessKey    = ctxKey[Access]{"access"}
	principalKey = ctxKey[string]{"principal"}
	tenantKey    = ctxKey[string]{"tenant"}
)

// ctxKey is the key of one value of type T a context carries.
type ctxKey[T any] struct{ name string }

func (k ctxKey[T]) with(ctx context.Context, v T) context.Context {
	return context.WithValue(ctx, k, v)
}

// from is the value ctx carries under k, or T's zero value.
func (k ctxKey[T]) from(ctx context.Context) T {
	v, _ := ctx.Value(k).(T)
	return v
}

// WithAccess returns ctx carrying a.
func WithAccess(ctx context.Context, a Access) context.Context {
	return accessKey.with(ctx, a)
}

// AccessFrom returns the Access ctx carries: the request's caller, the
// system Access of WithSystem, or nil when nothing was declared (which every
// check refuses).
func AccessFrom(ctx context.Context) Access {
	return accessKey.from(ctx)
}

// system is the Access of server-internal work: it sees every object and
// holds every claim.
type system struct{}

func (system) CanSee(context.Context, string, string) (bool, error) { return true, nil }
func (system) Can(context.Context, ...Claim) (bool, error)          { return true, nil }
func (system) Ungranted(context.Context, ...Grant) ([]Claim, error) { return nil, nil }

// WithSystem declares ctx as server-internal work (bootstrap, workers, job
// bookkeeping, relays): its checks are not restricted to any caller. Only
// work no request drives may declare it; a request's ctx already carries its
// caller's Access, which this replaces.
func WithSystem(ctx context.Context) context.Context {
	return WithAccess(ctx, system{})
}

// IsSystem reports whether ctx was declared with WithSystem.
func IsSystem(ctx context.Context) bool {
	_, ok := AccessFrom(ctx).(system)
	return ok
}

// ErrNoAccess is the refusal of a check whose ctx declares neither a
// caller's Access nor system work: a code path that lost (or never set) its
// declaration. It is an internal error (500), so that tests find the path.
var ErrNoAccess = errors.New("no access declared: neither a request's caller nor system work")

func noAccess(what string) error {
	return &Error{Code: EINTERNAL, Type: "AUTH", Messages: []string{"authorization failed"},
		Err: errors.Join(ErrNoAccess, errors.New(what))}
}

// CanSee is AccessFrom(ctx).CanSee; false with ErrNoAccess when ctx
// carries no Access.
func CanSee(ctx context.Context, scope, key string) (bool, error) {
	a := AccessFrom(ctx)
	if a == nil {
		return false, noAccess("may see " + scope + "/" + key)
	}
	return a.CanSee(ctx, scope, key)
}

// Can is AccessFrom(ctx).Can; false with ErrNoAccess when ctx carries no
// Access.
func Can(ctx context.Context, claims ...Claim) (bool, error) {
	a := AccessFrom(ctx)
	if a == nil {
		what := "holds claims"
		if len(claims) > 0 {
			what = "holds " + claims[0].String()
		}
		return false, noAccess(what)
	}
	return a.Can(ctx, claims...)
}

// Ungranted is AccessFrom(ctx).Ungranted; ErrNoAccess when ctx carries no
// Access.
func Ungranted(ctx context.Context, grants ...Grant) ([]Claim, error) {
	a := AccessFrom(ctx)
	if a == nil {
		return nil, noAccess("may hand out grants")
	}
	return a.Ungranted(ctx, grants...)
}

// WithPrincipal records who makes the change ("user:bob", "runner:<uuid>");
// it goes into the Principal of the events the change publishes.
func WithPrincipal(ctx context.Context, p string) context.Context {
	return principalKey.with(ctx, p)
}

// PrincipalFrom is the principal WithPrincipal recorded, "" for none.
func PrincipalFrom(ctx context.Context) string {
	return principalKey.from(ctx)
}

// WithTenant records the caller's tenant: objects it creates in a scope the
// tenant restricts are appended to the tenant's Members (docs/design.md §6).
func WithTenant(ctx context.Context, tenant string) context.Context {
	return tenantKey.with(ctx, tenant)
}

// TenantFrom is the tenant WithTenant recorded, "" for none.
func TenantFrom(ctx context.Context) string {
	return tenantKey.from(ctx)
}
