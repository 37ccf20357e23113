// Package policies holds provgate's Rego policies (embedded) and the Go
// types of their input and decision. The Rego files are the authority: a
// security team reads, edits and tests them with `opa test policies/`.
package policies

import (
	"context"

	"github.com/provgate/provgate/backend"
)

// Principal is who is asking, as authentication established it.
type Principal struct {
	// Kind is "user" or "machine".
	Kind string `json:"kind"`
	// Name is the user name, or the machine UUID for machine tokens.
	Name string `json:"name"`
	// Roles are the role names the principal holds: a user's current roles,
	// as authentication read them from the user record (resolved against
	// data.provgate.roles at decision time, so role edits apply at once).
	Roles []string `json:"roles"`
	// TokenRoles, when not nil, are the roles a token was restricted to
	// (roles=): every claim must also be held by one of them, besides one of
	// Roles. Nil (JSON null) means the token names no roles; an empty list
	// restricts the token to its self claims.
	TokenRoles []string `json:"token_roles"`
	// Claims are direct claims a job token carries besides its machine's
	// operations set (docs/design.md §8.7); empty for every other principal.
	Claims []backend.Claim `json:"claims"`
	// Restrict, when non-empty, narrows the token: every required claim must
	// also be contained by one of these (token scope/action/specific).
	Restrict []backend.Claim `json:"restrict,omitempty"`
	// MachineToken is "discovery" or "operations" for machine tokens.
	MachineToken string `json:"machine_token,omitempty"`
	// Grantor is set for job tokens only: the user that asked for the
	// token ("system" when its machine did), whose tenant restricts the
	// token too (docs/design.md §8.7).
	Grantor string `json:"grantor,omitempty"`
	// Auth says how the principal authenticated and, for tokens, which token
	// it presented. Nil only for inputs built outside a request (tests).
	Auth *Auth `json:"auth,omitempty"`
}

// Authentication methods (Auth.Method).
const (
	AuthBasic   = "basic"
	AuthBearer  = "bearer"
	AuthMachine = "machine"
)

// Token kinds (Auth.Kind).
const (
	TokenUser    = "user"
	TokenMachine = "machine"
	TokenJob     = "job"
)

// Auth is the credential a request presented. Times are Unix seconds, as in
// the token itself (JWT NumericDate); they, ID and Kind are absent for Basic.
type Auth struct {
	// Method is AuthBasic (a password), AuthBearer (a user's token) or
	// AuthMachine (a machine or job token).
	Method string `json:"method"`
	// Kind is TokenUser, TokenMachine or TokenJob; empty for Basic.
	Kind string `json:"kind,omitempty"`
	// IssuedAt is the token's iat; 0 (absent) for Basic.
	IssuedAt int64 `json:"iat,omitempty"`
	// ExpiresAt is the token's exp; 0 (absent) for Basic.
	ExpiresAt int64 `json:"exp,omitempty"`
	// ID is the token's jti (not a secret: it names the token in audit logs).
	ID string `json:"jti,omitempty"`
}

// Object names the object a request addresses, for tenant visibility.
type Object struct {
	Scope string `json:"scope"`
	Key   string `json:"key"`
}

// Input is the whole input document of data.provgate.authz.decision.
type Input struct {
	Principal Principal `json:"principal"`
	// Required are the claims the request needs (gateway/claims derives them).
	Required []backend.Claim `json:"required"`
	// Object is the addressed object, when the request names one.
	Object *Object `json:"object,omitempty"`
	// List is set for collection reads: the decision then says which objects
	// of Scope the principal may see (Visible).
	List *ListRequest `json:"list,omitempty"`
	// Operation is DRP's name of the operation (create, patch, update,
	// delete, action:<x>...), used in license refusal messages.
	Operation string `json:"operation"`
	Method    string `json:"method"`
	Path      string `json:"path"`
	// Stored is the addressed object as stored (get, update, delete,
	// actions, params), as the object service returns it: PasswordHash and
	// Secret stripped, secure param values masked (MaskedValue), never
	// decoded. Filled only when the policy reads input.stored (see
	// Engine.Needs) and the object exists.
	Stored map[string]any `json:"stored,omitempty"`
	// Proposed is the object as the request would leave it: the body of a
	// create or PUT, the stored object with a PATCH or param write applied.
	// Credentials (Password, PasswordHash, Secret) and secure param values
	// are masked (MaskedValue). Filled only when the policy reads
	// input.proposed.
	Proposed map[string]any `json:"proposed,omitempty"`
	// Grants are what a write hands out, in the input of the grant check
	// (data.provgate.grants.ungranted, docs/design.md §5.9) only; the
	// other fields but Principal are then empty.
	Grants []backend.Grant `json:"grants,omitempty"`
}

// MaskedValue stands in the input for the value of a secure param, stored
// (sealed) or proposed (as the client sent it).
func MaskedValue() map[string]any { return map[string]any{"masked": true} }

// Needs says which costly parts of the input a policy reads, so that the
// gateway loads an object only for a policy that looks at it.
type Needs struct {
	Stored   bool
	Proposed bool
}

// ListRequest asks which objects of Scope are visible.
type ListRequest struct {
	Scope string `json:"scope"`
}

// Visible says which objects of a scope a list may return.
type Visible struct {
	// Restricted false means every object.
	Restricted bool `json:"restricted"`
	// Keys are the visible keys when Restricted. They are read-only:
	// copies of a decision share them (Decision.Clone).
	Keys []string `json:"keys"`
}

// Decision is the result of data.provgate.authz.decision.
type Decision struct {
	Allow bool `json:"allow"`
	// Reasons explain a refusal: "Requires: pools update:/Description p1",
	// "roles create is a licensed enterprise feature", never a secret.
	Reasons []string `json:"reasons"`
	// NotFound is set when the addressed object is hidden from the principal
	// by its tenant: the gateway answers 404, as if it did not exist.
	NotFound bool `json:"not_found"`
	// Visible is set for list requests.
	Visible *Visible `json:"visible,omitempty"`
}

// Data is what Go loads into the OPA store under data.provgate.
type Data struct {
	Roles   map[string]RoleData   `json:"roles"`
	Tenants map[string]TenantData `json:"tenants"`
	// UserTenant maps each tenant user to its tenant.
	UserTenant map[string]string `json:"user_tenant"`
	// MachineTenants maps each machine UUID a tenant lists in
	// Members["machines"] to those tenants, sorted: they all restrict what
	// the machine's operations token sees. The machines are spread over
	// shards (MachineShard → UUID → tenants) so that changing one machine's
	// entry costs the same in a fleet of any size (docs/design.md §14.4).
	MachineTenants map[string]map[string][]string `json:"machine_tenants"`
	License        LicenseData                    `json:"license"`
	// Scopes are the actions valid in each scope
	// (backend.Catalog.ScopeActions).
	Scopes map[string][]string `json:"scopes"`
	// RolesIndexed says every role has its Index (set by Normalized):
	// the explain trail then names what covers a claim from the indexes.
	RolesIndexed bool `json:"roles_indexed,omitempty"`
}

// RoleData is one role as the policy sees it.
type RoleData struct {
	Claims []backend.Claim `json:"claims"`
	// Compiled holds Claims in compiled form (see CompileClaim), one entry
	// per claim, so that a decision does no string splitting. When absent
	// the policy compiles Claims itself.
	Compiled []CompiledClaim `json:"compiled,omitempty"`
	// Index answers "does this role hold action key k on scope s" with one
	// lookup (see IndexClaims), and which claims grant it. When absent
	// the policy walks Compiled.
	Index Index `json:"index,omitempty"`
}

// TenantData is one tenant as the policy sees it.
type TenantData struct {
	Members map[string][]string `json:"members"`
	Users   []string            `json:"users"`
	// MemberSet is Members as sets, for lookups by key. When absent the
	// policy searches Members.
	MemberSet map[string]map[string]bool `json:"member_set,omitempty"`
}

// LicenseData is the verified license state.
type LicenseData struct {
	Valid    bool     `json:"valid"`
	Features []string `json:"features"`
}

type requestIDKey struct{}

// WithRequestID returns ctx carrying the request id (X-Request-Id), which
// decision log lines name.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// RequestID returns the request id WithRequestID stored in ctx, or "".
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// DataPatch is one change to data.provgate, applied with others in one
// step (opa Engine.PatchData): the value at Path (below data.provgate) is
// set to Value, or removed when Remove is true.
type DataPatch struct {
	Path   []string
	Value  any
	Remove bool
}
