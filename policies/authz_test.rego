# The decision: containment by self claims, direct claims and roles (docs/design.md
# §5.5), token restriction, fail-closed cases and
# the license gate (docs/design.md §7).
package provgate.authz_test

import data.provgate.fixtures

c(scope, action, specific) := fixtures.claim(scope, action, specific)

decide(principal, required) := fixtures.decide(fixtures.data_licensed, fixtures.request(principal, required))

decide_op(principal, required, operation, world) := fixtures.decide(
	world,
	object.union(fixtures.request(principal, required), {"operation": operation}),
)

test_superuser_role_get_allowed if {
	decide(fixtures.user("root", ["superuser"]), [c("machines", "get", "m1")]) == {"allow": true, "not_found": false, "reasons": []}
}

test_role_claim_allowed if decide(fixtures.user("olga", ["operator"]), [c("machines", "action:callbackDo", "m1")]).allow

test_role_claim_specific_list_allowed if decide(fixtures.user("olga", ["operator"]), [c("pools", "update:/Description", "p1")]).allow

test_missing_claim_denied_with_reason if {
	d := decide(fixtures.user("olga", ["operator"]), [c("pools", "update:/Description", "p3")])
	d == {"allow": false, "not_found": false, "reasons": ["Requires: pools update:/Description p3"]}
}

test_each_missing_claim_reason_listed if {
	d := decide(fixtures.user("rita", ["reader"]), [c("machines", "get", "m1"), c("pools", "get", "p1"), c("machines", "delete", "m1")])
	d.reasons == ["Requires: pools get p1", "Requires: machines delete m1"]
	not d.allow
}

test_unknown_role_denied if not decide(fixtures.user("ghost", ["no-such-role"]), [c("machines", "get", "m1")]).allow

test_no_roles_no_claims_denied if not decide(fixtures.user("nobody", []), [c("machines", "list", "")]).allow

test_empty_role_denied if not decide(fixtures.user("e", ["empty"]), [c("machines", "list", "")]).allow

test_direct_claim_allowed if {
	p := object.union(fixtures.user("dora", []), {"claims": [c("profiles", "get", "p1")]})
	decide(p, [c("profiles", "get", "p1")]).allow
	not decide(p, [c("profiles", "get", "p2")]).allow
}

# docs/design.md §5.5: each required claim may be satisfied by a different role.
test_claims_from_two_roles_allowed if {
	decide(fixtures.user("u", ["reader", "poolreader"]), [c("machines", "get", "m1"), c("pools", "get", "p1")]).allow
}

test_precompiled_role_allowed if {
	decide(fixtures.user("p", ["precompiled"]), [c("machines", "get", "m9")]).allow
	not decide(fixtures.user("p", ["precompiled"]), [c("machines", "get", "m1")]).allow
}

# policies.NewData gives each role an index (policies.IndexClaims); the
# policy then reads it instead of the role's claims.
test_role_index_read_allowed if {
	index := {"machines": {
		"get": {"all": false, "keys": {"m9": true}},
		"update:/Params": {"all": false, "keys": {"m9": true}},
		"update": {"all": true, "keys": {}},
	}}
	world := object.union(fixtures.data_licensed, {"roles": {"indexed": {"claims": [], "index": index}}})
	p := fixtures.user("i", ["indexed"])
	fixtures.decide(world, fixtures.request(p, [c("machines", "get", "m9")])).allow
	not fixtures.decide(world, fixtures.request(p, [c("machines", "get", "m1")])).allow
	fixtures.decide(world, fixtures.request(p, [c("machines", "update:/Name", "m1")])).allow
	not fixtures.decide(world, fixtures.request(p, [c("machines", "update:/Params/x", "m1")])).allow
}

# The gateway sends required claims with base and fallback filled in; the
# policy takes them as they are.
test_wanted_form_input_allowed if {
	w := object.union(c("machines", "update:/Params/foo", "abc"), {"base": "update", "fallback": ["update:/Params", "update:", "update"]})
	decide(fixtures.user("u", ["params-updater"]), [w]).allow
	not decide(fixtures.user("u", ["reader"]), [w]).allow
}

test_two_claims_one_role_exact_blocks_other_claim_allowed if {
	# update:/Params abc fails for xyz, but the role's second claim (bare
	# update on every machine) covers it: claims are tried one by one.
	decide(fixtures.user("u", ["params-updater"]), [c("machines", "update:/Params", "xyz")]).allow
}

# Roles are resolved at decision time: editing a role changes live tokens.
test_role_edit_applies_at_once_denied if {
	world := object.union(fixtures.data_licensed, {"roles": {"operator": {"claims": []}}})
	not fixtures.decide(world, fixtures.request(fixtures.user("olga", ["operator"]), [c("machines", "get", "m1")])).allow
}

# docs/design.md §5.5: implicit self claims.
test_self_get_allowed if decide(fixtures.user("bob", []), [c("users", "get", "bob")]).allow

test_self_password_allowed if decide(fixtures.user("bob", []), [c("users", "password", "bob")]).allow

test_self_token_allowed if decide(fixtures.user("bob", []), [c("users", "token", "bob")]).allow

test_self_info_get_allowed if decide(fixtures.user("bob", []), [c("info", "get", "")]).allow

test_self_other_user_denied if not decide(fixtures.user("bob", []), [c("users", "get", "alice")]).allow

# A required specific is compared exactly: "alice " is another user.
test_self_specific_not_trimmed_denied if {
	every s in ["alice ", " alice", "alice\t", "alice,bob", "*"] {
		every action in ["password", "token", "get"] {
			d := decide(fixtures.user("alice", []), [c("users", action, s)])
			d.reasons == [sprintf("Requires: users %s %s", [action, s])]
		}
	}
	decide(fixtures.user("alice", []), [c("users", "password", "alice")]).allow
}

test_self_update_denied if not decide(fixtures.user("bob", []), [c("users", "update:/Roles", "bob")]).allow

# Token restriction: required claims must also be inside the restriction,
# except those the self claims satisfy.
restricted(roles, restrict) := object.union(fixtures.user("rob", roles), {"restrict": restrict})

test_restrict_outside_denied if {
	d := decide(restricted(["superuser"], [c("machines", "get", "*")]), [c("pools", "get", "p1")])
	d.reasons == ["Requires: pools get p1"]
}

test_restrict_inside_allowed if decide(restricted(["superuser"], [c("machines", "get", "*")]), [c("machines", "get", "m1")]).allow

test_restrict_does_not_grant_denied if not decide(restricted([], [c("machines", "get", "*")]), [c("machines", "get", "m1")]).allow

# A restricted token keeps get and token on itself and info get (the self
# claims, outside its restriction) ...
test_restrict_self_get_token_info_exempt_allowed if {
	p := restricted(["superuser"], [c("machines", "get", "*")])
	decide(p, [c("users", "get", "rob")]).allow
	decide(p, [c("users", "token", "rob")]).allow
	decide(p, [c("info", "get", "")]).allow
}

# ... but never changes its own password or Secret, however wide its roles
# and restriction.
test_restrict_own_credentials_denied if {
	every p in [
		restricted(["superuser"], [c("machines", "get", "*")]),
		restricted(["superuser"], [c("users", "*", "rob")]),
		restricted(["superuser"], [c("*", "*", "*")]),
		role_token("rob", ["superuser"], ["superuser"]),
		role_token("rob", ["superuser"], []),
	] {
		every action in ["password", "update:/Secret", "update:/PasswordHash", "update", "update:"] {
			d := decide(p, [c("users", action, "rob")])
			d.reasons == [sprintf("Requires: users %s rob", [action])]
		}

		# The long path (a list in the claim) refuses them too.
		not decide(p, [c("users", "get,password", "rob")]).allow
		not decide(p, [c("users,info", "password", "rob")]).allow
	}
}

# Other users' credentials follow the roles, restricted or not.
test_restrict_other_users_credentials_allowed if {
	decide(restricted(["superuser"], [c("users", "*", "*")]), [c("users", "password", "ann")]).allow
	decide(role_token("rob", ["superuser"], ["superuser"]), [c("users", "update:/Secret", "ann")]).allow
	decide(role_token("rob", ["superuser"], ["superuser"]), [c("users", "update:/Description", "rob")]).allow
}

test_unrestricted_own_credentials_allowed if {
	decide(fixtures.user("rob", []), [c("users", "password", "rob")]).allow
	decide(fixtures.user("rob", ["superuser"]), [c("users", "update:/Secret", "rob")]).allow
}

# Tokens restricted to roles (roles=): a claim must be held by one of the
# token's roles and by one of the user's current roles.
role_token(name, roles, token_roles) := object.union(fixtures.user(name, roles), {"token_roles": token_roles})

test_token_roles_held_by_both_allowed if {
	decide(role_token("bob", ["operator"], ["reader"]), [c("machines", "get", "m1")]).allow
	decide(role_token("bob", ["operator"], ["reader"]), [c("machines", "list", "")]).allow
}

test_token_roles_not_held_by_token_role_denied if {
	d := decide(role_token("bob", ["operator"], ["reader"]), [c("machines", "action:callbackDo", "m1")])
	d.reasons == ["Requires: machines action:callbackDo m1"]
}

test_token_roles_role_taken_from_user_denied if {
	d := decide(role_token("bob", [], ["reader"]), [c("machines", "get", "m1")])
	d.reasons == ["Requires: machines get m1"]
	not decide(role_token("bob", ["poolreader"], ["reader"]), [c("machines", "get", "m1")]).allow
}

test_token_roles_widened_token_role_denied if {
	# The token names superuser (kept when the user held it); the user now
	# holds only reader: nothing beyond reader.
	p := role_token("bob", ["reader"], ["superuser"])
	decide(p, [c("machines", "get", "m1")]).allow
	not decide(p, [c("machines", "delete", "m1")]).allow
	not decide(p, [c("pools", "get", "p1")]).allow
}

test_token_roles_narrowed_user_role_denied if {
	world := object.union(fixtures.data_licensed, {"roles": {"operator": {"claims": [c("machines", "get", "m1")]}}})
	p := role_token("bob", ["operator"], ["reader"])
	fixtures.decide(world, fixtures.request(p, [c("machines", "get", "m1")])).allow
	not fixtures.decide(world, fixtures.request(p, [c("machines", "get", "m2")])).allow
}

test_token_roles_empty_only_self_denied if {
	p := role_token("bob", ["superuser"], [])
	not decide(p, [c("machines", "get", "m1")]).allow
	decide(p, [c("users", "get", "bob")]).allow
}

test_token_roles_unknown_token_role_denied if not decide(role_token("bob", ["superuser"], ["no-such-role"]), [c("machines", "get", "m1")]).allow

# The long path (claims with lists) applies the token's roles as well.
test_token_roles_list_claim_denied if {
	p := role_token("bob", ["superuser"], ["reader"])
	decide(p, [c("machines", "get,list", "m1")]).allow
	not decide(p, [c("machines", "get,delete", "m1")]).allow
}

test_token_roles_with_restrict_all_three_allowed if {
	p := object.union(role_token("bob", ["operator"], ["reader"]), {"restrict": [c("machines", "get", "m1")]})
	decide(p, [c("machines", "get", "m1")]).allow
	not decide(p, [c("machines", "get", "m2")]).allow
	not decide(p, [c("machines", "list", "")]).allow
}

# A null token_roles (as the gateway sends for tokens naming no roles) is
# not a restriction.
test_token_roles_null_unrestricted_allowed if {
	p := object.union(fixtures.user("bob", ["operator"]), {"token_roles": null})
	decide(p, [c("machines", "action:callbackDo", "m1")]).allow
	decide(p, [c("users", "password", "bob")]).allow
}

# Fail closed.
test_no_required_claims_denied if {
	d := decide(fixtures.user("root", ["superuser"]), [])
	not d.allow
	d.reasons == ["Requires: at least one claim"]
}

test_missing_required_field_denied if {
	not fixtures.decide(fixtures.data_licensed, {"principal": fixtures.user("root", ["superuser"])}).allow
}

test_unknown_required_scope_denied if {
	d := decide(fixtures.user("root", ["superuser"]), [c("bogus", "get", "x")])
	d.reasons == ["Requires: bogus get x"]
}

test_unknown_required_action_denied if not decide(fixtures.user("root", ["superuser"]), [c("machines", "bogus", "x")]).allow

test_unknown_principal_kind_denied if {
	not decide({"kind": "robot", "name": "r", "roles": ["superuser"], "claims": []}, [c("machines", "get", "m1")]).allow
}

# docs/design.md §7: the license gate for roles and tenants.
test_license_roles_create_denied if {
	d := decide_op(fixtures.user("root", ["superuser"]), [c("roles", "create", "")], "create", fixtures.data_unlicensed)
	d == {"allow": false, "not_found": false, "reasons": ["roles create is a licensed enterprise feature"]}
}

test_license_tenants_patch_denied if {
	d := decide_op(fixtures.user("root", ["superuser"]), [c("tenants", "update:/Users", "t1")], "patch", fixtures.data_unlicensed)
	d.reasons == ["tenants patch is a licensed enterprise feature"]
}

test_license_roles_delete_denied if {
	d := decide_op(fixtures.user("root", ["superuser"]), [c("roles", "delete", "r1")], "delete", fixtures.data_unlicensed)
	not d.allow
}

test_license_roles_action_denied if not decide_op(fixtures.user("root", ["superuser"]), [c("roles", "action:x", "r1")], "action:x", fixtures.data_unlicensed).allow

test_license_no_operation_uses_action_denied if {
	d := decide_op(fixtures.user("root", ["superuser"]), [c("roles", "update:/Claims", "r1")], "", fixtures.data_unlicensed)
	d.reasons == ["roles update:/Claims is a licensed enterprise feature"]
}

# A required claim naming two actions of one licensed scope is refused
# for both, not an evaluation error.
test_license_two_actions_one_scope_denied if {
	d := decide_op(fixtures.user("root", ["superuser"]), [c("roles", "create,delete", "")], "", fixtures.data_unlicensed)
	not d.allow
	count(d.reasons) >= 1
}

test_license_roles_list_allowed if decide_op(fixtures.user("root", ["superuser"]), [c("roles", "list", "")], "list", fixtures.data_unlicensed).allow

test_license_tenants_get_allowed if decide_op(fixtures.user("root", ["superuser"]), [c("tenants", "get", "t1")], "get", fixtures.data_unlicensed).allow

test_license_other_scope_allowed if decide_op(fixtures.user("root", ["superuser"]), [c("machines", "create", "")], "create", fixtures.data_unlicensed).allow

test_license_rbac_valid_allowed if decide_op(fixtures.user("admin", ["rbac-admin"]), [c("roles", "create", "")], "create", fixtures.data_licensed).allow

test_license_without_rbac_feature_denied if {
	d := object.union(fixtures.data_licensed, {"license": {"valid": true, "features": ["secure-params"]}})
	not decide_op(fixtures.user("root", ["superuser"]), [c("roles", "create", "")], "create", d).allow
}

test_license_expired_denied if {
	d := object.union(fixtures.data_licensed, {"license": {"valid": false, "features": ["rbac"]}})
	not decide_op(fixtures.user("root", ["superuser"]), [c("tenants", "create", "")], "create", d).allow
}

test_license_and_claim_reasons_listed if {
	d := decide_op(fixtures.user("rita", ["reader"]), [c("roles", "create", "")], "create", fixtures.data_unlicensed)
	d.reasons == ["roles create is a licensed enterprise feature", "Requires: roles create "]
}

test_null_required_denied if {
	r := object.union(fixtures.request(fixtures.user("root", ["superuser"]), []), {"required": null})
	d := fixtures.decide(fixtures.data_licensed, r)
	d == {"allow": false, "not_found": false, "reasons": ["Requires: at least one claim"]}
}

test_malformed_required_claim_denied if {
	d := decide(fixtures.user("root", ["superuser"]), [{"scope": "machines"}, c("machines", "get", "m1")])
	d == {"allow": false, "not_found": false, "reasons": ["Requires: a well-formed claim"]}
}

test_non_string_claim_fields_denied if {
	d := decide(fixtures.user("root", ["superuser"]), [{"scope": "machines", "action": "get", "specific": 7}])
	d == {"allow": false, "not_found": false, "reasons": ["Requires: a well-formed claim"]}
}

# The one pass (plainly_allowed): a role's index, a tenant's member set
# and required claims in the wanted form, as the server has them.
plain_world := object.union(fixtures.data_licensed, {"roles": {
	"params-indexed": {"claims": [], "index": {"machines": {
		"get": {"all": false, "keys": {"m3": true, "m1": true}},
		"update:/Params": {"all": false, "keys": {"m3": true, "m1": true}},
		"update:/Params/foo": {"all": false, "keys": {"m9": true}},
	}}},
	"rbac-indexed": {"claims": [], "index": {"roles": {"update": {"all": true, "keys": {}}}}},
}})

# The gateway always sends token_roles, null when the token names none.
plain_user(name, roles) := object.union(fixtures.user(name, roles), {"token_roles": null})

wanted(scope, action, specific, base, fallback) := object.union(c(scope, action, specific), {"base": base, "fallback": fallback})

params_bar(key) := wanted("machines", "update:/Params/bar", key, "update", ["update:/Params", "update:", "update"])

plain_request(principal, w, key) := object.union(fixtures.request(principal, [w]), {"object": {"scope": w.scope, "key": key}})

plainly(world, request_) if {
	data.provgate.authz.plainly_allowed with input as request_
		with data.provgate.roles as world.roles
		with data.provgate.tenants as world.tenants
		with data.provgate.user_tenant as world.user_tenant
		with data.provgate.machine_tenants as world.machine_tenants
		with data.provgate.license as world.license
		with data.provgate.scopes as world.scopes
}

# tom's tenant t2 lists m3 in its member set.
test_plainly_allowed_in_one_pass if {
	r := plain_request(plain_user("tom", ["params-indexed"]), params_bar("m3"), "m3")
	plainly(plain_world, r)
	fixtures.decide(plain_world, r) == {"allow": true, "not_found": false, "reasons": []}
}

test_plainly_allowed_without_tenant if {
	r := plain_request(plain_user("noel", ["params-indexed"]), params_bar("m1"), "m1")
	plainly(plain_world, r)
	fixtures.decide(plain_world, r).allow
}

# The rest is left to outcome, which decides as before.
test_plainly_allowed_leaves_hidden_object if {
	r := plain_request(plain_user("tom", ["params-indexed"]), params_bar("m1"), "m1")
	not plainly(plain_world, r)
	fixtures.decide(plain_world, r).not_found
}

test_plainly_allowed_leaves_token_roles if {
	p := object.union(plain_user("tom", ["params-indexed"]), {"token_roles": ["params-indexed"]})
	r := plain_request(p, params_bar("m3"), "m3")
	not plainly(plain_world, r)
	fixtures.decide(plain_world, r).allow
}

# The exact action key is present and does not name m3: no fallback.
test_plainly_allowed_exact_key_wins if {
	w := wanted("machines", "update:/Params/foo", "m3", "update", ["update:/Params", "update:", "update"])
	r := plain_request(plain_user("tom", ["params-indexed"]), w, "m3")
	not plainly(plain_world, r)
	not fixtures.decide(plain_world, r).allow
}

test_plainly_allowed_leaves_licensed_scope if {
	w := wanted("roles", "update", "reader", "update", [])
	r := fixtures.request(plain_user("noel", ["rbac-indexed"]), [w])
	not plainly(plain_world, r)
	fixtures.decide(plain_world, r).allow
	not fixtures.decide(object.union(plain_world, {"license": {"valid": false, "features": []}}), r).allow
}

# t1 has no member set (data written by hand): tenancy decides.
test_plainly_allowed_leaves_tenant_without_member_set if {
	r := plain_request(plain_user("tina", ["params-indexed"]), params_bar("m1"), "m1")
	not plainly(plain_world, r)
	fixtures.decide(plain_world, r).allow
}

test_plainly_allowed_leaves_several_claims if {
	r := plain_request(plain_user("tom", ["params-indexed"]), params_bar("m3"), "m3")
	r2 := object.union(r, {"required": [params_bar("m3"), wanted("machines", "get", "m3", "get", [])]})
	not plainly(plain_world, r2)
	fixtures.decide(plain_world, r2).allow
}
