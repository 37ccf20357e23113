# provgate's authorization decision. The gateway queries
# data.provgate.authz.decision with a policies.Input and reads a
# policies.Decision; data.provgate has the shape of policies.Data.
#
# Order (docs/design.md §2.2): tenant visibility first, then
# the license gate, then claim containment.

# METADATA
# title: provgate authorization
# description: >-
#   The decision for one request: tenant visibility, then the license gate, then claim containment, then the extensions' vetoes (docs/policies.md).
# schemas:
#   - input: schema.input
#   - data.provgate.roles: schema.provgate.roles.schema
#   - data.provgate.tenants: schema.provgate.tenants.schema
#   - data.provgate.user_tenant: schema.provgate.user_tenant.schema
#   - data.provgate.machine_tenants: schema.provgate.machine_tenants.schema
#   - data.provgate.license: schema.provgate.license.schema
#   - data.provgate.scopes: schema.provgate.scopes.schema
package provgate.authz

import data.provgate.claims
import data.provgate.grants
import data.provgate.tenancy

# METADATA
# title: Decision
# description: |
#   The answer to one request (Go: policies.Decision): allow, not_found
#   (answered 404), reasons (the 403 messages) and, for lists, visible.
# entrypoint: true
decision := {"allow": true, "not_found": false, "reasons": []} if {
	not input.list
	plainly_allowed
} else := outcome if {
	not input.list
} else := object.union(outcome, {"visible": visible})

# plainly_allowed: the common request, allowed in one pass of key lookups
# (docs/design.md §2.2): a user whose token is restricted neither by roles
# nor by claims asks for one claim in the wanted form (claims.wanted, as
# the gateway sends it) that one of its roles' indexes holds, on an object
# its tenant shows, in a scope that needs no license, and no extension
# vetoes. It only ever allows what outcome allows: anything else (another
# principal, a restricted token, several claims, self or direct claims, a
# licensed scope, data without indexes or member sets, a refusal) is
# decided by outcome, step by step. Each line is the step of outcome it
# stands for, written as lookups; the rule index and early exit make a
# failing line cost no more than the lookups before it.
plainly_allowed if {
	# grants.restricted is false: no token roles (the gateway sends
	# token_roles null then), no restriction.
	input.principal.kind == "user"
	not is_array(input.principal.token_roles)
	not input.principal.restrict

	# One required claim, in the wanted form (claims.wanted); its scope is
	# none of licensed_scopes.
	[w] := input.required
	is_array(w.fallback)
	object.get(w, "all", false) == false
	not w.scope in licensed_scopes

	# grants.holds_one: a role's index holds w (claims.covers_one: the
	# exact action key, else the first fallback key present; its node
	# names every object or w's specific). First among the lookups, as it
	# is what refuses most requests.
	roles := data.provgate.roles
	some name in input.principal.roles
	actions := roles[name].index[w.scope]
	n := [x | some k in array.concat([w.action], w.fallback); x := actions[k]][0]
	object.get(n.keys, w.specific, n.all)

	# claims.known_one.
	w.base in data.provgate.scopes[w.scope]

	# tenancy.hidden is false.
	shown_to_user

	count(vetoes) == 0
}

# shown_to_user: no tenant of the user hides input.object (the user's
# tenant lists it, or the user has none, or the request names no object,
# or the tenant does not restrict its scope). Like tenancy.hides, for a
# user; data without member sets is left to it.
shown_to_user if {
	tenants := data.provgate.tenants
	user_tenant := data.provgate.user_tenant
	tenants[user_tenant[input.principal.name]].member_set[input.object.scope][input.object.key]
}

shown_to_user if not data.provgate.user_tenant[input.principal.name]

shown_to_user if not input.object

shown_to_user if {
	t := data.provgate.tenants[data.provgate.user_tenant[input.principal.name]]
	not t.members[input.object.scope]
}

# An allowed request has no reasons: they are only worked out on refusal.
outcome := {"allow": false, "not_found": true, "reasons": [sprintf("%s %s: Not Found", [input.object.scope, input.object.key])]} if {
	tenancy.hidden
} else := {"allow": false, "not_found": false, "reasons": sort(vetoes)} if {
	allow
	count(vetoes) > 0
} else := {"allow": true, "not_found": false, "reasons": []} if {
	allow
} else := {"allow": false, "not_found": false, "reasons": reasons}

# Extensions (docs/design.md §9.6): each package provgate.ext.<name> may
# define "deny contains msg"; any message refuses a request the rules
# below allow, and the messages are its reasons. An extension can only
# take away: it never allows, and a hidden object stays not found.
# Looked up as data.provgate.ext[_].deny so that only the deny rules of
# the extensions are evaluated, not every rule of their packages.
vetoes contains veto_reason(msg) if {
	some msg in data.provgate.ext[_].deny
}

veto_reason(msg) := msg if is_string(msg)

else := sprintf("%v", [msg])

# Fail closed: allow needs positive evidence that every required claim is
# satisfied, and a request naming no claim is a gateway bug, never a grant.
default allow := false

# Every required claim must be held and, for roles and tenants, licensed
# (licensed_for: license_failures is empty exactly when it holds for each).
allow if {
	count(input.required) > 0
	every c in input.required {
		held(c)
		licensed_for(c)
	}
}

reasons := array.concat(array.concat(no_claims, sort(license_failures)), claim_failures)

no_claims := [] if {
	count(input.required) > 0
} else := ["Requires: at least one claim"]

# Keyed by position, so that a malformed claim leaves a hole that fails
# rather than shifting the others.
required := {i: claims.compile_wanted(c) | some i, c in input.required}

# docs/design.md §2.1 step 3 and §5.5: each required claim must be
# contained by some claim the principal holds now. A token restricted to
# roles needs it held by one of those roles as well, and a token
# restricted by claims needs it inside the restriction; the implicit self
# claims are exempt from both (docs/design.md §5.6), and a restricted token
# never changes its own user's password or Secret (grants.own_credential).
unsatisfied := [i |
	some i, c in input.required
	not held(c)
]

claim_failures := [reason(input.required[i]) | some i in unsatisfied]

reason(c) := sprintf("Requires: %s %s %s", [c.scope, c.action, c.specific]) if {
	is_string(c.scope)
	is_string(c.action)
	is_string(c.specific)
} else := "Requires: a well-formed claim"

# A claim naming one scope, action and specific is decided by key lookups
# (claims.wanted, claims.covers_one); any other is compiled and checked
# claim by claim. Both give the same answer for the claims both can take.
held(c) if {
	w := claims.wanted(c)
	held_one(w)
	claims.known_one(w)
}

held(c) if {
	not claims.wanted(c)
	b := claims.compile_wanted(c)
	claims.known(b)
	held_by_principal(b)
}

# The grants first: nearly every request is allowed by them, and the
# first rule that holds ends the evaluation.
held_one(w) if grants.holds(w)

held_one(w) if grants.self_holds_one(w)

held_by_principal(b) if {
	some g in grants.self
	claims.covers(g, b)
}

held_by_principal(b) if {
	some g in grants.held
	claims.covers(g, b)
	within_token_roles(b)
	within_restriction(b)
	not restricted_credential(b)
}

within_token_roles(_) if not grants.role_restricted

within_token_roles(b) if {
	some g in grants.token_held
	claims.covers(g, b)
}

within_restriction(_) if grants.unrestricted

within_restriction(b) if {
	some g in grants.restrict
	claims.covers(g, b)
}

# restricted_credential(b): a compiled required claim touching the
# principal's own password or Secret, asked by a restricted token.
restricted_credential(b) if {
	grants.restricted
	some action, n in b.users
	grants.own_credential({"scope": "users", "action": action, "specific": own_key(n)})
}

own_key(n) := input.principal.name if n.all

own_key(n) := input.principal.name if n.keys[input.principal.name]

# docs/design.md §7: roles and tenants, except list and get, need an rbac
# license.
licensed_scopes := {"roles", "tenants"}

license_failures contains sprintf("%s %s is a licensed enterprise feature", [scope, operation(action)]) if {
	not licensed
	some b in required
	some [scope, action] in needs_license(b)
}

# needs_license(b): the [scope, action] pairs of compiled claim b that need
# a license: a set, since one claim may name several actions of a scope.
needs_license(b) := {[scope, action] |
	some scope in licensed_scopes
	some action, _ in b[scope]
	not split(action, ":")[0] in {"list", "get"}
}

# licensed_for(c): the required claim needs no licence, or there is one.
licensed_for(c) if {
	w := claims.wanted(c)
	not w.scope in licensed_scopes
}

licensed_for(c) if claims.wanted(c).base in {"list", "get"}

licensed_for(c) if {
	not claims.wanted(c)
	count(needs_license(claims.compile_wanted(c))) == 0
}

licensed_for(_) if licensed

licensed if {
	data.provgate.license.valid == true
	"rbac" in data.provgate.license.features
}

# DRP names the operation (create, patch, update, delete...) rather than the
# claim's action; the action stands in when the gateway gave none.
operation(action) := input.operation if {
	is_string(input.operation)
	input.operation != ""
} else := action

# Lists (docs/design.md §6.2): the gateway turns visible into a WHERE clause. Objects
# are visible when the tenant allows them and a claim grants get on them.
visible := {"restricted": false} if {
	not tenancy.restricts(input.list.scope)
	gets_all
} else := {"restricted": true, "keys": sort(visible_keys)}

visible_keys := tenancy.keys(input.list.scope) & get_keys if {
	tenancy.restricts(input.list.scope)
	not gets_all
} else := tenancy.keys(input.list.scope) if {
	tenancy.restricts(input.list.scope)
} else := get_keys

# The grants a listed object needs get from: the principal's own, the
# token's roles (when it names roles) and its restriction (when it has
# one). Self claims never name every object and are added on their own.
layers := array.concat(array.concat([grants.held], token_layer), restrict_layer)

token_layer := [grants.token_held] if grants.role_restricted

else := []

restrict_layer := [grants.restrict] if count(grants.restrict) > 0

else := []

# gets_all: every layer grants get on every object of the scope.
gets_all if {
	every l in layers {
		get_nodes_all(l)
	}
}

get_nodes_all(gs) if {
	some g in gs
	g[input.list.scope].get.all
}

# get_keys: the self claims' keys, plus the keys every layer allows. Only
# used when gets_all is false, so at least one layer names keys.
get_keys := get_keys_of(grants.self) | held_keys

held_keys := intersection({get_keys_of(l) | some l in layers; not get_nodes_all(l)})

get_keys_of(gs) := {k | some g in gs; some k, _ in g[input.list.scope].get.keys}

# docs/design.md §5.6: a requested role is kept only if it exists and one single
# role of the user contains it; others are dropped without an error. Input:
# {"user_roles": [names], "requested": [names]}; order of requested is kept.

# METADATA
# title: Token roles
# description: >-
#   The requested roles a token of a user may carry, in the order asked.
# entrypoint: true
# schemas:
#   - input: schema.token_roles.input
token_roles := [name |
	some i, name in input.requested
	not name in array.slice(input.requested, 0, i)
	kept(name)
]

# METADATA
# schemas:
#   - input: schema.token_roles.input
kept(name) if {
	data.provgate.roles[name]
	some user_role in input.user_roles
	data.provgate.roles[user_role]
	role_contains(grants.role(user_role), grants.role(name))
}

# docs/design.md §5.7: each claim of b is contained by some single claim of a.
role_contains(a, b) if {
	every cb in b {
		some ca in a
		claims.covers(ca, cb)
	}
}

# claim_contains is claim containment on plain claims, for tests and tools.
claim_contains(a, b) if claims.covers(claims.compile(a), claims.compile(b))
