package gateway

import (
	"context"
	"time"

	"github.com/provgate/provgate/backend"
	"github.com/provgate/provgate/gateway/auth"
	"github.com/provgate/provgate/gateway/claims"
	"github.com/provgate/provgate/policies"
)

// policyPrincipal is the principal as the policies see it.
func policyPrincipal(p *auth.Principal) policies.Principal {
	roles := p.Roles
	if roles == nil {
		roles = []string{}
	}
	var tokenRoles []string
	if p.RoleRestricted {
		tokenRoles = append([]string{}, p.TokenRoles...)
	}
	claims := []backend.Claim{}
	if p.IsMachine() {
		claims = append(claims, p.Claims...)
	}
	out := policies.Principal{Kind: string(p.Kind), Name: p.Name, Roles: roles, TokenRoles: tokenRoles, Claims: claims,
		Restrict: p.Restrict, MachineToken: string(p.MachineToken), Auth: policyAuth(p)}
	if p.IsMachine() && p.Job != "" {
		// A job token is restricted by its creator's tenant too
		// (docs/design.md §8.7).
		out.Grantor = p.Grantor
	}
	return out
}

// policyAuth is how p authenticated, as the policies see it: the method
// and, for a token, its kind, iat, exp and jti.
func policyAuth(p *auth.Principal) *policies.Auth {
	if p.Method == "" {
		return nil
	}
	a := &policies.Auth{Method: string(p.Method)}
	if p.Method == auth.MethodBasic {
		return a
	}
	switch {
	case p.IsUser():
		a.Kind = policies.TokenUser
	case p.Job != "":
		a.Kind = policies.TokenJob
	default:
		a.Kind = policies.TokenMachine
	}
	if !p.IssuedAt.IsZero() {
		a.IssuedAt = p.IssuedAt.Unix()
	}
	if !p.ExpiresAt.IsZero() {
		a.ExpiresAt = p.ExpiresAt.Unix()
	}
	a.ID = p.TokenID
	return a
}

// Authenticator checks credentials (docs/design.md §8).
type Authenticator interface {
	Authenticate(ctx context.Context, header, clientIP string) (*auth.Principal, error)
}

// Decider evaluates the policies (docs/design.md §9). It fails closed: an error is
// a refusal with status 500. The visible keys of the decision it returns are
// read-only: the decision cache shares them (policies.Visible).
type Decider interface {
	Decide(ctx context.Context, in policies.Input) (policies.Decision, error)
}

// Deps are the services the gateway calls. Nil services leave their routes
// answering 503, so a partially wired server still fails closed.
type Deps struct {
	Auth     Authenticator
	Policy   Decider
	Resolver claims.Resolver
	License  Licenser
	Objects  Objects
	// Params serves the params sub-resources.
	Params Params
	// Sync reloads the policy data (roles, tenants, users, license) after
	// a change; nil when the decider holds no data.
	Sync PolicySync
	// Fresh, when set, runs before authentication on every request so that
	// in-memory copies of users, roles, tenants and secrets are current
	// (several replicas may share one database).
	Fresh Freshener

	Users   Users
	Pools   Pools
	Actions Actions
	Jobs    Jobs
	// JobTokens mints job tokens for job creations; nil mints none.
	JobTokens JobTokens
	// JobActions renders job actions (task templates).
	JobActions JobActions
	Prefs      Prefs
	Events     Events
	// Streams serves GET /ws, the websocket event stream.
	Streams Streams
	// TenantOf names a user's tenant ("" for none).
	TenantOf func(user string) string
	// LoginTarpit delays each 429 answer to a refused login flood.
	LoginTarpit time.Duration
	// BenchRoute enables the unauthenticated benchmark baseline route.
	BenchRoute bool
	// DecisionLog is the decision log file (--decision-log), read back by
	// the access explorer's recent denials; "" for none.
	DecisionLog string
	// Candidates loads a candidate policy for the access explorer's policy
	// diff; nil answers 503.
	Candidates Candidates
	// Store is checked by /readyz; nil answers 503 there.
	Store Pinger
	// Callbacks counts callback attempts and jobfail deliveries for the
	// metrics; nil exports none.
	Callbacks CallbackCounter
}

// policyListInput asks which objects of scope the principal may see.
func policyListInput(p *auth.Principal, scope string) policies.Input {
	return policies.Input{Principal: policyPrincipal(p), Required: []backend.Claim{},
		List: &policies.ListRequest{Scope: scope}, Operation: "list"}
}

// Freshener brings cached authorization data up to date.
type Freshener interface {
	Check(ctx context.Context) error
}

// PolicySync reloads what the policies know about roles, tenants and users.
type PolicySync interface {
	Refresh(ctx context.Context) error
}

// Licenser reports and replaces the license (docs/design.md §7).
type Licenser interface {
	LicenseState(ctx context.Context) backend.LicenseState
	LoadLicense(ctx context.Context, doc string) (backend.LicenseState, error)
}
