package backend

import (
	"context"
	"sort"
	"strings"
)

// Grant is one piece of authority a write hands out (docs/design.md §5.9):
// the claims of a role given to a user, claims written into a role or a
// task, a user's credentials taken over, a token minted for someone else.
// The caller must hold everything it hands out, unless it holds Via, the
// explicit delegation for it, or is Subject itself.
type Grant struct {
	// Claims are handed out as they are.
	Claims []Claim `json:"claims,omitempty"`
	// Had are claims the object already granted before the write: what
	// they contain is not handed out again (a role's old claims, when a
	// write edits it), so a write that narrows needs nothing.
	Had []Claim `json:"had,omitempty"`
	// Role names a role given to a user: its claims, as the policy knows
	// them now, are handed out. A role the policy does not know is handed
	// out only through Via (it would grant whatever it is later made to).
	Role string `json:"role,omitempty"`
	// Roles are roles whose claims are handed out, for Subject (a user
	// whose credentials or tokens are taken over). Unknown ones grant
	// nothing.
	Roles []string `json:"roles,omitempty"`
	// Via is the explicit delegation that allows this grant without holding
	// what it hands out: roles bind <role>, roles escalate <role>, users
	// impersonate <user>.
	Via *Claim `json:"via,omitempty"`
	// Subject is whose authority is handed out (a user or a machine): the
	// subject itself needs nothing, and a tenant-restricted caller may take
	// over only a user of its own tenant (or through Via).
	Subject *Subject `json:"subject,omitempty"`
	// To is the user the grant gives its authority to (a user given
	// roles): a tenant-restricted caller gives it only to a user of its
	// own tenant, whose tenant hides what the caller's hides, or through
	// Via (docs/design.md §5.9).
	To *Subject `json:"to,omitempty"`
}

// Subject names a principal: Kind "user" or "machine", and its name.
type Subject struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
}

// BindClaim allows giving role without holding its claims (docs/design.md
// §5.9).
func BindClaim(role string) *Claim { return &Claim{Scope: "roles", Action: "bind", Specific: role} }

// EscalateClaim allows writing claims into role without holding them.
func EscalateClaim(role string) *Claim {
	return &Claim{Scope: "roles", Action: "escalate", Specific: role}
}

// ImpersonateClaim allows taking over user's credentials and tokens.
func ImpersonateClaim(user string) *Claim {
	return &Claim{Scope: "users", Action: "impersonate", Specific: user}
}

// OperationsClaims are what a machine's operations token can do on and
// around machine, as claims a user can hold (its update claims taken
// whole): receiving such a token, or a job token of the machine, hands
// these out (docs/design.md §8.6, §8.7).
func OperationsClaims(machine string) []Claim {
	return []Claim{
		{Scope: "machines", Action: "get,actions,action:callbackDo,getSecure,updateSecure,update", Specific: machine},
		{Scope: "jobs", Action: "create,get,update,actions,log", Specific: machine},
		{Scope: "params,stages,tasks,info", Action: "get", Specific: "*"},
		{Scope: "events", Action: "post", Specific: "*"},
		{Scope: "reservations", Action: "create", Specific: "*"},
	}
}

// Grantable refuses, as GrantError, a write whose grants hand out claims
// its caller does not hold (docs/design.md §5.9). Server-internal work
// (WithSystem) hands out anything; so does a write with no grants; a ctx
// that declares neither fails closed (ErrNoAccess).
func Grantable(ctx context.Context, prefix, key string, grants ...Grant) error {
	if len(grants) == 0 {
		return nil
	}
	missing, err := Ungranted(ctx, grants...)
	if err != nil {
		return err
	}
	return GrantError(prefix, key, missing)
}

// GrantError is the refusal of a write that would hand out missing: 403,
// one message listing the claims not held in DRP claim form, compacted
// (`cannot grant what you do not hold: machines delete,update *; users
// impersonate bob`). Nil when missing is empty.
func GrantError(prefix, key string, missing []Claim) error {
	if len(missing) == 0 {
		return nil
	}
	parts := make([]string, 0, len(missing))
	for _, c := range CompactClaims(missing) {
		parts = append(parts, c.String())
	}
	return &Error{Code: EFORBIDDEN, Type: "AUTH", Model: prefix, Key: key,
		Messages: []string{"cannot grant what you do not hold: " + strings.Join(parts, "; ")}}
}

// CompactClaims merges claims of one scope and action into one claim
// listing their specifics ("*" absorbs the rest), then claims of one scope
// and specifics into one listing their actions, sorted.
func CompactClaims(cs []Claim) []Claim {
	type sa struct{ scope, action string }
	specs := map[sa]map[string]bool{}
	for _, c := range cs {
		k := sa{c.Scope, c.Action}
		if specs[k] == nil {
			specs[k] = map[string]bool{}
		}
		specs[k][c.Specific] = true
	}
	type ss struct{ scope, specific string }
	actions := map[ss][]string{}
	for k, set := range specs {
		list := make([]string, 0, len(set))
		for s := range set {
			list = append(list, s)
		}
		sort.Strings(list)
		spec := strings.Join(list, ",")
		if set["*"] {
			spec = "*"
		}
		actions[ss{k.scope, spec}] = append(actions[ss{k.scope, spec}], k.action)
	}
	out := make([]Claim, 0, len(actions))
	for k, as := range actions {
		sort.Strings(as)
		out = append(out, Claim{Scope: k.scope, Action: strings.Join(as, ","), Specific: k.specific})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Scope != out[j].Scope {
			return out[i].Scope < out[j].Scope
		}
		if out[i].Specific != out[j].Specific {
			return out[i].Specific < out[j].Specific
		}
		return out[i].Action < out[j].Action
	})
	return out
}
