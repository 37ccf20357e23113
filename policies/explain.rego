# The trail of one decision, for the access explorer (docs/design.md
# §9.8): what the decision found at each step, worked out by the very
# rules the decision evaluates (tenancy.hides, authz.held,
# authz.licensed_for, the extensions' deny sets), never by a second copy
# of them. The server evaluates the decision and the explanation (the
# trail, or for a request the one pass allowed the values its trail is
# written from) in one query, so both see the same input, data and clock.

# METADATA
# title: Explain
# description: >-
#   The trail of one decision: tenant visibility, the license gate, each required claim with what covers it, the extensions' vetoes.
# schemas:
#   - input: schema.input
#   - data.provgate.roles: schema.provgate.roles.schema
#   - data.provgate.tenants: schema.provgate.tenants.schema
#   - data.provgate.user_tenant: schema.provgate.user_tenant.schema
#   - data.provgate.machine_tenants: schema.provgate.machine_tenants.schema
#   - data.provgate.license: schema.provgate.license.schema
#   - data.provgate.scopes: schema.provgate.scopes.schema
package provgate.explain

import data.provgate.authz
import data.provgate.claims
import data.provgate.grants
import data.provgate.tenancy

# METADATA
# title: Explanation
# description: |
#   The trail as the server reads it (Go: policies/opa, Engine.Explain).
#   For a request the decision allowed in its one pass, {"pass": values}:
#   the values its trail is written from (see trail's first body), the
#   rest of it written out in Go; for any other, {"trail": trail}. The
#   license step of such a trail (authz.licensed; no failures, since the
#   claim's scope needs no license) depends on the data alone: the server
#   evaluates authz.licensed once per license and policy, not per request.
# entrypoint: true
explanation := {"pass": {
	"tenants": [t | t := data.provgate.user_tenant[input.principal.name]],
	"self": {true | grants.self_holds_one(w)},
	"roles": {[name, r.claims[i]] |
		some name in input.principal.roles
		r := roles[name]
		n := r.index[scope][keys[_]]
		some i in object.get(n, ["keys", specific], n.all_by)
	},
	"claims": {dc | some dc in input.principal.claims; claims.covers_one(claims.compile(dc), w)},
}} if {
	# The values of trail's first body, each as small as it can be: the
	# user's tenants; what covers
	# the one wanted claim: the self claims ({true} when they do), the
	# claims of the user's roles as [role, claim] (read from the indexes
	# as plain_role_covers reads them, the lookups written out here, with
	# what they share bound once: they are what the trail costs above its
	# decision) and the direct claims.
	authz.plainly_allowed
	[w] := input.required
	data.provgate.roles_indexed
	specific := w.specific
	specific != ""
	scope := w.scope
	keys := array.concat([w.action], w.fallback)
	roles := data.provgate.roles
} else := {"pass": {
	"tenants": [t | t := data.provgate.user_tenant[input.principal.name]],
	"self": {true | grants.self_holds_one(w)},
	"roles": {[c.role, c.claim] | some c in plain_role_covers(w)},
	"claims": {dc | some dc in input.principal.claims; claims.covers_one(claims.compile(dc), w)},
}} if {
	# The same for an empty specific (lists, creates) or data written by
	# hand.
	authz.plainly_allowed
	[w] := input.required
} else := {"trail": trail}

# METADATA
# title: Trail
# description: |
#   The steps of data.provgate.authz.decision for the same input (Go:
#   policies.Trail): tenant, license, claims (one per required claim, in
#   order) and vetoes (consulted only when everything before allows).
# entrypoint: true
trail := {
	"tenant": {
		"tenants": [t | t := data.provgate.user_tenant[input.principal.name]],
		"hidden": false,
		"hidden_by": [],
		"other_machine": false,
	},
	"license": license_step,
	"claims": [{
		"claim": {"scope": w.scope, "action": w.action, "specific": w.specific},
		"held": true,
		"licensed": true,
		"covered_by": plain_covered_by(w),
		"token_roles": {"restricted": false, "covered_by": []},
		"restriction": {"restricted": false, "covered": true},
		"own_credential": false,
		"granted_by": [],
	} |
		some w in input.required
	],
	"vetoes_consulted": true,
	"vetoes": [],
} if {
	# A request the decision allowed in its one pass
	# (authz.plainly_allowed): a user's token restricted neither by roles
	# nor by claims asks for one claim in the wanted form, in a scope that
	# needs no license, that a role holds, on an object the user's tenant
	# (if any) shows, and no extension vetoes. Its trail is written from
	# lookups like the pass's own: the user's tenant, the license, and
	# what covers the claim; every other step is what the step rules
	# answer for such a request (the gate has no failures when no claim
	# needs a license).
	authz.plainly_allowed
} else := {
	"tenant": {"tenants": sort(tenancy.tenant_names), "hidden": false, "hidden_by": [], "other_machine": false},
	"license": license_step,
	"claims": [{
		"claim": {"scope": c.scope, "action": c.action, "specific": c.specific},
		"held": true,
		"licensed": true,
		"covered_by": covered_by(c),
		"token_roles": {"restricted": false, "covered_by": []},
		"restriction": {"restricted": false, "covered": true},
		"own_credential": false,
		"granted_by": [],
	} |
		some c in input.required
	],
	"vetoes_consulted": true,
	"vetoes": [],
} if {
	# An allowed request of a token that is not restricted passed every
	# step: visible, each claim held and licensed, no veto. What is left
	# to look up is the license and what covers each claim; the rest is
	# written as the steps would answer it. The decision is the one the
	# query evaluated (its value is kept for the evaluation).
	authz.decision.allow
	not grants.restricted
} else := {
	"tenant": tenant_step,
	"license": license_step,
	"claims": [claim_step(c) | some c in input.required],
	"vetoes_consulted": vetoes_consulted,
	"vetoes": veto_steps,
}

# plain_covered_by(w): covered_by for the wanted claim w of a request
# authz.plainly_allowed allowed (user_covers_one, with each role's claims
# matched by lookups as claims.covers_one matches them: the exact action
# key, else the first fallback key present).
plain_covered_by(w) := ({{"source": "self", "role": "", "claim": ""} | grants.self_holds_one(w)} | plain_role_covers(w)) | {{"source": "claim", "role": "", "claim": dc} |
	some dc in input.principal.claims
	claims.covers_one(claims.compile(dc), w)
}

# plain_role_covers(w): the claims of the user's roles covering w, each
# with its role (as user_covers_one names them). Where every role has an
# index (data.provgate.roles_indexed, policies.Data.Normalized), they are
# read from it (policies.IndexClaims): the entry of each of w's keys (its
# action and fallback keys) names the claims it merged, keys[s] those
# covering specific s (listing it or naming every object), all_by those
# naming every object (which alone cover a specific no claim lists); an
# empty specific (lists, creates) is covered by every claim named there
# (claims.wanted_in). A claim has the same specifics for each of its
# actions (policies.CompileClaim), so whichever of w's keys it holds
# first, claims.covers_one finds that node: the claims named for any of
# w's keys are exactly those covering w. Otherwise (data written by hand)
# each claim is matched as claims.covers_one matches it: the exact action
# key, else the first fallback key present.
plain_role_covers(w) := {{"source": "role", "role": name, "claim": r.claims[i]} |
	keys := array.concat([w.action], w.fallback)
	name := input.principal.roles[_]
	r := data.provgate.roles[name]
	n := r.index[w.scope][keys[_]]
	i := object.get(n.keys, w.specific, n.all_by)[_]
} if {
	data.provgate.roles_indexed
	w.specific != ""
} else := {{"source": "role", "role": name, "claim": r.claims[i]} |
	keys := array.concat([w.action], w.fallback)
	name := input.principal.roles[_]
	r := data.provgate.roles[name]
	n := r.index[w.scope][keys[_]]
	i := n.all_by[_]
} | {{"source": "role", "role": name, "claim": r.claims[i]} |
	keys := array.concat([w.action], w.fallback)
	name := input.principal.roles[_]
	r := data.provgate.roles[name]
	n := r.index[w.scope][keys[_]]
	i := n.keys[_][_]
} if {
	data.provgate.roles_indexed
} else := {{"source": "role", "role": name, "claim": object.get(r, ["claims", i], "")} |
	keys := array.concat([w.action], w.fallback)
	roles := data.provgate.roles
	some name in input.principal.roles
	r := roles[name]
	some i, g in role_claims(r, name)
	actions := g[w.scope]
	n := [x | some k in keys; x := actions[k]][0]
	claims.wanted_in(n, w)
}

# role_claims(r, name): grants.role(name), for the role r already read.
role_claims(r, name) := compiled if {
	compiled := r.compiled
} else := grants.plain_role[name]

# Booleans of rules that are true or undefined (an undefined argument
# would leave a whole call undefined, so each gets its own rule).
vetoes_consulted if authz.allow

else := false

other_machine if tenancy.other_machine

else := false

held(c) if authz.held(c)

else := false

licensed_for(c) if authz.licensed_for(c)

else := false

# Tenant visibility: the tenants restricting the principal and, for an
# addressed object they hide, which of them hide it (the other machine of
# an operations token counts as hidden by its own machine), worked out
# only when it is hidden.
tenant_step := {
	"tenants": sort(tenancy.tenant_names),
	"hidden": false,
	"hidden_by": [],
	"other_machine": false,
} if {
	not tenancy.hidden
} else := {
	"tenants": sort(tenancy.tenant_names),
	"hidden": true,
	"hidden_by": sort(hiding),
	"other_machine": other_machine,
}

hiding contains name if {
	input.object
	some name in tenancy.tenant_names
	tenancy.tenant_hides(name, input.object.scope, input.object.key)
}

# The gate's failures exist only without a license: with one, nothing is
# compiled to find none.
license_step := {"licensed": true, "failures": []} if {
	authz.licensed
} else := {"licensed": false, "failures": sort(authz.license_failures)}

# One required claim: held by the decision's own rule, licensed by the
# gate's, and what covers it: the principal's self claims, its direct
# claims, the claims of its roles (each with the role), or its machine
# token's set. A token restricted to roles or by claims must also cover
# it there; granted_by names every role whose claims would cover it.
# A token that is not restricted has no token steps to work out, and a
# claim it holds no granting roles: they are written as the step
# functions would answer them.
claim_step(c) := {
	"claim": {"scope": c.scope, "action": c.action, "specific": c.specific},
	"held": true,
	"licensed": licensed_for(c),
	"covered_by": covered_by(c),
	"token_roles": {"restricted": false, "covered_by": []},
	"restriction": {"restricted": false, "covered": true},
	"own_credential": false,
	"granted_by": [],
} if {
	not grants.restricted
	authz.held(c)
} else := {
	"claim": {"scope": c.scope, "action": c.action, "specific": c.specific},
	"held": h,
	"licensed": licensed_for(c),
	"covered_by": covered_by(c),
	"token_roles": token_roles_step(c),
	"restriction": restriction_step(c),
	"own_credential": own_credential(c),
	"granted_by": granted_by_if(c, h),
} if {
	h := held(c)
}

# granted_by_if(c, h): for a claim not held (h false), the roles that
# would grant it.
granted_by_if(_, true) := []

granted_by_if(c, false) := sort(granting(c))

# covered_by(c): the grants of the principal covering c, each naming the
# covering claim as it is written (policies/opa formats and orders them
# for the explorer: the trail spends nothing on text). A wanted claim is
# looked up as the decision looks it up (claims.covers_one, key lookups
# only; the self claims by grants.self_holds_one, without building
# them), claim by claim of each grant, to name the claims that cover it;
# any other is compiled and checked with claims.covers.
covered_by(c) := user_covers_one(w) if {
	input.principal.kind == "user"
	w := claims.wanted(c)
} else := {{"source": "machine_token", "role": input.principal.machine_token, "claim": ""} |
	some g in grants.held
	_ = g[w.scope]
	claims.covers_one(g, w)
} if {
	input.principal.kind == "machine"
	w := claims.wanted(c)
} else := set() if {
	claims.wanted(c)
} else := self_cover(b) | grant_covers(b) if {
	b := claims.compile_wanted(c)
}

# user_covers_one(w): a user's self claims, the claims of its roles and
# its direct claims covering the wanted claim w.
user_covers_one(w) := ({{"source": "self", "role": "", "claim": ""} | grants.self_holds_one(w)} | {{"source": "role", "role": name, "claim": role_claim(name, i)} |
	some name in input.principal.roles
	some i, g in grants.role(name)
	_ = g[w.scope] # covers_one needs it; a claim of another scope is passed over without a call
	claims.covers_one(g, w)
}) | {{"source": "claim", "role": "", "claim": dc} |
	some dc in input.principal.claims
	claims.covers_one(claims.compile(dc), w)
}

self_cover(b) := {{"source": "self", "role": "", "claim": ""} |
	some g in grants.self
	claims.covers(g, b)
}

grant_covers(b) := ({{"source": "claim", "role": "", "claim": dc} |
	input.principal.kind == "user"
	some dc in input.principal.claims
	claims.covers(claims.compile(dc), b)
} | {{"source": "role", "role": name, "claim": role_claim(name, i)} |
	input.principal.kind == "user"
	some name in input.principal.roles
	some i, g in grants.role(name)
	claims.covers(g, b)
}) | {{"source": "machine_token", "role": input.principal.machine_token, "claim": ""} |
	input.principal.kind == "machine"
	some g in grants.held
	claims.covers(g, b)
}

# role_claim(name, i): the role's i-th claim as the role lists it (its
# compiled form has the same position); "" should the data lack it.
role_claim(name, i) := object.get(data.provgate.roles[name], ["claims", i], "")

# token_roles_step(c): for a token minted for named roles, which of them
# cover c (the claim must be held by one of them too).
token_roles_step(c) := {"restricted": true, "covered_by": sort([name |
	b := claims.compile_wanted(c)
	some name in input.principal.token_roles
	some g in grants.role(name)
	claims.covers(g, b)
])} if {
	grants.role_restricted
} else := {"restricted": false, "covered_by": []}

# restriction_step(c): for a token narrowed by claims, whether one of them
# covers c.
restriction_step(c) := {"restricted": true, "covered": within_restriction(c)} if {
	grants.claim_restricted
} else := {"restricted": false, "covered": true}

within_restriction(c) if {
	b := claims.compile_wanted(c)
	some g in grants.restrict
	claims.covers(g, b)
} else := false

# own_credential(c): a restricted token never changes its own user's
# password or Secret (grants.own_credential), whatever covers it.
own_credential(c) if {
	grants.restricted
	grants.own_credential(claims.wanted(c))
} else := false

# granting(c): the roles whose claims cover c, whoever holds them (looked
# up in each role's index, as holds_one does).

granting(c) := {name |
	w := claims.wanted(c)
	some name, _ in data.provgate.roles
	role_covers_one(name, w)
} if {
	claims.wanted(c)
} else := {name |
	b := claims.compile_wanted(c)
	some name, _ in data.provgate.roles
	some g in grants.role(name)
	claims.covers(g, b)
}

# role_covers_one(name, w): the role's claims cover w, looked up in its
# index where it has one (as grants.holds_one does).
role_covers_one(name, w) := claims.covers_one(index, w) if {
	index := data.provgate.roles[name].index
} else if {
	some g in grants.role(name)
	claims.covers_one(g, w)
}

# The extensions' vetoes, each with its package; consulted (as by the
# decision) only when the request is otherwise allowed.
veto_steps := sort([{"package": pkg, "message": authz.veto_reason(msg)} |
	some pkg
	some msg in data.provgate.ext[pkg].deny
]) if {
	authz.allow
} else := []

# METADATA
# title: Role diff
# description: |
#   The atomic claims (one scope, one action, one specific or "*") of
#   claims a that no claim of b covers, and the other way round, by the
#   decision's own containment (claims.covers).
role_diff(a, b) := {"only_a": uncovered(a, b), "only_b": uncovered(b, a)}

uncovered(xs, ys) := sort([sprintf("%s %s %s", t) |
	some t in atoms(xs)
	not covered_atom(t, ys)
])

atoms(cs) := {[scope, action, spec] |
	some c in cs
	some scope, actions in claims.compile(c)
	some action, n in actions
	some spec in node_specs(n)
}

node_specs(n) := {"*"} if n.all

else := object.keys(n.keys)

covered_atom(t, ys) if {
	some y in ys
	claims.covers(claims.compile(y), {t[0]: {t[1]: atom_node(t[2])}})
}

atom_node(spec) := {"all": true, "keys": {}} if spec == "*"

else := {"all": false, "keys": {spec: true}}
