# Tenant visibility (docs/design.md §6). It applies before
# roles: an object hidden by a tenant of the principal is not found,
# whatever the roles grant.
#
# A user is restricted by its one tenant. A machine's operations token is
# restricted by every tenant whose Members["machines"] lists the machine,
# so that a token a tenant's machine is given (a task of that tenant's
# workflow renders it) sees no more than that tenant, and no more than any
# other tenant listing the machine. A discovery token names no machine
# and belongs to no tenant.

# METADATA
# title: Tenancy
# description: >-
#   Tenant visibility: an object a tenant of the principal hides is not found.
# schemas:
#   - input: schema.input
#   - data.provgate.roles: schema.provgate.roles.schema
#   - data.provgate.tenants: schema.provgate.tenants.schema
#   - data.provgate.user_tenant: schema.provgate.user_tenant.schema
#   - data.provgate.machine_tenants: schema.provgate.machine_tenants.schema
#   - data.provgate.license: schema.provgate.license.schema
#   - data.provgate.scopes: schema.provgate.scopes.schema
package provgate.tenancy

# tenant_names are the names of the tenants restricting the principal.
tenant_names contains data.provgate.user_tenant[input.principal.name] if {
	input.principal.kind == "user"
}

# The rules for a machine's operations token name its kind and token as
# equalities on the input, so that OPA's rule index passes them over for
# every other principal.
tenant_names contains name if {
	input.principal.kind == "machine"
	input.principal.machine_token == "operations"
	some name in data.provgate.machine_tenants[shard(input.principal.name)][input.principal.name]
}

# shard(key): the shard of machine_tenants holding a machine's entry, the
# first two hex digits of the SHA-256 of its key (policies.MachineShard):
# a write to one machine's entry then costs a shard, not the fleet
# (docs/design.md §14.4).
shard(key) := substring(crypto.sha256(key), 0, 2)

# A job token asked for by a user is also restricted by that user's
# tenant: the token never reaches what its creator's tenant hides
# (docs/design.md §8.7).
tenant_names contains data.provgate.user_tenant[input.principal.grantor] if {
	input.principal.kind == "machine"
	input.principal.machine_token == "operations"
}

# Data without machine_tenants (written by hand rather than by
# policies.NewData) is searched instead.
tenant_names contains name if {
	input.principal.kind == "machine"
	input.principal.machine_token == "operations"
	not data.provgate.machine_tenants
	some name, t in data.provgate.tenants
	input.principal.name in object.get(t.members, "machines", [])
}

# restricting(name, scope): tenant name (of the principal) lists scope in
# Members. A present but empty (or null) list restricts the scope to
# nothing, so only presence counts. A name that is no tenant restricts
# nothing.
restricting(name, scope) if _ = data.provgate.tenants[name].members[scope]

restricts(scope) if {
	some name in tenant_names
	restricting(name, scope)
}

hidden if hides(input.object.scope, input.object.key)

hidden if other_machine

# hides(scope, key): a tenant of the principal restricts scope and does not
# list key. The grant check asks it of the roles a write names
# (grants.visible_role).
hides(scope, key) if {
	some name in tenant_names
	tenant_hides(name, scope, key)
}

# tenant_hides(name, scope, key): tenant name (of the principal) restricts
# scope and does not list key. The access explorer names these tenants in
# its trail (provgate.explain).
tenant_hides(name, scope, key) if {
	_ = data.provgate.tenants[name].members[scope]
	not data.provgate.tenants[name].member_set[scope][key]
	not searched_member(name, scope, key)
}

# A machine's operations token sees one machine, its own: any other is not
# found, as a machine its tenant hides would be, so that neither the answer
# nor its message tells another machine's UUID from a missing one
# (docs/design.md §6.1).
other_machine if {
	input.principal.kind == "machine"
	input.principal.machine_token == "operations"
	input.object.scope == "machines"
	input.object.key != input.principal.name
}

# searched_member(name, scope, key): data without member_set lists the
# object in the tenant's Members.
searched_member(name, scope, key) if {
	not data.provgate.tenants[name].member_set
	key in data.provgate.tenants[name].members[scope]
}

# keys(scope): the keys visible in a restricted scope, those every
# restricting tenant lists.
keys(scope) := intersection({tenant_keys(name, scope) |
	some name in tenant_names
	restricting(name, scope)
})

tenant_keys(name, scope) := {k | some k, _ in data.provgate.tenants[name].member_set[scope]} if {
	data.provgate.tenants[name].member_set[scope]
} else := {k | some k in data.provgate.tenants[name].members[scope]}
