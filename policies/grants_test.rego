# The grant check (docs/design.md §5.9): a write hands out only what its
# writer holds, by the containment requests use, unless the writer holds
# the explicit delegation or is the subject itself.
package provgate.grants_test

import data.provgate.fixtures

c(scope, action, specific) := fixtures.claim(scope, action, specific)

u(name, roles) := fixtures.user(name, roles)

# The superuser as policies.NewData stores it (compiled, with its index),
# as the server serves it: "* * *" compiled is every action of every scope.
every_action := {scope: {a: {"all": true, "keys": {}} | some a in actions} | some scope, actions in fixtures.scopes}

world := object.union(fixtures.data_licensed, {"roles": {"superuser": {
	"claims": [c("*", "*", "*")],
	"compiled": [every_action],
	"index": every_action,
}}})

ungranted(p, grants) := fixtures.ungranted(world, p, grants)

claims_of(cs) := [{"claims": cs}]

test_superuser_grants_everything if {
	ungranted(u("root", ["superuser"]), claims_of([c("*", "*", "*")])) == []
	ungranted(u("root", ["superuser"]), [{"role": "superuser", "via": c("roles", "bind", "superuser")}]) == []
}

test_held_claim_is_granted if {
	ungranted(u("r", ["reader"]), claims_of([c("machines", "get", "*"), c("machines", "list", "m1")])) == []
}

test_unheld_action_is_listed if {
	ungranted(u("r", ["reader"]), claims_of([c("machines", "get,delete", "*")])) == [c("machines", "delete", "*")]
}

# A list is broken into one atom per scope, action and specific; only the
# atoms not held are listed.
test_lists_are_broken_into_atoms if {
	ungranted(u("r", ["m1reader"]), claims_of([c("machines,pools", "get", "m1,m2")])) == [
		c("machines", "get", "m2"),
		c("pools", "get", "m1"),
		c("pools", "get", "m2"),
	]
}

# Every object is more than each listed object: only a claim on "*"
# contains a grant on "*".
test_star_needs_star if {
	ungranted(u("r", ["m1reader"]), claims_of([c("machines", "get", "*")])) == [c("machines", "get", "*")]
	ungranted(u("r", ["reader"]), claims_of([c("machines", "get", "m1,m9")])) == []
}

# update:<pointer> is contained by its ancestors and bare update, as for
# requests; a narrower pointer does not contain a wider one.
test_update_pointers if {
	ungranted(u("p", ["params-updater"]), claims_of([c("machines", "update:/Params/foo", "x")])) == []
	ungranted(u("p", ["params-updater"]), claims_of([c("machines", "update:/Params", "abc,zzz")])) == []
	w := object.union(world, {"roles": {"pu": {"claims": [c("machines", "update:/Params/foo", "*")]}}})
	fixtures.ungranted(w, u("p", ["pu"]), claims_of([c("machines", "update:/Params", "m1")])) == [c("machines", "update:/Params", "m1")]
	fixtures.ungranted(w, u("p", ["pu"]), claims_of([c("machines", "update:/Params/foo/bar", "m1")])) == []
}

test_action_forms if {
	ungranted(u("o", ["operator"]), claims_of([c("machines", "action:callbackDo", "m1")])) == []
	ungranted(u("o", ["operator"]), claims_of([c("machines", "action", "m1")])) == [c("machines", "action", "m1")]
	ungranted(u("o", ["operator"]), claims_of([c("machines", "action:other", "m1")])) == [c("machines", "action:other", "m1")]
}

# "*" in a grant is every action valid in the scope, each needed.
test_star_action_needs_every_action if {
	out := ungranted(u("r", ["reader"]), claims_of([c("machines", "*", "m1")]))
	c("machines", "delete", "m1") in out
	c("machines", "getSecure", "m1") in out
	not c("machines", "get", "m1") in out
	not c("machines", "list", "m1") in out
}

# Self claims naming their holder are not held for granting: alice may
# change her own password, not hand that to anyone. info get, which every
# user holds, widens no one.
test_self_claims_do_not_grant if {
	ungranted(u("alice", []), claims_of([c("users", "password,token,get", "alice")])) == [
		c("users", "get", "alice"),
		c("users", "password", "alice"),
		c("users", "token", "alice"),
	]
	ungranted(u("alice", []), claims_of([c("info", "get", "*")])) == []
	ungranted(fixtures.machine("m1", "operations"), claims_of([c("info", "get", "*")])) == [c("info", "get", "*")]
}

test_role_restricted_token_holds_its_roles_only if {
	p := object.union(u("root", ["superuser"]), {"token_roles": ["reader"]})
	ungranted(p, claims_of([c("machines", "get", "*")])) == []
	ungranted(p, claims_of([c("machines", "delete", "m1")])) == [c("machines", "delete", "m1")]
}

test_claim_restricted_token_holds_its_restriction_only if {
	p := object.union(u("root", ["superuser"]), {"restrict": [c("machines", "get,list", "*")]})
	ungranted(p, claims_of([c("machines", "list", "*")])) == []
	ungranted(p, claims_of([c("pools", "get", "p1")])) == [c("pools", "get", "p1")]
}

# Machine and job tokens never hand anything out, even what they hold.
test_machine_tokens_grant_nothing if {
	m := object.union(fixtures.machine("m1", "operations"), {"claims": [c("*", "*", "*")]})
	ungranted(m, claims_of([c("params", "get", "p")])) == [c("params", "get", "p")]
	ungranted(m, [{"claims": [c("params", "get", "p")], "via": c("roles", "escalate", "r")}]) == [c("params", "get", "p")]
}

test_bind_gives_a_role_without_holding_it if {
	w := object.union(world, {"roles": {"binder": {"claims": [c("roles", "bind", "superuser")]}}})
	fixtures.ungranted(w, u("h", ["binder"]), [{"role": "superuser", "via": c("roles", "bind", "superuser")}]) == []
	out := fixtures.ungranted(w, u("h", ["binder", "role-reader"]), [{"role": "operator", "via": c("roles", "bind", "operator")}])
	c("machines", "action:callbackDo", "*") in out
	c("pools", "delete", "p2") in out
}

test_held_role_is_given if {
	ungranted(u("o", ["operator", "role-reader"]), [{"role": "reader", "via": c("roles", "bind", "reader")}]) == []
	ungranted(u("r", ["reader", "role-reader"]), [{"role": "operator", "via": c("roles", "bind", "operator")}]) != []
}

# A role the writer cannot see (no roles get on it, or its tenant hides
# it) is given only by binding it, exactly as a missing one: the refusal
# shows none of its claims, and holding them does not tell it apart.
test_hidden_role_needs_bind_as_a_missing_one if {
	ungranted(u("o", ["operator"]), [{"role": "reader", "via": c("roles", "bind", "reader")}]) == [c("roles", "bind", "reader")]
	ungranted(u("o", ["operator"]), [{"role": "ghost", "via": c("roles", "bind", "ghost")}]) == [c("roles", "bind", "ghost")]
	w := object.union(world, {
		"tenants": {"tr": {"members": {"roles": ["operator"]}, "users": ["tia"]}},
		"user_tenant": {"tia": "tr", "x": "tr"},
	})
	fixtures.ungranted(w, u("tia", ["superuser"]), [{"role": "operator", "via": c("roles", "bind", "operator")}]) == []
	tia := u("tia", ["operator", "role-reader"])
	fixtures.ungranted(w, tia, [{"role": "reader", "via": c("roles", "bind", "reader")}]) == [c("roles", "bind", "reader")]
	fixtures.ungranted(w, tia, [{"role": "operator", "via": c("roles", "bind", "operator")}]) == []

	# A takeover of a user with a hidden role needs the delegation.
	fixtures.ungranted(w, tia, [{"roles": ["reader", "ghost"], "subject": {"kind": "user", "name": "x"}, "via": c("users", "impersonate", "x")}]) == [c("users", "impersonate", "x")]
	fixtures.ungranted(w, tia, [{"roles": ["operator", "ghost"], "subject": {"kind": "user", "name": "x"}, "via": c("users", "impersonate", "x")}]) == []
}

# A role the policy does not know is given only by binding it: whoever
# made it later would hand its claims to the user.
test_unknown_role_needs_bind if {
	ungranted(u("r", ["reader"]), [{"role": "ghost", "via": c("roles", "bind", "ghost")}]) == [c("roles", "bind", "ghost")]
	ungranted(u("root", ["superuser"]), [{"role": "ghost", "via": c("roles", "bind", "ghost")}]) == []
}

test_escalate_writes_claims_without_holding_them if {
	w := object.union(world, {"roles": {"esc": {"claims": [c("roles", "escalate", "team")]}}})
	g := [{"claims": [c("*", "*", "*")], "via": c("roles", "escalate", "team")}]
	fixtures.ungranted(w, u("e", ["esc"]), g) == []
	out := fixtures.ungranted(w, u("e", ["esc"]), [{"claims": [c("machines", "*", "*")], "via": c("roles", "escalate", "other")}])
	c("machines", "delete", "*") in out
}

# Only what the write adds is checked: a narrowed or unchanged claim needs
# nothing more.
test_had_claims_need_nothing if {
	ungranted(u("nobody", []), [{"claims": [c("machines", "get", "m1")], "had": [c("machines", "get,list", "*")]}]) == []
	ungranted(u("nobody", []), [{"claims": [c("machines", "get,delete", "m1")], "had": [c("machines", "get", "*")]}]) == [c("machines", "delete", "m1")]
}

test_subject_itself_needs_nothing if {
	ungranted(u("alice", []), [{"roles": ["superuser"], "subject": {"kind": "user", "name": "alice"}, "via": c("users", "impersonate", "alice")}]) == []
	m := fixtures.machine("m1", "operations")
	ungranted(m, [{"claims": [c("machines", "getSecure", "m1")], "subject": {"kind": "machine", "name": "m1"}}]) == []
	ungranted(m, [{"claims": [c("machines", "getSecure", "m2")], "subject": {"kind": "machine", "name": "m2"}}]) == [c("machines", "getSecure", "m2")]
}

test_takeover_needs_the_subjects_grants_or_impersonate if {
	g := [{"roles": ["operator"], "subject": {"kind": "user", "name": "bob"}, "via": c("users", "impersonate", "bob")}]
	ungranted(u("r", ["reader", "role-reader"]), g) != []
	ungranted(u("o", ["operator", "role-reader"]), g) == []
	w := object.union(world, {"roles": {"imp": {"claims": [c("users", "impersonate", "bob")]}}})
	fixtures.ungranted(w, u("i", ["imp"]), g) == []
}

# A tenant user takes over only users of its own tenant.
takeover(name) := [{"roles": ["reader"], "subject": {"kind": "user", "name": name}, "via": c("users", "impersonate", name)}]

test_takeover_stays_in_the_tenant if {
	ungranted(u("tina", ["operator", "role-reader"]), takeover("tom")) == [c("users", "impersonate", "tom")]
	ungranted(u("tina", ["operator", "role-reader"]), takeover("outsider")) == [c("users", "impersonate", "outsider")]
	w := object.union(world, {"user_tenant": {"tina": "t1", "tom": "t2", "tim": "t1"}})
	fixtures.ungranted(w, u("tina", ["operator", "role-reader"]), takeover("tim")) == []
	ungranted(u("olga", ["operator", "role-reader"]), takeover("tom")) == []

	# The explicit delegation (held here through the superuser's "*")
	# still allows it.
	ungranted(u("tina", ["superuser"]), takeover("tom")) == []
}

# A tenant user gives roles only to users of its own tenant: a user of
# another tenant, or of none, would reach with them what its tenant hides.
give(role, name) := [{"role": role, "to": {"kind": "user", "name": name}, "via": c("roles", "bind", role)}]

test_roles_given_stay_in_the_tenant if {
	w := object.union(world, {"user_tenant": {"tina": "t1", "tom": "t2", "tim": "t1"}})
	tina := u("tina", ["operator", "role-reader"])
	fixtures.ungranted(w, tina, give("reader", "tom")) == [c("roles", "bind", "reader")]
	fixtures.ungranted(w, tina, give("reader", "outsider")) == [c("roles", "bind", "reader")]
	fixtures.ungranted(w, tina, give("reader", "tim")) == []
	fixtures.ungranted(w, tina, give("reader", "tina")) == []

	# A writer in no tenant, and the explicit delegation, are unchanged.
	fixtures.ungranted(w, u("olga", ["operator", "role-reader"]), give("reader", "tom")) == []
	fixtures.ungranted(w, u("tina", ["superuser"]), give("reader", "tom")) == []
}

test_no_grants_no_refusal if ungranted(u("nobody", []), []) == []
