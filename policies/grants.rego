# What a principal holds: its grants (roles and direct claims, or a machine
# token's fixed set), its implicit self claims and its token restriction.
# Every result is a list of compiled claims (see claims.rego).

# METADATA
# title: Grants
# description: >-
#   What a principal holds: roles, direct claims, machine token sets, self claims, token restrictions.
# schemas:
#   - input: schema.input
#   - data.provgate.roles: schema.provgate.roles.schema
#   - data.provgate.tenants: schema.provgate.tenants.schema
#   - data.provgate.user_tenant: schema.provgate.user_tenant.schema
#   - data.provgate.machine_tenants: schema.provgate.machine_tenants.schema
#   - data.provgate.license: schema.provgate.license.schema
#   - data.provgate.scopes: schema.provgate.scopes.schema
package provgate.grants

import data.provgate.claims
import data.provgate.tenancy

# role(name) is the compiled claims of a role, looked up by key so the cost
# does not depend on how many roles exist. A name that is no role grants
# nothing. Data from policies.NewData carries the compiled form; plain data
# is compiled here.
role(name) := compiled if {
	compiled := data.provgate.roles[name].compiled
} else := plain_role[name]

# plain_role[name]: a role of data without compiled forms, compiled once per
# evaluation (a rule's value is kept for the evaluation; a function's is
# not): the grant check looks a role up once per atom.
plain_role[name] := [claims.compile(c) | some c in r.claims] if {
	some name, r in data.provgate.roles
	not r.compiled
}

# docs/design.md §5.5: every user holds these, whatever its roles or
# restriction: users token,password,get <self> and info get *. A restricted
# token (see restricted) keeps get and token on itself and info get, but
# not password: whoever holds a narrowed token must not be able to turn it
# into the user's whole account. Written compiled (see claims.rego), as
# they are built on every decision.
self := [
	{"users": {a: own | some a in self_actions}},
	{"info": {"get": every_object}},
] if {
	input.principal.kind == "user"
} else := []

self_actions := {"token", "get"} if restricted

else := {"token", "password", "get"}

# Specific sets in compiled form: the principal's own key, and "*".
own := {"all": false, "keys": {input.principal.name: true}}

every_object := {"all": true, "keys": {}}

# role_restricted: the token was minted for named roles (roles=). Its
# claims are then the claims held both by one of those roles and by one of
# the user's current roles: a role taken from the user, or narrowed, ends
# or narrows the token at once, and widening a role the token names gives
# it nothing the user does not hold.
role_restricted if is_array(input.principal.token_roles)

# restricted: the token is narrowed, by its roles or by claims
# (scope/action/specific).
restricted if role_restricted

restricted if claim_restricted

# claim_restricted: the token carries restricting claims. Read from the
# input as it is, so that unrestricted principals never compile restrict.
claim_restricted if count(object.get(input.principal, "restrict", [])) > 0

# A principal of no known kind holds nothing.
default held := []

# docs/design.md §5.5: direct claims plus every role's claims, roles resolved now so
# that editing a role changes live tokens. The roles are the user's current
# ones, as authentication read them from the user record; a token's own
# role list narrows them further (role_restricted).
held := array.concat(
	[claims.compile(c) | some c in input.principal.claims],
	[g | some name in input.principal.roles; some g in role(name)],
) if {
	input.principal.kind == "user"
}

# Machine tokens have fixed permissions and ignore roles
# (docs/design.md §8.6). The sets are written compiled, like the
# self claims, since a machine token is used on every agent request. A
# job token (docs/design.md §8.7) also holds its task's extra claims as
# direct claims; tenancy still restricts what they reach.
held := array.concat(machine_token[input.principal.machine_token], job_claims) if {
	input.principal.kind == "machine"
}

# Only operations tokens carry a job's claims; a discovery token's are
# ignored.
job_claims := [claims.compile(c) | some c in object.get(input.principal, "claims", [])] if {
	input.principal.machine_token == "operations"
} else := []

# machines create,get *
machine_token["discovery"] := [{"machines": {"create": every_object, "get": every_object}}]

# An operations token runs its machine's agent loop and task scripts
# (docs/design.md §8.6): it reads its machine, runs its plugin action callbackDo,
# and changes only the fields the agent and scripts change, each by an
# explicit update:<field> claim. It may not change what pulls other
# objects' params, profiles or tasks into the machine, nor what the
# server's job bookkeeping owns: Profiles, Workflow, Stage, BootEnv, Tasks,
# Pool, PoolAllocated, PoolStatus, Secret, Locked, Name, CurrentJob,
# CurrentTask, WorkflowComplete; nor releaseToPool, which applies the
# pool's action groups. Then params, stages, tasks get *; info get *;
# jobs create,get,update,actions,log <uuid> (a job's key for claims is its
# machine); events post *; reservations create *. Tenants restrict what it
# sees (tenancy.rego). Further claims (a job's, say) are added to this list.
machine_token["operations"] := [
	{"machines": {
		"get": own,
		"actions": own,
		"action:callbackDo": own,
		"getSecure": own,
		"updateSecure": own,
		"update:/Runnable": own,
		"update:/Context": own,
		"update:/Params": own,
		"update:/Meta": own,
		"update:/Description": own,
		"update:/Address": own,
		"update:/HardwareAddrs": own,
		"update:/OS": own,
		"update:/Arch": own,
		"update:/Fingerprint": own,
		"update:/TaskErrorStacks": own,
		"update:/RetryTaskAttempt": own,
	}},
	{"params": {"get": every_object}},
	{"stages": {"get": every_object}},
	{"tasks": {"get": every_object}},
	{"info": {"get": every_object}},
	{"jobs": {"create": own, "get": own, "update": own, "actions": own, "log": own}},
	{"events": {"post": every_object}},
	{"reservations": {"create": every_object}},
]

restrict := [claims.compile(c) | some c in object.get(input.principal, "restrict", [])]

# unrestricted: the token carries no restricting claim.
unrestricted if not claim_restricted

# token_held is what the token's roles grant (role_restricted tokens).
token_held := [g | some name in input.principal.token_roles; some g in role(name)]

# holds_one(w): a grant of the principal, not counting the self claims,
# contains the wanted claim w (claims.wanted). The same grants as held,
# visited without building the list: a user's roles by index (or by claim,
# for data without one), then its direct claims; a machine token's set.
holds_one(w) if {
	input.principal.kind == "user"
	some name in input.principal.roles
	claims.covers_one(data.provgate.roles[name].index, w)
}

holds_one(w) if {
	input.principal.kind == "user"
	some name in input.principal.roles
	not data.provgate.roles[name].index
	some g in role(name)
	claims.covers_one(g, w)
}

holds_one(w) if {
	input.principal.kind == "user"
	some c in input.principal.claims
	claims.covers_one(claims.compile(c), w)
}

holds_one(w) if {
	input.principal.kind == "machine"
	some g in held
	claims.covers_one(g, w)
}

# holds(w): the principal's token allows the wanted claim w now, self
# claims not counted: a role or direct claim contains it and, for a
# restricted token, one of the token's roles and its restriction too; a
# restricted token never reaches its own user's credentials. This is the
# held set of docs/design.md §5.5 and §5.9: requests are allowed by it
# (with the self claims, authz.held_one) and grants are bounded by it.
holds(w) if {
	not restricted
	holds_one(w)
}

holds(w) if {
	restricted
	holds_one(w)
	token_roles_hold_one(w)
	within_restriction_one(w)
	not own_credential(w)
}

within_restriction_one(_) if unrestricted

within_restriction_one(w) if {
	some g in restrict
	claims.covers_one(g, w)
}

# token_roles_hold_one(w): the token names no roles, or one of them
# contains w.
token_roles_hold_one(_) if not role_restricted

token_roles_hold_one(w) if {
	some name in input.principal.token_roles
	claims.covers_one(data.provgate.roles[name].index, w)
}

token_roles_hold_one(w) if {
	some name in input.principal.token_roles
	not data.provgate.roles[name].index
	some g in role(name)
	claims.covers_one(g, w)
}

# own_credential(w): w changes the principal's own password or Secret,
# which no restricted token may do, whatever its roles grant: changing the
# password of its user (users password <self>), rotating its Secret (the
# POST /users/<self>/secret route and PATCH or PUT of /Secret), setting its
# PasswordHash, or replacing the whole user.
own_credential(w) if {
	input.principal.kind == "user"
	w.scope == "users"
	w.specific == input.principal.name
	credential_action(w.action)
}

credential_action(a) if a in {"password", "update", "update:"}

credential_action(a) if {
	startswith(a, "update:/")
	split(a, "/")[1] in {"Secret", "PasswordHash"}
}

# self_holds_one(w): the self claims (see self) contain w; written as
# lookups, since building the compiled self claims costs more than the
# rest of a decision. users token,password,get <self> (no password for a
# restricted token); info get *. Keyed by w's scope (self_holds_in), so
# that for a claim of any other scope the rule index finds no body to
# evaluate.
self_holds_one(w) if self_holds_in(w.scope, w)

self_holds_in("users", w) if {
	input.principal.kind == "user"
	w.action in self_actions
	own_specific(w.specific)
}

self_holds_in("info", w) if {
	input.principal.kind == "user"
	w.action == "get"
}

own_specific(s) if s == input.principal.name

# List and create derive an empty specific (claims.node_covers).
own_specific("")

# METADATA
# title: Ungranted
# description: |
#   What a write would hand out that its writer does not hold
#   (docs/design.md §5.9), as sorted atomic claims {scope, action,
#   specific}: empty when the write may go ahead. input.grants lists what
#   the write hands out (Go: backend.Grant); the principal is the writer.
# entrypoint: true
ungranted := sort([plain(t) | some t in missing])

plain(t) := {"scope": t.scope, "action": t.action, "specific": t.specific}

# open: the positions of the grants the writer must hold itself (not
# delegated), each decided once.
open contains i if {
	some i, g in input.grants
	not delegated(g)
}

# missing: the atoms of every open grant the writer does not hold, not
# counting what the object already granted (had).
missing contains t if {
	some i in open
	g := input.grants[i]
	some t in grant_atoms(g)
	not grantor_holds(t)
	not already_had(g, t)
}

# A tenant-restricted writer takes over only users of its own tenant:
# another user's authority would reach what its tenant hides. Only the
# explicit delegation allows it (docs/design.md §5.9, §6).
missing contains claims.wanted(g.via) if {
	some i in open
	g := input.grants[i]
	foreign_user(g.subject)
}

# A tenant-restricted writer gives roles only to users of its own tenant:
# a user outside it would reach with them what the writer's tenant hides
# (a user in no tenant, everything). Only the explicit delegation allows
# it (docs/design.md §5.9, §6).
missing contains claims.wanted(g.via) if {
	some i in open
	g := input.grants[i]
	foreign_user(g.to)
}

# delegated(g): the writer is the grant's subject, or holds its explicit
# delegation (roles bind, roles escalate, users impersonate).
delegated(g) if {
	g.subject.kind == input.principal.kind
	g.subject.name == input.principal.name
}

delegated(g) if {
	w := claims.wanted(g.via)
	claims.known_one(w)
	grantor_holds(w)
}

# Only users hand out authority: a machine or job token holds a fixed set
# for its own work, never anything to give away. w is known: an atom of a
# compiled claim, or a delegation checked by delegated.
grantor_holds(w) if {
	input.principal.kind == "user"
	holds(w)
}

# info get is a self claim of every user, not of one: handing it out widens
# no one, so it counts. The other self claims name their holder (users
# token,password,get <self>) and never count.
grantor_holds(w) if {
	input.principal.kind == "user"
	w.scope == "info"
	w.action == "get"
}

# grant_atoms(g): what the grant hands out, in atoms. A role the policy
# does not know, or one the writer cannot see, is handed out only through
# the delegation: an unknown role would grant whatever it is made to later,
# and a refusal must neither tell a hidden role from a missing one nor
# show its claims (docs/design.md §5.9).
grant_atoms(g) := {claims.wanted(g.via)} if {
	hides_a_role(g)
} else := (claim_atoms(object.get(g, "claims", [])) | roles_atoms(object.get(g, "roles", []))) | given_role_atoms(g)

# hides_a_role(g): the role given is unknown or not visible, or a role of
# a takeover exists and is not visible (one that does not exist grants
# nothing).
hides_a_role(g) if {
	is_string(g.role)
	not visible_role(g.role)
}

hides_a_role(g) if {
	some name in object.get(g, "roles", [])
	data.provgate.roles[name]
	not visible_role(name)
}

claim_atoms(cs) := {t | some c in cs; some t in unheld_atoms(claims.compile(c))}

roles_atoms(names) := {t | some name in names; some g in role(name); some t in unheld_atoms(g)}

# unheld_atoms(g): the atoms of the compiled claim g, unless one claim the
# writer holds contains g whole (claims.covers, which contains g exactly
# when it contains each of its atoms): the superuser handing out "* * *"
# then costs one containment, not one per atom. A restricted token, or a
# claim held only in parts, is checked atom by atom.
unheld_atoms(g) := set() if {
	wholly_held(g)
} else := claims.atoms(g)

wholly_held(g) if {
	input.principal.kind == "user"
	not restricted
	some h in held
	claims.covers(h, g)
}

given_role_atoms(g) := roles_atoms([g.role]) if is_string(g.role)

else := set()

# visible_role(name): the role exists and the writer may see it: its
# tenant shows it and it holds roles get on it.
visible_role(name) if {
	data.provgate.roles[name]
	not tenancy.hides("roles", name)
	grantor_holds({"scope": "roles", "action": "get", "specific": name, "base": "get", "fallback": []})
}

already_had(g, t) if {
	some c in object.get(g, "had", [])
	claims.covers_one(claims.compile(c), t)
}

foreign_user(s) if {
	s.kind == "user"
	some t in tenancy.tenant_names
	object.get(data.provgate.user_tenant, s.name, "") != t
}
