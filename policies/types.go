// Package policies holds provgate's Rego policies (embedded) and the Go
// types of their input and decision. The Rego files are the authority: a
// security team reads, edits and tests them with `opa test policies/`.
package policies

import "github.com/provgate/provgate/backend"

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
	// Claims are direct claims the token carries besides its roles.
	Claims []backend.Claim `json:"claims"`
	// Restrict, when non-empty, narrows the token: every required claim must
	// also be contained by one of these (token scope/action/specific).
	Restrict []backend.Claim `json:"restrict,omitempty"`
	// MachineToken is "discovery" or "operations" for machine tokens.
	MachineToken string `json:"machine_token,omitempty"`
	// ReservationKey is the key of a machine's own reservation (the hex
	// form of its address), which an operations token may manage
	// (docs/design.md §8.6). Empty leaves that claim out.
	ReservationKey string `json:"reservation_key,omitempty"`
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
}

// ListRequest asks which objects of Scope are visible.
type ListRequest struct {
	Scope string `json:"scope"`
}

// Visible says which objects of a scope a list may return.
type Visible struct {
	// Restricted false means every object.
	Restricted bool `json:"restricted"`
	// Keys are the visible keys when Restricted.
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
	// the machine's operations token sees.
	MachineTenants map[string][]string `json:"machine_tenants"`
	License        LicenseData         `json:"license"`
	// Scopes is backend.Scopes: the actions valid in each scope.
	Scopes map[string][]string `json:"scopes"`
}

// RoleData is one role as the policy sees it.
type RoleData struct {
	Claims []backend.Claim `json:"claims"`
	// Compiled holds Claims in compiled form (see CompileClaim), one entry
	// per claim, so that a decision does no string splitting. When absent
	// the policy compiles Claims itself.
	Compiled []CompiledClaim `json:"compiled,omitempty"`
	// Index answers "does this role hold action key k on scope s" with one
	// lookup (see IndexClaims). When absent the policy walks Compiled.
	Index CompiledClaim `json:"index,omitempty"`
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

// DataPatch is one change to data.provgate, applied with others in one
// step (opa Engine.PatchData): the value at Path (below data.provgate) is
// set to Value, or removed when Remove is true.
type DataPatch struct {
	Path   []string
	Value  any
	Remove bool
}
