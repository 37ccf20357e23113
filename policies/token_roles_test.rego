# Token restriction by roles (docs/design.md §5.6, §5.5): a requested role
# is kept only if it exists and one single role of the user contains it.
package provgate.token_roles_test

import data.provgate.fixtures

kept(user_roles, requested) := fixtures.token_roles(fixtures.data_licensed, user_roles, requested)

test_token_roles_narrower_role_kept if kept(["operator"], ["reader"]) == ["reader"]

test_token_roles_superuser_keeps_any_kept if {
	kept(["superuser"], ["operator", "rbac-admin", "precompiled"]) == ["operator", "rbac-admin", "precompiled"]
}

test_token_roles_same_role_kept if kept(["operator"], ["operator"]) == ["operator"]

test_token_roles_wider_role_dropped if kept(["reader"], ["operator"]) == []

test_token_roles_specific_role_in_all_role_kept if kept(["reader"], ["m1reader"]) == ["m1reader"]

test_token_roles_all_role_in_specific_role_dropped if kept(["m1reader"], ["reader"]) == []

test_token_roles_unknown_requested_dropped if kept(["superuser"], ["no-such-role"]) == []

test_token_roles_unknown_user_role_dropped if kept(["no-such-role"], ["empty"]) == []

test_token_roles_empty_role_kept if kept(["reader"], ["empty"]) == ["empty"]

# Containment is role against role: claims spread over two user roles do
# not make a role that needs both.
test_token_roles_spread_over_two_roles_dropped if {
	world := object.union(fixtures.data_licensed, {"roles": {"both": {"claims": [
		fixtures.claim("machines", "get", "*"),
		fixtures.claim("pools", "get", "*"),
	]}}})
	fixtures.token_roles(world, ["reader", "poolreader"], ["both"]) == []
	fixtures.token_roles(world, ["superuser"], ["both"]) == ["both"]
}

test_token_roles_order_kept_duplicates_once if {
	kept(["superuser"], ["reader", "operator", "reader", "empty"]) == ["reader", "operator", "empty"]
}

test_token_roles_mixed_kept_and_dropped if kept(["operator"], ["reader", "superuser", "m1reader"]) == ["reader", "m1reader"]

test_token_roles_precompiled_user_role_kept if {
	world := object.union(fixtures.data_licensed, {"roles": {"m9get": {"claims": [fixtures.claim("machines", "get", "m9")]}}})
	fixtures.token_roles(world, ["precompiled"], ["m9get"]) == ["m9get"]
	fixtures.token_roles(world, ["precompiled"], ["m1reader"]) == []
}
