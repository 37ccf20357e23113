// Package access holds the access explorer's answers (docs/design.md
// §9.8): explain, a user's matrix, who can, a tenant's view, role diffs,
// policy diffs, and the AuthZEN Authorization API's wire forms. Every
// answer is built from the one decision function (the gateway's
// authorization of a request, the policy's decision and explain trail);
// this package shapes them and knows nothing of HTTP servers or OPA.
package access

import (
	"encoding/json"

	"github.com/provgate/provgate/backend"
	"github.com/provgate/provgate/policies"
)

// ExplainRequest asks what a request would get, without running it. User
// is whose request it is: the asker itself when empty.
type ExplainRequest struct {
	// Decision, instead of a request, names a logged decision to explain
	// again: its logged input, evaluated at its logged time.
	Decision string          `json:"Decision,omitempty"`
	User     string          `json:"User,omitempty"`
	Method   string          `json:"Method"`
	Path     string          `json:"Path"`
	Body     json.RawMessage `json:"Body,omitempty"`
}

// Explanation answers an ExplainRequest (POST /api/v3/access/explain).
type Explanation struct {
	User   string `json:"User"`
	Method string `json:"Method"`
	Path   string `json:"Path"`
	// Allowed: the policy allows the request.
	Allowed bool `json:"Allowed"`
	// Status is what the request would get: 2xx when it is allowed and its
	// object exists, 403 refused, 404 hidden or missing, 400 or 413 for a
	// request the gateway refuses before deciding.
	Status int `json:"Status"`
	// Messages are the error messages of a request that would fail.
	Messages []string `json:"Messages"`
	// Required are the claims the gateway derives for the request.
	Required []backend.Claim `json:"Required"`
	// Steps, in evaluation order: route, tenant, license, each required
	// claim, extension vetoes, decision.
	Steps []Step `json:"Steps"`
	// Missing are the required claims the user does not hold (or the
	// license does not cover); GrantedBy the roles that would grant them.
	Missing    []backend.Claim `json:"Missing"`
	GrantedBy  []string        `json:"GrantedBy"`
	DecisionID string          `json:"DecisionID"`
	Revision   string          `json:"Revision"`
}

// Step outcomes.
const (
	Pass    = "pass"
	Fail    = "fail"
	Skipped = "not reached"
)

// Step is one step of an explanation.
type Step struct {
	// Step is route, tenant, license, claim, veto or decision.
	Step    string `json:"Step"`
	Outcome string `json:"Outcome"`
	// Detail says what the step found, in words.
	Detail string `json:"Detail"`
	// Claim is the required claim of a claim step; Role and Held the role
	// and its claim that cover it ("self", "direct claim" or a machine
	// token's kind stand in Role for the other grants).
	Claim *backend.Claim `json:"Claim,omitempty"`
	Role  string         `json:"Role,omitempty"`
	Held  string         `json:"Held,omitempty"`
	// GrantedBy are the roles whose claims would cover an uncovered claim.
	GrantedBy []string `json:"GrantedBy,omitempty"`
	// Package and Message name an extension's veto.
	Package string `json:"Package,omitempty"`
	Message string `json:"Message,omitempty"`
}

// Access of a matrix cell.
const (
	All  = "all"
	Some = "some"
	None = "none"
)

// Matrix answers GET /api/v3/access/users/<name>: what the user can do,
// per scope and action.
type Matrix struct {
	User   string        `json:"User"`
	Scopes []ScopeAccess `json:"Scopes"`
}

// ScopeAccess is one scope of a matrix. Restricted: the user's tenant
// restricts the scope; Visible then counts the objects it sees (of those
// the asker may see).
type ScopeAccess struct {
	Scope      string         `json:"Scope"`
	Restricted bool           `json:"Restricted"`
	Visible    int            `json:"Visible"`
	Actions    []ActionAccess `json:"Actions"`
}

// ActionAccess is one cell: all objects, some (Specifics, those the asker
// may see) or none; for update, the JSON pointers held (Pointers).
type ActionAccess struct {
	Action    string          `json:"Action"`
	Access    string          `json:"Access"`
	Specifics []string        `json:"Specifics,omitempty"`
	Pointers  []PointerAccess `json:"Pointers,omitempty"`
}

// PointerAccess is one update:<pointer> (or action:<name>) key the user
// holds beyond the bare action.
type PointerAccess struct {
	Action    string   `json:"Action"`
	Access    string   `json:"Access"`
	Specifics []string `json:"Specifics,omitempty"`
}

// Who answers GET /api/v3/access/who: the users (of those the asker may
// see) who may do Action on Key of Scope, and which kinds of machine and
// job tokens may.
type Who struct {
	Scope  string     `json:"Scope"`
	Action string     `json:"Action"`
	Key    string     `json:"Key"`
	Users  []string   `json:"Users"`
	Tokens []TokenWho `json:"Tokens"`
}

// TokenWho says whether a kind of machine token may: Kind is discovery,
// operations or job (Task names the task whose extra claims a job token
// carries).
type TokenWho struct {
	Kind    string `json:"Kind"`
	Task    string `json:"Task,omitempty"`
	Allowed bool   `json:"Allowed"`
	Detail  string `json:"Detail"`
}

// TenantView answers GET /api/v3/access/tenants/<name>: per scope what the
// tenant's users see: unrestricted, the listed keys (those the asker may
// see) or nothing.
type TenantView struct {
	Tenant string        `json:"Tenant"`
	Users  []string      `json:"Users"`
	Scopes []TenantScope `json:"Scopes"`
}

// Tenant scope visibility.
const (
	Unrestricted = "unrestricted"
	Listed       = "listed"
	Nothing      = "nothing"
)

// TenantScope is one scope of a tenant view. Hidden counts listed keys
// the asker may not see (named nowhere).
type TenantScope struct {
	Scope      string   `json:"Scope"`
	Visibility string   `json:"Visibility"`
	Keys       []string `json:"Keys,omitempty"`
}

// RoleDiff answers GET /api/v3/access/roles/diff: the atomic claims
// (scope action specific) of role A that no claim of role B covers, and
// the other way round.
type RoleDiff struct {
	A     string   `json:"A"`
	B     string   `json:"B"`
	OnlyA []string `json:"OnlyA"`
	OnlyB []string `json:"OnlyB"`
}

// PolicyDiffRequest is POST /api/v3/access/policy/diff: a candidate policy
// (a .tar.gz of a policy directory or an OPA bundle, base64) and how many
// of the newest decision-log lines to replay against it (default 100).
type PolicyDiffRequest struct {
	Archive []byte `json:"Archive"`
	Replay  int    `json:"Replay,omitempty"`
}

// PolicyDiff is what activating a candidate policy would change: each
// user's matrix cells that change (of the users the asker may see), and the
// logged decisions whose outcome would change.
type PolicyDiff struct {
	Revision  string        `json:"Revision"`
	Candidate string        `json:"Candidate"`
	Users     []UserDiff    `json:"Users"`
	Replayed  int           `json:"Replayed"`
	Changed   []ReplayDelta `json:"Changed"`
}

// UserDiff is one user's changed cells.
type UserDiff struct {
	User    string       `json:"User"`
	Changes []CellChange `json:"Changes"`
}

// CellChange is one (scope, action) cell whose access changes: all, some
// or none, before and with the candidate.
type CellChange struct {
	Scope  string `json:"Scope"`
	Action string `json:"Action"`
	Before string `json:"Before"`
	After  string `json:"After"`
}

// ReplayDelta is a logged decision the candidate decides otherwise.
type ReplayDelta struct {
	DecisionID string   `json:"DecisionID"`
	Principal  string   `json:"Principal"`
	Method     string   `json:"Method"`
	Path       string   `json:"Path"`
	Logged     string   `json:"Logged"`
	Candidate  string   `json:"Candidate"`
	Reasons    []string `json:"Reasons"`
}

// Outcome names a decision: allow, deny or not found.
func Outcome(allow, notFound bool) string {
	switch {
	case notFound:
		return "not found"
	case allow:
		return "allow"
	}
	return "deny"
}

// Escalation answers GET /api/v3/access/escalation: the users (of those
// the asker may see) who can hand out authority, each with the grant paths
// open to it (docs/design.md §5.9, §9.8).
type Escalation struct {
	Users []Escalator `json:"Users"`
}

// Escalator is one user who can hand out authority.
type Escalator struct {
	User   string       `json:"User"`
	Routes []GrantRoute `json:"Routes"`
}

// GrantRoute is one way a user hands out authority: the grant path (what
// the write hands out), the claim the write needs (DRP claim form, on every
// object "*" or one the asker may see), and the role and its claim that
// cover it. Delegation marks the explicit delegation actions (roles bind,
// roles escalate, users impersonate, plugins exec), which hand out what
// the user does not hold itself; every other path hands out at most what
// the user holds.
type GrantRoute struct {
	Path       string `json:"Path"`
	Claim      string `json:"Claim"`
	Delegation bool   `json:"Delegation"`
	Role       string `json:"Role"`
	Held       string `json:"Held,omitempty"`
	Detail     string `json:"Detail"`
}

// Grant paths of the escalation report (docs/design.md §5.9).
const (
	PathUserRoles   = "users' Roles"
	PathRoleClaims  = "roles' Claims"
	PathCredentials = "other users' credentials"
	PathTaskExtras  = "tasks' ExtraClaims and ExtraRoles"
	PathPlugins     = "plugins (secret-carrying callbacks, exec auths)"
	PathTenants     = "tenants' Users and Members"
	PathPoolActions = "pools' action groups"
	PathDelegation  = "explicit delegation"
)

// CoverOf names the grant covering a held claim step as TrailSteps does:
// the role (or "self", "direct claim", a token's kind), its claim when the
// role is one see allows, and the words.
func CoverOf(st policies.ClaimStep, see func(scope, name string) bool) (role, held, detail string) {
	if see == nil {
		see = func(string, string) bool { return true }
	}
	return cover(st, see)
}
