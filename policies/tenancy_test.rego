# Tenant visibility (spec "Tenant", reference §4.6): applied before roles,
# hidden objects are not found.
package provgate.tenancy_test

import data.provgate.fixtures

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

# Spec "Tenant" rule 3: the tenant check comes first, so a hidden object is
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
