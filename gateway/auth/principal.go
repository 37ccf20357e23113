package auth

import (
	"time"

	"github.com/provgate/provgate/backend"
)

// Kind is the kind of a principal: a user or a machine.
type Kind string

// Principal kinds.
const (
	KindUser    Kind = "user"
	KindMachine Kind = "machine"
)

// MachineTokenKind is what a machine token may do (docs/design.md §8.6).
type MachineTokenKind string

// Machine token kinds.
const (
	MachineDiscovery  MachineTokenKind = "discovery"
	MachineOperations MachineTokenKind = "operations"
)

// Method is how a principal authenticated.
type Method string

// Authentication methods: Basic credentials, a user's Bearer token, a
// machine's Bearer token.
const (
	MethodBasic   Method = "basic"
	MethodBearer  Method = "bearer"
	MethodMachine Method = "machine"
)

const (
	// SystemGrantor grants every machine token (docs/design.md §8.6).
	SystemGrantor = "system"
	// UnknownMachine is the subject of discovery tokens minted for a machine
	// the server does not know yet; DRP uses the same user id.
	UnknownMachine = "general"
)

// Principal is who a request acts for: the one type authentication
// produces, the gateway authorizes and audit logs read. The gateway turns
// it into policies.Principal (Kind, Name, Roles, TokenRoles, Restrict and
// MachineToken keep their meanings there); the policies add the implicit
// self claims of users.
type Principal struct {
	// Kind is KindUser or KindMachine.
	Kind Kind
	// Name is the user name, or the machine UUID (UnknownMachine for
	// discovery tokens of unknown machines).
	Name string
	// Grantor is the user that asked for the token, the user itself for
	// Basic, and SystemGrantor for machine tokens.
	Grantor string
	// Roles are a user's roles as read during authentication, from the
	// current user record for tokens as for Basic: a role taken from the
	// user ends it for every token of the user at the next request (the
	// gateway drops its cached users and tokens on every user, role or
	// tenant change).
	Roles []string
	// TokenRoles, when RoleRestricted, are the roles the token was minted
	// for (roles=). They narrow Roles, never add to them: a claim must be
	// held by one of TokenRoles and by one of Roles.
	TokenRoles     []string
	RoleRestricted bool
	// Restrict, when non-empty, narrows the principal: every required claim
	// must also be contained by one of these.
	Restrict []backend.Claim
	// MachineToken is MachineDiscovery or MachineOperations for machines.
	MachineToken MachineTokenKind
	// Method is how the principal authenticated.
	Method Method
	// IssuedAt is the token's issue time; zero for Basic.
	IssuedAt time.Time
	// ExpiresAt is the token's expiry; zero for Basic.
	ExpiresAt time.Time
	// TokenID is the token's jti, for audit logs; empty for Basic.
	TokenID string
	// Job is the job a job token was minted for (docs/design.md §8.7): a
	// machine operations principal whose token ends with the job. Claims
	// are the extra claims its task grants, beside the operations set.
	Job    string
	Claims []backend.Claim
}

// IsUser reports whether p is a user.
func (p *Principal) IsUser() bool { return p != nil && p.Kind == KindUser }

// IsMachine reports whether p is a machine.
func (p *Principal) IsMachine() bool { return p != nil && p.Kind == KindMachine }

// Subject names p wherever a principal is named (events, logs, stream
// admission, the change's author): "user:<name>", or "runner:<uuid>" for
// a machine, as DRP writes it.
func (p *Principal) Subject() string {
	if p.IsMachine() {
		return "runner:" + p.Name
	}
	return "user:" + p.Name
}
