# Tenant visibility (docs/design.md §6): applied before roles,
# hidden objects are not found. Users are restricted by their tenant, a
# machine's operations token by every tenant listing the machine.
package provgate.tenancy_test

import data.provgate.fixtures
import data.provgate.tenancy

c(scope, action, specific) := fixtures.claim(scope, action, specific)

on(principal, scope, key, required) := fixtures.decide(
	fixtures.data_licensed,
	object.union(fixtures.request(principal, required), {"object": {"scope": scope, "key": key}}),
)

tina := fixtures.user("tina", ["superuser"])

test_tenant_member_visible_allowed if on(tina, "machines", "m1", [c("machines", "get", "m1")]).allow

test_tenant_non_member_not_found if {
	d := on(tina, "machines", "m9", [c("machines", "get", "m9")])
	d == {"allow": false, "not_found": true, "reasons": ["machines m9: Not Found"]}
}

test_tenant_empty_member_list_not_found if on(tina, "profiles", "global", [c("profiles", "get", "global")]).not_found

test_tenant_absent_scope_unrestricted_allowed if on(tina, "pools", "p1", [c("pools", "get", "p1")]).allow

# docs/design.md §6.1: the tenant check comes first, so a hidden object is
# not found even when the roles would have refused it anyway.
test_tenant_before_roles_not_found if {
	d := on(fixtures.user("tina", []), "machines", "m9", [c("machines", "delete", "m9")])
	d.not_found
	not d.allow
}

test_tenant_member_without_claim_denied if {
	d := on(fixtures.user("tina", []), "machines", "m1", [c("machines", "delete", "m1")])
	not d.not_found
	d.reasons == ["Requires: machines delete m1"]
}

test_user_without_tenant_unrestricted_allowed if on(fixtures.user("root", ["superuser"]), "machines", "m9", [c("machines", "get", "m9")]).allow

test_tenant_member_set_visible_allowed if on(fixtures.user("tom", ["superuser"]), "machines", "m3", [c("machines", "get", "m3")]).allow

test_tenant_member_set_non_member_not_found if on(fixtures.user("tom", ["superuser"]), "machines", "m1", [c("machines", "get", "m1")]).not_found

test_tenant_unknown_tenant_name_unrestricted_allowed if {
	world := object.union(fixtures.data_licensed, {"user_tenant": {"tina": "gone"}})
	r := object.union(fixtures.request(tina, [c("machines", "get", "m9")]), {"object": {"scope": "machines", "key": "m9"}})
	fixtures.decide(world, r).allow
}

test_tenant_null_member_list_not_found if {
	world := object.union(fixtures.data_licensed, {"tenants": {"t1": {"members": {"machines": null}, "users": ["tina"]}}})
	r := object.union(fixtures.request(tina, [c("machines", "get", "m1")]), {"object": {"scope": "machines", "key": "m1"}})
	fixtures.decide(world, r).not_found
}

test_tenant_no_object_allowed if fixtures.decide(fixtures.data_licensed, fixtures.request(tina, [c("machines", "create", "")])).allow

# Machines: an operations token is restricted by every tenant whose
# Members["machines"] lists the machine.
mt1 := fixtures.machine("mt1", "operations")

mt2 := fixtures.machine("mt2", "operations")

test_machine_tenant_member_visible_allowed if {
	on(mt2, "stages", "s2", [c("stages", "get", "s2")]).allow
	on(mt2, "tasks", "k1", [c("tasks", "get", "k1")]).allow
}

test_machine_tenant_non_member_not_found if {
	d := on(mt2, "stages", "s3", [c("stages", "get", "s3")])
	d == {"allow": false, "not_found": true, "reasons": ["stages s3: Not Found"]}
	on(mt2, "tasks", "k2", [c("tasks", "get", "k2")]).not_found
}

test_machine_tenant_absent_scope_unrestricted_allowed if on(mt2, "params", "p1", [c("params", "get", "p1")]).allow

# In two tenants, a machine sees what both show.
test_machine_two_tenants_intersection_not_found if {
	on(mt1, "stages", "s1", [c("stages", "get", "s1")]).allow
	on(mt1, "stages", "s2", [c("stages", "get", "s2")]).not_found
	on(mt1, "tasks", "k2", [c("tasks", "get", "k2")]).not_found
	on(mt1, "tasks", "k1", [c("tasks", "get", "k1")]).allow
}

visible(p, scope) := fixtures.decide(
	fixtures.data_licensed,
	object.union(fixtures.request(p, [c(scope, "list", "")]), {"list": {"scope": scope}}),
).visible

test_machine_tenant_list_keys_restricted if {
	visible(mt1, "stages") == {"restricted": true, "keys": ["s1"]}
	visible(mt2, "stages") == {"restricted": true, "keys": ["s1", "s2"]}
	visible(mt1, "tasks") == {"restricted": true, "keys": ["k1"]}
}

test_machine_in_no_tenant_unrestricted_allowed if on(fixtures.machine("mt9", "operations"), "stages", "s3", [c("stages", "get", "s3")]).allow

# An operations token sees its own machine only: another is not found,
# whatever the token's claims, and the answer names the key as asked.
test_machine_operations_other_machine_not_found if {
	on(mt9op, "machines", "mt9", [c("machines", "get", "mt9")]).allow
	d := on(mt9op, "machines", "m2", [c("machines", "get", "m2")])
	d == {"allow": false, "not_found": true, "reasons": ["machines m2: Not Found"]}
	on(mt9op, "machines", "m2", [c("machines", "update:/Description", "m2")]).not_found
}

mt9op := fixtures.machine("mt9", "operations")

# Discovery tokens name no machine and belong to no tenant, even if a
# tenant happened to list their name.
test_machine_discovery_no_tenant_allowed if {
	on(fixtures.machine("mt1", "discovery"), "machines", "m9", [c("machines", "get", "m9")]).allow
}

# A tenant user named like a machine is restricted as a user only.
test_machine_tenants_not_for_users_allowed if on(fixtures.user("mt2", ["superuser"]), "stages", "s3", [c("stages", "get", "s3")]).allow

test_machine_tenant_names_from_data_exact if {
	tenancy.tenant_names == {"t3", "t4"} with input as {"principal": mt1}
		with data.provgate.tenants as fixtures.tenants
		with data.provgate.machine_tenants as fixtures.data_licensed.machine_tenants
	tenancy.tenant_names == set() with input as {"principal": fixtures.machine("mt9", "operations")}
		with data.provgate.tenants as fixtures.tenants
		with data.provgate.machine_tenants as fixtures.data_licensed.machine_tenants
}

# Data written without machine_tenants is searched.
test_machine_tenant_names_searched_exact if {
	tenancy.tenant_names == {"t3", "t4"} with input as {"principal": mt1} with data.provgate.tenants as fixtures.tenants
	tenancy.tenant_names == {"t4"} with input as {"principal": mt2} with data.provgate.tenants as fixtures.tenants
}
