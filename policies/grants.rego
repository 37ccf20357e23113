# What a principal holds: its grants (roles and direct claims, or a machine
# token's fixed set), its implicit self claims and its token restriction.
# Every result is a list of compiled claims (see claims.rego).
package provgate.grants

import data.provgate.claims

# role(name) is the compiled claims of a role, looked up by key so the cost
# does not depend on how many roles exist. A name that is no role grants
# nothing. Data from policies.NewData carries the compiled form; plain data
# is compiled here.
role(name) := data.provgate.roles[name].compiled

role(name) := [claims.compile(c) | some c in data.provgate.roles[name].claims] if {
	not data.provgate.roles[name].compiled
}

# Reference §4.3: every user holds these, whatever its roles or restriction.
self := [
	claims.compile({"scope": "users", "action": "token,password,get", "specific": input.principal.name}),
	claims.compile({"scope": "info", "action": "get", "specific": "*"}),
] if {
	input.principal.kind == "user"
} else := []

# A principal of no known kind holds nothing.
default held := []

# Design D6: direct claims plus every role's claims, roles resolved now so
# that editing a role changes live tokens.
held := array.concat(
	[claims.compile(c) | some c in input.principal.claims],
	[g | some name in input.principal.roles; some g in role(name)],
) if {
	input.principal.kind == "user"
}

# Machine tokens have fixed permissions and ignore roles (spec
# "Authentication", reference §6.3).
held := [claims.compile(c) | some c in machine_token[input.principal.machine_token]] if {
	input.principal.kind == "machine"
}

machine_token["discovery"] := [
	{"scope": "machines", "action": "create", "specific": "*"},
	{"scope": "machines", "action": "get", "specific": "*"},
]

machine_token["operations"] := array.concat(
	[
		{"scope": "machines", "action": "get,actions,update,action,getSecure,updateSecure", "specific": input.principal.name},
		{"scope": "params", "action": "get", "specific": "*"},
		{"scope": "stages", "action": "get", "specific": "*"},
		{"scope": "tasks", "action": "get", "specific": "*"},
		{"scope": "info", "action": "get", "specific": "*"},
		{"scope": "jobs", "action": "create,get,update,actions,log", "specific": input.principal.name},
		{"scope": "events", "action": "post", "specific": "*"},
		{"scope": "reservations", "action": "create", "specific": "*"},
	],
	own_reservation,
)

# The machine's own reservation, when the gateway knows its key (the hex
# form of the machine's address).
own_reservation := [{"scope": "reservations", "action": "*", "specific": input.principal.reservation_key}] if {
	input.principal.reservation_key != ""
} else := []

restrict := [claims.compile(c) | some c in object.get(input.principal, "restrict", [])]
