package gateway

import (
	"context"
	"encoding/json"
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

// Deps are the services the gateway calls. A nil service leaves the rows
// of the route table it serves out of the router ("No route"); without
// Auth, Policy and Resolver every /api/v3 request answers 503. A partially
// wired server thus fails closed.
type Deps struct {
	// Kinds is the kind and scope catalog cmd built (docs/design.md §1.4);
	// nil builds one.
	Kinds    *backend.Catalog
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
	// diff; nil serves no policy diff.
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

// Users covers the user routes beyond CRUD: tokens, passwords, Secrets.
type Users interface {
	// Token issues a token for user name, granted by the caller (token request
	// rules: docs/design.md §8.5, §5.6).
	Token(ctx context.Context, name string, grantor *auth.Principal, req auth.TokenRequest) (auth.IssuedToken, error)
	ChangePassword(ctx context.Context, name, password string) (backend.Model, error)
	RotateSecret(ctx context.Context, name string) error
	RotateSystemSecret(ctx context.Context) error
}

// Pools covers pool membership operations and reports.
type Pools interface {
	Active(ctx context.Context, visible []string) ([]string, error)
	Status(ctx context.Context, pool string, visible []string) (map[string][]backend.PoolResult, error)
	Op(ctx context.Context, verb backend.PoolVerb, pool string, body []byte, opts backend.PoolOptions) ([]backend.PoolResult, error)
	// ReleaseToPool releases the one machine the request addressed (and the
	// guard authorized).
	ReleaseToPool(ctx context.Context, machineKey string) ([]backend.PoolResult, error)
}

// Actions covers plugin providers and plugin actions.
type Actions interface {
	Providers() []backend.PluginProvider
	List(ctx context.Context, prefix, key, plugin string) ([]backend.AvailableAction, error)
	// Run runs action cmd with the action parameters the request body
	// gave, as JSON values by name.
	Run(ctx context.Context, prefix, key, cmd, plugin string, params map[string]json.RawMessage) (json.RawMessage, error)
	Attempts(ctx context.Context, plugin string, machine string, limit int) ([]backend.CallbackAttempt, error)
}

// Jobs covers job creation and logs beyond CRUD.
type Jobs interface {
	// CreateJob answers a job request: the machine's next job, if any, and
	// what the agent got.
	CreateJob(ctx context.Context, body []byte) (backend.JobOutcome, *backend.Job, error)
	JobLog(ctx context.Context, key string) ([]byte, error)
	AppendJobLog(ctx context.Context, key string, chunk []byte) error
}

// JobTokens mints the token the agent gives a job's task scripts
// (docs/design.md §8.7).
type JobTokens interface {
	// JobToken returns job's token for creator, "" when creator may not
	// have one. It also fills job.ExtraClaims from the task.
	JobToken(ctx context.Context, job *backend.Job, creator *auth.Principal) (string, error)
}

// JobActions renders a job's task templates for the agent.
type JobActions interface {
	JobActions(ctx context.Context, key, os string) ([]backend.JobAction, error)
}

// Prefs covers server preferences.
type Prefs interface {
	Prefs(ctx context.Context) (map[string]string, error)
	SetPrefs(ctx context.Context, p map[string]string) (map[string]string, error)
}

// Licenser reports and replaces the license (docs/design.md §7).
type Licenser interface {
	LicenseState(ctx context.Context) backend.LicenseState
	LoadLicense(ctx context.Context, doc string) (backend.LicenseState, error)
}

// Events publishes posted events.
type Events interface {
	PostEvent(ctx context.Context, e backend.Event) error
}
