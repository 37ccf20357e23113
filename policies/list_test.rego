# Lists: which objects a collection read may return (decision.visible),
# from the tenant's members and the claims granting get.
package provgate.list_test

import data.provgate.fixtures

c(scope, action, specific) := fixtures.claim(scope, action, specific)

list_of(principal, scope) := fixtures.decide(
	fixtures.data_licensed,
	object.union(fixtures.request(principal, [c(scope, "list", "")]), {"list": {"scope": scope}}),
)

test_list_superuser_unrestricted if {
	d := list_of(fixtures.user("root", ["superuser"]), "machines")
	d == {"allow": true, "not_found": false, "reasons": [], "visible": {"restricted": false}}
}

test_list_get_all_unrestricted if list_of(fixtures.user("rita", ["reader"]), "machines").visible == {"restricted": false}

test_list_get_specifics_restricted if {
	d := list_of(fixtures.user("mia", ["m1reader"]), "machines")
	d.allow
	d.visible == {"restricted": true, "keys": ["m1"]}
}

test_list_specific_union_of_roles_restricted if {
	d := list_of(fixtures.user("mia", ["m1reader", "precompiled"]), "machines")
	d.visible == {"restricted": true, "keys": ["m1", "m9"]}
}

test_list_get_all_in_one_role_unrestricted if {
	list_of(fixtures.user("mia", ["m1reader", "reader"]), "machines").visible == {"restricted": false}
}

test_list_without_list_claim_denied if {
	p := object.union(fixtures.user("dora", []), {"claims": [c("machines", "get", "m1")]})
	d := list_of(p, "machines")
	not d.allow
	d.reasons == ["Requires: machines list "]
	d.visible == {"restricted": true, "keys": ["m1"]}
}

test_list_no_get_restricted_empty if {
	p := object.union(fixtures.user("dora", []), {"claims": [c("machines", "list", "*")]})
	d := list_of(p, "machines")
	d.allow
	d.visible == {"restricted": true, "keys": []}
}

test_list_tenant_members_restricted if {
	d := list_of(fixtures.user("tina", ["superuser"]), "machines")
	d.visible == {"restricted": true, "keys": ["m1", "m2"]}
}

test_list_tenant_empty_members_restricted if {
	list_of(fixtures.user("tina", ["superuser"]), "profiles").visible == {"restricted": true, "keys": []}
}

test_list_tenant_absent_scope_unrestricted if list_of(fixtures.user("tina", ["superuser"]), "pools").visible == {"restricted": false}

test_list_tenant_and_get_intersection_restricted if {
	list_of(fixtures.user("tina", ["m1reader"]), "machines").visible == {"restricted": true, "keys": ["m1"]}
	list_of(fixtures.user("tina", ["precompiled"]), "machines").visible == {"restricted": true, "keys": []}
}

test_list_tenant_member_set_restricted if {
	list_of(fixtures.user("tom", ["superuser"]), "machines").visible == {"restricted": true, "keys": ["m3"]}
}

test_list_users_self_visible_restricted if {
	d := list_of(fixtures.user("bob", []), "users")
	not d.allow
	d.visible == {"restricted": true, "keys": ["bob"]}
}

restricted(roles, restrict) := object.union(fixtures.user("rob", roles), {"restrict": restrict})

test_list_restrict_narrows_restricted if {
	d := list_of(restricted(["superuser"], [c("machines", "get,list", "m1,m2")]), "machines")
	d.allow
	d.visible == {"restricted": true, "keys": ["m1", "m2"]}
}

test_list_restrict_all_held_all_unrestricted if {
	list_of(restricted(["superuser"], [c("machines", "get,list", "*")]), "machines").visible == {"restricted": false}
}

test_list_restrict_all_held_specific_restricted if {
	d := list_of(restricted(["m1reader"], [c("machines", "get,list", "*")]), "machines")
	d.visible == {"restricted": true, "keys": ["m1"]}
}

test_list_restrict_and_held_specifics_intersection_restricted if {
	d := list_of(restricted(["m1reader", "precompiled"], [c("machines", "get,list", "m9,m7")]), "machines")
	d.visible == {"restricted": true, "keys": ["m9"]}
}

test_list_restrict_keeps_self_restricted if {
	d := list_of(restricted(["superuser"], [c("machines", "get", "*")]), "users")
	d.visible == {"restricted": true, "keys": ["rob"]}
}

role_token(roles, token_roles) := object.union(fixtures.user("bob", roles), {"token_roles": token_roles})

test_list_token_roles_both_all_unrestricted if {
	list_of(role_token(["superuser"], ["reader"]), "machines").visible == {"restricted": false}
}

test_list_token_roles_user_role_narrower_restricted if {
	d := list_of(role_token(["m1reader"], ["reader"]), "machines")
	d.allow
	d.visible == {"restricted": true, "keys": ["m1"]}
}

test_list_token_roles_token_role_narrower_restricted if {
	d := list_of(role_token(["reader"], ["m1reader"]), "machines")
	d.allow
	d.visible == {"restricted": true, "keys": ["m1"]}
}

test_list_token_roles_intersection_restricted if {
	d := list_of(role_token(["m1reader", "precompiled"], ["precompiled"]), "machines")
	d.visible == {"restricted": true, "keys": ["m9"]}
}

test_list_token_roles_role_taken_from_user_denied if {
	d := list_of(role_token([], ["reader"]), "machines")
	not d.allow
	d.visible == {"restricted": true, "keys": []}
}

test_list_token_roles_restrict_and_roles_restricted if {
	p := object.union(role_token(["m1reader", "precompiled"], ["superuser"]), {"restrict": [c("machines", "get,list", "m9,m7")]})
	list_of(p, "machines").visible == {"restricted": true, "keys": ["m9"]}
}

test_list_token_roles_keep_self_restricted if {
	list_of(role_token(["superuser"], ["reader"]), "users").visible == {"restricted": true, "keys": ["bob"]}
}

test_list_machine_operations_own_only_restricted if {
	uuid := "3e7031fe-3062-45f1-835c-92541bc9cbd3"
	d := list_of(fixtures.machine(uuid, "operations"), "machines")
	not d.allow
	d.visible == {"restricted": true, "keys": [uuid]}
}

test_list_machine_discovery_unrestricted if {
	list_of(fixtures.machine("m", "discovery"), "machines").visible == {"restricted": false}
}

test_list_unknown_kind_restricted if {
	list_of({"kind": "robot", "name": "r", "roles": [], "claims": []}, "machines").visible == {"restricted": true, "keys": []}
}

test_not_a_list_no_visible_exact if {
	d := fixtures.decide(fixtures.data_licensed, fixtures.request(fixtures.user("root", ["superuser"]), [c("machines", "get", "m1")]))
	not d.visible
}
