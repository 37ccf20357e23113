package policies

// ExplainPath is the policy's explain entry point (policies/explain.rego):
// the trail of data.provgate.authz.decision for the same input.
const ExplainPath = "data.provgate.explain.trail"

// ExplanationPath is the trail as the server reads it
// (policies/explain.rego): {"pass": values} for a request the decision
// allowed in its one pass, the values its trail is written from, or
// {"trail": the trail} for any other. A policy defining it is explained
// through it, one defining only ExplainPath through the trail.
const ExplanationPath = "data.provgate.explain.explanation"

// Trail is what the policy found at each step of one decision
// (docs/design.md §9.8), in evaluation order: tenant visibility, the
// license gate, every required claim, the extensions' vetoes.
type Trail struct {
	Tenant  TenantStep  `json:"tenant"`
	License LicenseStep `json:"license"`
	Claims  []ClaimStep `json:"claims"`
	// VetoesConsulted is true when everything before the vetoes allowed the
	// request: only then does the decision read them.
	VetoesConsulted bool   `json:"vetoes_consulted"`
	Vetoes          []Veto `json:"vetoes"`
}

// TenantStep is tenant visibility: the tenants restricting the principal
// and, for an addressed object they hide, which of them hide it.
type TenantStep struct {
	Tenants  []string `json:"tenants"`
	Hidden   bool     `json:"hidden"`
	HiddenBy []string `json:"hidden_by"`
	// OtherMachine: an operations token addressed another machine.
	OtherMachine bool `json:"other_machine"`
}

// LicenseStep is the license gate.
type LicenseStep struct {
	Licensed bool     `json:"licensed"`
	Failures []string `json:"failures"`
}

// ClaimStep is one required claim: held by the principal's grants (and
// within its token's restriction), licensed, and what covers it.
type ClaimStep struct {
	Claim     ClaimText `json:"claim"`
	Held      bool      `json:"held"`
	Licensed  bool      `json:"licensed"`
	CoveredBy []Cover   `json:"covered_by"`
	// TokenRoles: a token minted for named roles must hold the claim in one
	// of them too.
	TokenRoles TokenRolesStep `json:"token_roles"`
	// Restriction: a token narrowed by claims must hold it inside them.
	Restriction RestrictionStep `json:"restriction"`
	// OwnCredential: the claim changes the principal's own password or
	// Secret, which no restricted token may do.
	OwnCredential bool `json:"own_credential"`
	// GrantedBy are the roles whose claims cover the claim.
	GrantedBy []string `json:"granted_by"`
}

// ClaimText is a claim as the request required it.
type ClaimText struct {
	Scope    string `json:"scope"`
	Action   string `json:"action"`
	Specific string `json:"specific"`
}

// Cover is one grant of the principal that covers a claim: Source is
// "self" (the implicit self claims), "claim" (a direct claim, Claim), "role"
// (Claim of Role) or "machine_token" (the set of token kind Role).
type Cover struct {
	Source string `json:"source"`
	Role   string `json:"role"`
	Claim  string `json:"claim"`
}

// TokenRolesStep reports the roles of a role-restricted token covering a
// claim.
type TokenRolesStep struct {
	Restricted bool     `json:"restricted"`
	CoveredBy  []string `json:"covered_by"`
}

// RestrictionStep reports whether a claim-restricted token covers a claim.
type RestrictionStep struct {
	Restricted bool `json:"restricted"`
	Covered    bool `json:"covered"`
}

// Veto is one extension's refusal: its package (under provgate.ext) and
// message.
type Veto struct {
	Package string `json:"package"`
	Message string `json:"message"`
}

// Explanation is one decision with its trail, as the engine evaluated them
// together (the same input, data and clock).
type Explanation struct {
	Decision Decision
	// Trail is nil when the served policy defines no explain entry point
	// (a replacing policy directory may not).
	Trail *Trail
	// DecisionID names this evaluation; Revision the policy that made it.
	DecisionID string
	Revision   string
}

// Replay says how to evaluate a logged input again as it was decided: at
// the logged time, with the logged answers of non-deterministic built-ins
// (a decision log line's timestamp and nd_builtin_cache). The zero value
// evaluates now.
type Replay struct {
	// At is the time the policy sees (time.now_ns); zero means now.
	At int64 // Unix nanoseconds
	// NDBuiltins is OPA's nd_builtin_cache as logged (JSON), or nil.
	NDBuiltins []byte
}
