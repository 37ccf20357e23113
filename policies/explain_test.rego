# The explain trail (docs/design.md §9.8): each step reports what the
# decision's own rules found, and the trail agrees with the decision.
package provgate.explain_test

import data.provgate.fixtures

c(scope, action, specific) := fixtures.claim(scope, action, specific)

explain(world, request_) := out if {
	out := {"decision": data.provgate.authz.decision, "trail": data.provgate.explain.trail} with input as request_
		with data.provgate.roles as world.roles
		with data.provgate.tenants as world.tenants
		with data.provgate.user_tenant as world.user_tenant
		with data.provgate.machine_tenants as world.machine_tenants
		with data.provgate.license as world.license
		with data.provgate.scopes as world.scopes
		with data.provgate.roles_indexed as object.get(world, "roles_indexed", false)
}

on_object(req, scope, key) := object.union(req, {"object": {"scope": scope, "key": key}})

test_role_claim_covered_names_role_and_claim if {
	x := explain(fixtures.data_licensed, fixtures.request(fixtures.user("olga", ["operator"]), [c("machines", "get", "m1")]))
	x.decision.allow
	step := x.trail.claims[0]
	step.held
	step.covered_by == {{"source": "role", "role": "operator", "claim": {"scope": "machines", "action": "get,list,action:callbackDo", "specific": "*"}}}
	x.trail.vetoes_consulted
}

test_missing_claim_not_covered_lists_granting_roles if {
	x := explain(fixtures.data_licensed, fixtures.request(fixtures.user("olga", ["operator"]), [c("pools", "update:/Description", "p3")]))
	not x.decision.allow
	step := x.trail.claims[0]
	not step.held
	step.covered_by == set()
	step.granted_by == ["superuser"]
	not x.trail.vetoes_consulted
}

test_self_claim_covered_by_self if {
	x := explain(fixtures.data_licensed, fixtures.request(fixtures.user("nobody", []), [c("users", "password", "nobody")]))
	x.decision.allow
	x.trail.claims[0].covered_by == {{"source": "self", "role": "", "claim": ""}}
}

test_tenant_hidden_names_hiding_tenant if {
	req := on_object(fixtures.request(fixtures.user("tina", ["superuser"]), [c("machines", "get", "m3")]), "machines", "m3")
	x := explain(fixtures.data_licensed, req)
	x.decision.not_found
	x.trail.tenant == {"tenants": ["t1"], "hidden": true, "hidden_by": ["t1"], "other_machine": false}
}

test_tenant_member_visible if {
	req := on_object(fixtures.request(fixtures.user("tina", ["superuser"]), [c("machines", "get", "m1")]), "machines", "m1")
	x := explain(fixtures.data_licensed, req)
	x.decision.allow
	x.trail.tenant.hidden == false
	x.trail.tenant.hidden_by == []
}

test_other_machine_hidden_for_operations_token if {
	req := on_object(fixtures.request(fixtures.machine("mt2", "operations"), [c("machines", "get", "mt1")]), "machines", "mt1")
	x := explain(fixtures.data_licensed, req)
	x.decision.not_found
	x.trail.tenant.other_machine
}

test_machine_token_covers_own_machine if {
	req := on_object(fixtures.request(fixtures.machine("mt2", "operations"), [c("machines", "get", "mt2")]), "machines", "mt2")
	x := explain(fixtures.data_licensed, req)
	x.decision.allow
	x.trail.claims[0].covered_by == {{"source": "machine_token", "role": "operations", "claim": ""}}
}

test_unlicensed_role_change_reports_license_failure if {
	x := explain(fixtures.data_unlicensed, fixtures.request(fixtures.user("r", ["rbac-admin"]), [c("roles", "create", "x")]))
	not x.decision.allow
	x.trail.license.licensed == false
	x.trail.license.failures == ["roles create is a licensed enterprise feature"]
	x.trail.claims[0].held
	x.trail.claims[0].licensed == false
}

test_token_roles_step_names_covering_token_role if {
	p := object.union(fixtures.user("u", ["reader", "poolreader"]), {"token_roles": ["poolreader"]})
	x := explain(fixtures.data_licensed, fixtures.request(p, [c("machines", "get", "m1"), c("pools", "get", "p1")]))
	not x.decision.allow
	x.trail.claims[0].token_roles == {"restricted": true, "covered_by": []}
	not x.trail.claims[0].held
	x.trail.claims[1].token_roles == {"restricted": true, "covered_by": ["poolreader"]}
	x.trail.claims[1].held
}

test_claim_restriction_step_reports_cover if {
	p := object.union(fixtures.user("u", ["reader"]), {"restrict": [c("machines", "get", "m1")]})
	x := explain(fixtures.data_licensed, fixtures.request(p, [c("machines", "get", "m2")]))
	not x.decision.allow
	x.trail.claims[0].restriction == {"restricted": true, "covered": false}
}

test_restricted_token_own_password_flagged if {
	p := object.union(fixtures.user("u", ["superuser"]), {"token_roles": ["superuser"]})
	x := explain(fixtures.data_licensed, fixtures.request(p, [c("users", "password", "u")]))
	not x.decision.allow
	x.trail.claims[0].own_credential
}

test_extension_veto_named_with_package if {
	req := fixtures.request(fixtures.user("root", ["superuser"]), [c("machines", "delete", "m1")])
	x := explain(fixtures.data_licensed, req) with data.provgate.ext as {"freeze": {"deny": {"frozen"}}}
	not x.decision.allow
	x.trail.vetoes_consulted
	x.trail.vetoes == [{"package": "freeze", "message": "frozen"}]
	x.decision.reasons == ["frozen"]
}

# Every held/not-held verdict of the trail is the decision's: a request is
# allowed exactly when every claim step is held and licensed and no veto
# applies.
test_trail_agrees_with_decision if {
	every req in [
		fixtures.request(fixtures.user("olga", ["operator"]), [c("machines", "get", "m1"), c("pools", "get", "p3")]),
		fixtures.request(fixtures.user("olga", ["operator"]), [c("pools", "update:/Description", "p1")]),
		fixtures.request(fixtures.user("rita", ["reader"]), [c("machines", "list", "")]),
		fixtures.request(fixtures.user("r", ["rbac-admin"]), [c("roles", "create", "x")]),
	] {
		x := explain(fixtures.data_licensed, req)
		all_held := count([s | some s in x.trail.claims; s.held; s.licensed]) == count(x.trail.claims)
		x.decision.allow == all_held
	}
}

# An allowed request of a token that is not restricted has its trail
# written without working out the steps that passed; it is the trail the
# steps give.
test_allowed_trail_is_the_steps_trail if {
	every req in [
		fixtures.request(fixtures.user("olga", ["operator", "reader"]), [c("machines", "get", "m1"), c("machines", "list", "")]),
		fixtures.request(fixtures.user("nobody", []), [c("users", "password", "nobody"), c("info", "get", "")]),
		fixtures.request(object.union(fixtures.user("d", []), {"claims": [c("pools", "get,list", "p1")]}), [c("pools", "get", "p1")]),
		fixtures.request(fixtures.user("root", ["superuser"]), [c("machines,pools", "get", "m1")]),
		on_object(fixtures.request(fixtures.machine("mt2", "operations"), [c("machines", "get", "mt2")]), "machines", "mt2"),
	] {
		x := explain(fixtures.data_licensed, req)
		x.decision.allow
		x.trail == steps_trail(fixtures.data_licensed, req)
	}
}

steps_trail(world, request_) := out if {
	out := {
		"tenant": data.provgate.explain.tenant_step,
		"license": data.provgate.explain.license_step,
		"claims": [data.provgate.explain.claim_step(x) | some x in request_.required],
		"vetoes_consulted": data.provgate.explain.vetoes_consulted,
		"vetoes": data.provgate.explain.veto_steps,
	} with input as request_
		with data.provgate.roles as world.roles
		with data.provgate.tenants as world.tenants
		with data.provgate.user_tenant as world.user_tenant
		with data.provgate.machine_tenants as world.machine_tenants
		with data.provgate.license as world.license
		with data.provgate.scopes as world.scopes
}

test_role_diff_lists_uncovered_atoms_both_ways if {
	d := data.provgate.explain.role_diff(
		[c("machines", "get,list", "*"), c("pools", "get", "p1")],
		[c("machines", "get", "m1,m2"), c("pools", "*", "p1,p2")],
	) with data.provgate.scopes as fixtures.scopes
	d.only_a == ["machines get *", "machines list *"]
	"pools delete p2" in d.only_b
	not "machines get m1" in d.only_b
	"pools delete p1" in d.only_b
	not "pools get p1" in d.only_b
}

test_role_diff_equal_roles_empty if {
	d := data.provgate.explain.role_diff([c("machines", "*", "*")], [c("machines", "*", "*")]) with data.provgate.scopes as fixtures.scopes
	d == {"only_a": [], "only_b": []}
}

# Roles in the form policies.NewData stores them (claims, compiled,
# index), tenants with member sets: the one pass of the decision
# (authz.plainly_allowed) allows, and the trail written from its lookups
# is the trail the steps give.
indexed_role(cs, compiled, index) := {"claims": cs, "compiled": compiled, "index": index}

# An index entry merging the claims at positions ps, which list keys
# (policies.IndexClaims).
node(keys, ps) := {"all": false, "keys": {k: ps | some k in keys}, "all_by": []}

compiled_node(keys) := {"all": false, "keys": {k: true | some k in keys}}

every_key := {"all": true, "keys": {}}

every_key_by(ps) := {"all": true, "keys": {}, "all_by": ps}

plain_world := object.union(fixtures.data_licensed, {
	"roles": {
		"params": indexed_role(
			[c("machines", "get,update:/Params", "m1,m3")],
			[{"machines": {"get": compiled_node(["m1", "m3"]), "update:/Params": compiled_node(["m1", "m3"])}}],
			{"machines": {"get": node(["m1", "m3"], [0]), "update:/Params": node(["m1", "m3"], [0])}},
		),
		"wide": indexed_role(
			[c("machines", "update", "*")],
			[{"machines": {"update": every_key}}],
			{"machines": {"update": every_key_by([0])}},
		),
		"m3getter": indexed_role(
			[c("machines", "get", "m3"), c("pools", "get", "p1")],
			[{"machines": {"get": compiled_node(["m3"])}}, {"pools": {"get": compiled_node(["p1"])}}],
			{"machines": {"get": node(["m3"], [0])}, "pools": {"get": node(["p1"], [1])}},
		),
		"lister": indexed_role(
			[c("machines", "list", "m1")],
			[{"machines": {"list": compiled_node(["m1"])}}],
			{"machines": {"list": node(["m1"], [0])}},
		),
		"alllister": indexed_role(
			[c("machines", "list", "*")],
			[{"machines": {"list": every_key}}],
			{"machines": {"list": every_key_by([0])}},
		),
		"usersget": indexed_role(
			[c("users", "get", "*")],
			[{"users": {"get": every_key}}],
			{"users": {"get": every_key_by([0])}},
		),
		# Written by hand without an index: its claims are matched one by one.
		"unindexed": {"claims": [c("machines", "update", "m3")]},
	},
	"tenants": {"t2": {"members": {"machines": ["m3"]}, "member_set": {"machines": {"m3": true}}, "users": ["tom"]}},
	"user_tenant": {"tom": "t2"},
})

plain_user(name, roles) := object.union(fixtures.user(name, roles), {"token_roles": null})

wanted(scope, action, specific, base, fallback) := object.union(c(scope, action, specific), {"base": base, "fallback": fallback})

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

# Worlds and requests the one pass allows.
plain_cases := [
	# Two roles cover through fallback keys, a third does not.
	[plain_world, plain_request(plain_user("tom", ["params", "wide", "m3getter"]), params_bar, "m3")],
	[plain_world, plain_request(plain_user("tom", ["params", "m3getter", "nosuchrole"]), get_m3, "m3")],
	# A role without an index covers beside one with it.
	[plain_world, plain_request(plain_user("tom", ["params", "unindexed"]), params_bar, "m3")],
	[object.union(plain_world, {"license": {"valid": false, "features": []}}), plain_request(plain_user("tom", ["params", "m3getter"]), get_m3, "m3")],
	# An empty specific (a list) is covered by a node of any key.
	[plain_world, fixtures.request(plain_user("noel", ["lister", "alllister"]), [wanted("machines", "list", "", "list", [])])],
	# A direct claim and a self claim cover beside a role.
	[plain_world, plain_request(object.union(plain_user("noel", ["params"]), {"claims": [c("machines", "get", "*")]}), wanted("machines", "get", "m1", "get", []), "m1")],
	[plain_world, plain_request(plain_user("tom", ["usersget"]), wanted("users", "get", "tom", "get", []), "tom")],
]

params_bar := wanted("machines", "update:/Params/bar", "m3", "update", ["update:/Params", "update:", "update"])

get_m3 := wanted("machines", "get", "m3", "get", [])

test_plainly_allowed_trail_is_the_steps_trail if {
	every case in plain_cases {
		[world, req] := case
		trail_is_the_steps_trail(world, req)

		# The same world with its indexed roles only, marked as such
		# (policies.Data.Normalized): the covers are read from the indexes.
		trail_is_the_steps_trail(indexed_only(world), req)
	}
}

# The server is handed the values a one-pass trail is written from
# (explanation; policies/opa writes the trail from them): they are the
# trail's tenants and covers; its license step is authz.licensed.
test_explanation_hands_the_trails_values if {
	every case in plain_cases {
		[world, req] := case
		explanation_is_the_trails(world, req)
		explanation_is_the_trails(indexed_only(world), req)
	}
}

explanation_is_the_trails(world, req) if {
	pass := data.provgate.explain.explanation.pass with input as req
		with data.provgate.roles as world.roles
		with data.provgate.tenants as world.tenants
		with data.provgate.user_tenant as world.user_tenant
		with data.provgate.machine_tenants as world.machine_tenants
		with data.provgate.license as world.license
		with data.provgate.scopes as world.scopes
		with data.provgate.roles_indexed as object.get(world, "roles_indexed", false)
	trail := explain(world, req).trail
	pass.tenants == trail.tenant.tenants
	object.keys(pass) == {"tenants", "self", "roles", "claims"}
	licensed := count({true | data.provgate.authz.licensed with data.provgate.license as world.license}) == 1
	licensed == trail.license.licensed
	covers := ({{"source": "self", "role": "", "claim": ""} | some _ in pass.self} | {{"source": "role", "role": r, "claim": cl} | some [r, cl] in pass.roles}) | {{"source": "claim", "role": "", "claim": dc} | some dc in pass.claims}
	covers == trail.claims[0].covered_by
	count(covers) > 0
}

test_refused_explanation_is_the_trail if {
	req := plain_request(plain_user("tom", ["m3getter"]), params_bar, "m3")
	x := data.provgate.explain.explanation with input as req
		with data.provgate.roles as plain_world.roles
		with data.provgate.tenants as plain_world.tenants
		with data.provgate.user_tenant as plain_world.user_tenant
		with data.provgate.machine_tenants as plain_world.machine_tenants
		with data.provgate.license as plain_world.license
		with data.provgate.scopes as plain_world.scopes
	x == {"trail": explain(plain_world, req).trail}
	not explain(plain_world, req).decision.allow
}

indexed_only(world) := object.union(object.remove(world, ["roles"]), {
	"roles": {name: r | some name, r in world.roles; r.index},
	"roles_indexed": true,
})

trail_is_the_steps_trail(world, req) if {
	plainly(world, req)
	x := explain(world, req)
	x.decision.allow
	x.trail == steps_trail(world, req)
	count(x.trail.claims[0].covered_by) > 0
}

# The covers named for the first case.
test_plainly_allowed_trail_names_each_covering_role if {
	every world in [plain_world, indexed_only(plain_world)] {
		x := explain(world, plain_request(plain_user("tom", ["params", "wide", "m3getter"]), params_bar, "m3"))
		x.trail.claims[0].covered_by == {
			{"source": "role", "role": "params", "claim": c("machines", "get,update:/Params", "m1,m3")},
			{"source": "role", "role": "wide", "claim": c("machines", "update", "*")},
		}
		x.trail.tenant.tenants == ["t2"]
	}
}
