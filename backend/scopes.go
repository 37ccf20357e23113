package backend

// scopeTable returns every claim scope and the actions valid in it
// (docs/design.md §5.1, DRP's allScopes); see Catalog. A claim's "*"
// action means exactly these actions.
func scopeTable() map[string][]string {
	scopes := map[string][]string{}
	std := []string{"action", "actions", "create", "delete", "get", "list", "update"}
	for _, s := range []string{"bootenvs", "catalog_items", "contexts", "endpoints", "interfaces", "leases",
		"params", "plugin_providers", "pools", "reservations", "subnets", "tasks", "templates",
		"tenants", "version_sets", "workflows"} {
		scopes[s] = std
	}
	// provgate adds the explicit delegations (docs/design.md §5.9): bind
	// (give a role without holding its claims) and escalate (write claims
	// into a role without holding them).
	scopes["roles"] = []string{"action", "actions", "bind", "create", "delete", "escalate", "get", "list", "update"}
	scopes["jobs"] = []string{"action", "actions", "create", "delete", "get", "list", "log", "update"}
	scopes["machines"] = []string{"action", "actions", "create", "delete", "get", "getSecure", "list", "token",
		"update", "updateSecure", "updateTaskList", "whoami"}
	for _, s := range []string{"profiles", "stages"} {
		scopes[s] = []string{"action", "actions", "create", "delete", "get", "getSecure", "list", "update", "updateSecure"}
	}
	// provgate adds exec: configuring a callback exec auth, which runs a
	// program on the server (docs/design.md §12.5).
	scopes["plugins"] = []string{"action", "actions", "create", "delete", "exec", "get", "getSecure", "list", "update", "updateSecure"}
	// provgate adds impersonate: taking over a user's credentials or
	// minting its tokens without holding what it holds (docs/design.md §5.9).
	scopes["users"] = []string{"action", "actions", "create", "delete", "get", "impersonate", "list", "password", "token", "update"}
	scopes["preferences"] = []string{"list", "post"}
	scopes["contents"] = []string{"create", "delete", "get", "list", "update"}
	scopes["files"] = []string{"delete", "get", "list", "post"}
	scopes["isos"] = []string{"delete", "get", "list", "post"}
	scopes["info"] = []string{"get"}
	scopes["objects"] = []string{"list"}
	// provgate adds "action" so system actions (rotateSecret) are claimable.
	scopes["system"] = []string{"action", "active", "passive", "replicate", "upgrade"}
	// provgate additions: license management and system secret rotation.
	scopes["events"] = []string{"list", "post"}
	scopes["license"] = []string{"get", "update"}
	return scopes
}
