package backend

import "sort"

// Scopes is every claim scope and the actions valid in it (docs/design.md §5.1,
// DRP's allScopes). A claim's "*" action means exactly these actions.
var Scopes = map[string][]string{}

func init() {
	std := []string{"action", "actions", "create", "delete", "get", "list", "update"}
	for _, s := range []string{"bootenvs", "catalog_items", "contexts", "endpoints", "interfaces", "leases",
		"params", "plugin_providers", "pools", "reservations", "subnets", "tasks", "templates",
		"tenants", "version_sets", "workflows"} {
		Scopes[s] = std
	}
	// provgate adds the explicit delegations (docs/design.md §5.9): bind
	// (give a role without holding its claims) and escalate (write claims
	// into a role without holding them).
	Scopes["roles"] = []string{"action", "actions", "bind", "create", "delete", "escalate", "get", "list", "update"}
	Scopes["jobs"] = []string{"action", "actions", "create", "delete", "get", "list", "log", "update"}
	Scopes["machines"] = []string{"action", "actions", "create", "delete", "get", "getSecure", "list", "token",
		"update", "updateSecure", "updateTaskList", "whoami"}
	for _, s := range []string{"profiles", "stages"} {
		Scopes[s] = []string{"action", "actions", "create", "delete", "get", "getSecure", "list", "update", "updateSecure"}
	}
	// provgate adds exec: configuring a callback exec auth, which runs a
	// program on the server (docs/design.md §12.5).
	Scopes["plugins"] = []string{"action", "actions", "create", "delete", "exec", "get", "getSecure", "list", "update", "updateSecure"}
	// provgate adds impersonate: taking over a user's credentials or
	// minting its tokens without holding what it holds (docs/design.md §5.9).
	Scopes["users"] = []string{"action", "actions", "create", "delete", "get", "impersonate", "list", "password", "token", "update"}
	Scopes["preferences"] = []string{"list", "post"}
	Scopes["contents"] = []string{"create", "delete", "get", "list", "update"}
	Scopes["files"] = []string{"delete", "get", "list", "post"}
	Scopes["isos"] = []string{"delete", "get", "list", "post"}
	Scopes["info"] = []string{"get"}
	Scopes["objects"] = []string{"list"}
	// provgate adds "action" so system actions (rotateSecret) are claimable.
	Scopes["system"] = []string{"action", "active", "passive", "replicate", "upgrade"}
	// provgate additions: license management and system secret rotation.
	Scopes["events"] = []string{"list", "post"}
	Scopes["license"] = []string{"get", "update"}
}

// ValidScope reports whether s is a known scope.
func ValidScope(s string) bool { _, ok := Scopes[s]; return ok }

// ValidAction reports whether action is valid in scope. Only the part before
// the first ':' is checked (action:<name>, update:<pointer>).
func ValidAction(scope, action string) bool {
	base := action
	for i := 0; i < len(action); i++ {
		if action[i] == ':' {
			base = action[:i]
			break
		}
	}
	for _, a := range Scopes[scope] {
		if a == base {
			return true
		}
	}
	return false
}

// ScopeNames returns the scopes, sorted.
func ScopeNames() []string {
	out := make([]string, 0, len(Scopes))
	for s := range Scopes {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}
