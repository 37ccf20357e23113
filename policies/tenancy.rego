# Tenant visibility (spec "Tenant", reference §4.6). It applies to users
# only, before roles: an object hidden by the user's tenant is not found,
# whatever the roles grant.
package provgate.tenancy

tenant := data.provgate.tenants[data.provgate.user_tenant[input.principal.name]] if {
	input.principal.kind == "user"
}

# restricts(scope): the tenant lists scope in Members. A present but empty
# (or null) list restricts the scope to nothing, so only presence counts.
restricts(scope) if {
	_ = tenant.members[scope]
}

# member_set (from policies.NewData) makes membership a key lookup; plain
# data falls back to searching the Members list.
member(scope, key) if tenant.member_set[scope][key]

member(scope, key) if {
	not tenant.member_set
	key in tenant.members[scope]
}

hidden if {
	restricts(input.object.scope)
	not member(input.object.scope, input.object.key)
}

# keys(scope): the keys visible in a restricted scope.
keys(scope) := {k | some k, _ in tenant.member_set[scope]} if {
	tenant.member_set[scope]
} else := {k | some k in tenant.members[scope]}
