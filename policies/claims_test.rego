# Claim containment: every row of the containment table of docs/design.md
# §5.2, and every special claim form (§5.1).
package provgate.claims_test

import data.provgate.authz
import data.provgate.claims
import data.provgate.fixtures

c(scope, action, specific) := fixtures.claim(scope, action, specific)

holds(a, b) if authz.claim_contains(a, b) with data.provgate.scopes as fixtures.scopes

# DRP's containment results of docs/design.md §5.2, row by row.

test_superuser_claim_get_contained if holds(c("*", "*", "*"), c("machines", "get", "abc"))

test_list_granted_all_list_empty_specific_contained if holds(c("machines", "get,list", "*"), c("machines", "list", ""))

test_get_only_list_not_contained if not holds(c("machines", "get", "abc"), c("machines", "list", ""))

test_update_pointer_parent_covers_child_contained if {
	holds(c("machines", "update:/Params", "*"), c("machines", "update:/Params/foo", "abc"))
}

test_update_pointer_child_covers_parent_not_contained if {
	not holds(c("machines", "update:/Params/foo", "*"), c("machines", "update:/Params", "abc"))
}

test_bare_update_covers_pointer_contained if holds(c("machines", "update", "*"), c("machines", "update:/Params/foo", "abc"))

test_bare_action_covers_named_action_contained if {
	holds(c("machines", "action", "*"), c("machines", "action:callbackDo", "abc"))
}

test_named_action_other_action_not_contained if {
	not holds(c("machines", "action:callbackDo", "*"), c("machines", "action:other", "abc"))
}

test_named_action_bare_action_not_contained if {
	not holds(c("machines", "action:callbackDo", "*"), c("machines", "action", "abc"))
}

test_scope_list_all_actions_create_contained if holds(c("machines,pools", "*", "*"), c("pools", "create", ""))

test_specific_list_member_contained if holds(c("machines", "get", "a,b"), c("machines", "get", "b"))

test_specific_list_non_member_not_contained if not holds(c("machines", "get", "a,b"), c("machines", "get", "c"))

test_empty_claim_real_claim_not_contained if {
	not holds(c("", "", ""), c("machines", "get", "abc"))
	not holds(c("", "", ""), c("machines", "list", ""))
}

# DRP: a wanted claim that compiles to nothing is contained by anything.
# The decision refuses such claims (see authz_test).
test_unknown_wanted_scope_contained if holds(c("machines", "get", "*"), c("bogus", "get", "x"))

test_unknown_wanted_action_contained if holds(c("machines", "get", "*"), c("machines", "bogus", "x"))

# Special forms and ordering rules (docs/design.md §5.1, §5.2).

test_superuser_claim_contains_superuser_contained if holds(c("*", "*", "*"), c("*", "*", "*"))

test_superuser_claim_every_scope_action_contained if {
	superuser := claims.compile(c("*", "*", "*")) with data.provgate.scopes as fixtures.scopes
	every scope, actions in fixtures.scopes {
		every action in actions {
			claims.covers(superuser, claims.compile_wanted(c(scope, action, "x"))) with data.provgate.scopes as fixtures.scopes
		}
	}
}

test_all_scopes_claim_star_scope_expands_exact if {
	count(claims.compile(c("*", "get", "*"))) == count(fixtures.scopes) with data.provgate.scopes as fixtures.scopes
}

test_star_action_is_scope_actions_exact if {
	claims.compile(c("info", "*", "*")) == {"info": {"get": {"all": true, "keys": {}}}} with data.provgate.scopes as fixtures.scopes
}

test_star_action_machine_only_action_contained if holds(c("machines", "*", "*"), c("machines", "whoami", "m1"))

test_star_action_other_scope_not_contained if not holds(c("machines", "*", "*"), c("pools", "get", "p1"))

test_comma_lists_with_spaces_contained if {
	holds(c(" machines , pools ", " get , list ", " a , b "), c("pools", "list", "b"))
}

test_wanted_action_list_one_missing_not_contained if not holds(c("machines", "get", "a,b,c"), c("machines", "get,list", "a,b"))

test_wanted_lists_all_covered_contained if holds(c("machines", "get,list", "a,b,c"), c("machines", "get,list", "a,b"))

test_wanted_lists_one_missing_not_contained if not holds(c("machines", "get,list", "a,b"), c("machines", "get,list", "a,z"))

test_specific_keys_wanted_all_not_contained if not holds(c("machines", "get", "a"), c("machines", "get", "*"))

test_empty_specific_any_grant_contained if {
	holds(c("machines", "list", "m1"), c("machines", "list", ""))
	holds(c("machines", "create", "abc"), c("machines", "create", ""))
}

test_empty_claim_grants_nothing_exact if claims.compile(c("", "", "")) == {} with data.provgate.scopes as fixtures.scopes

test_unknown_granting_scope_dropped_contained if holds(c("bogus,machines", "get", "*"), c("machines", "get", "x"))

test_unknown_granting_scope_dropped_exact if {
	claims.compile(c("bogus", "get", "*")) == {} with data.provgate.scopes as fixtures.scopes
}

test_invalid_granting_action_dropped_not_contained if not holds(c("info", "update", "*"), c("machines", "get", "x"))

test_empty_pointer_update_covers_all_contained if {
	holds(c("machines", "update:", "*"), c("machines", "update:/Params/foo", "abc"))
	holds(c("machines", "update:", "*"), c("machines", "update:", "abc"))
}

test_empty_pointer_update_bare_update_not_contained if not holds(c("machines", "update:", "*"), c("machines", "update", "abc"))

test_bare_update_covers_empty_pointer_contained if holds(c("machines", "update", "*"), c("machines", "update:", "abc"))

test_pointer_prefix_partial_segment_not_contained if {
	not holds(c("machines", "update:/Par", "*"), c("machines", "update:/Params", "abc"))
	not holds(c("machines", "update:/Par", "*"), c("machines", "update:/Params/foo", "abc"))
}

test_pointer_deep_ancestor_contained if holds(c("machines", "update:/Meta", "m1"), c("machines", "update:/Meta/a/b/c", "m1"))

test_pointer_root_slash_contained if holds(c("machines", "update:", "*"), c("machines", "update:/", "m1"))

test_pointer_without_slash_bare_update_contained if {
	holds(c("machines", "update", "*"), c("machines", "update:Params", "m1"))
	holds(c("machines", "update:", "*"), c("machines", "update:Params/x", "m1"))
	holds(c("*", "*", "*"), c("machines", "update:Params/x", "m1"))
}

test_pointer_without_slash_no_ancestor_not_contained if not holds(c("machines", "update:Params", "*"), c("machines", "update:Params/x", "m1"))

test_pointer_ancestor_specific_mismatch_not_contained if {
	not holds(c("machines", "update:/Params", "abc"), c("machines", "update:/Params/foo", "xyz"))
}

test_bare_update_does_not_cover_action_not_contained if not holds(c("machines", "update", "*"), c("machines", "action:x", "m1"))

# The fallback is tried only when the exact key is absent: with the exact
# key present and failing, a broader action that would match is not used.
# Claims from one plain claim share their specifics, so this needs the
# compiled form (which policies.NewData produces).
test_exact_key_present_blocks_fallback_not_contained if {
	a := {"machines": {
		"update:/Params": {"all": false, "keys": {"abc": true}},
		"update": {"all": true, "keys": {}},
	}}
	not claims.covers(a, claims.compile(c("machines", "update:/Params", "xyz"))) with data.provgate.scopes as fixtures.scopes
}

test_exact_key_absent_uses_nearest_ancestor_not_contained if {
	a := {"machines": {
		"update:/Params": {"all": false, "keys": {"abc": true}},
		"update": {"all": true, "keys": {}},
	}}
	not claims.covers(a, claims.compile(c("machines", "update:/Params/foo", "xyz"))) with data.provgate.scopes as fixtures.scopes
}

test_exact_action_key_present_blocks_bare_action_not_contained if {
	a := {"machines": {
		"action:callbackDo": {"all": false, "keys": {"m1": true}},
		"action": {"all": true, "keys": {}},
	}}
	not claims.covers(a, claims.compile(c("machines", "action:callbackDo", "m2"))) with data.provgate.scopes as fixtures.scopes
}

test_known_claim_exact if {
	claims.known(claims.compile(c("machines", "get", "m1"))) with data.provgate.scopes as fixtures.scopes
	not claims.known(claims.compile(c("bogus", "get", "m1"))) with data.provgate.scopes as fixtures.scopes
	not claims.known(claims.compile(c("machines", "bogus", "m1"))) with data.provgate.scopes as fixtures.scopes
}

test_non_string_specific_compiles_to_nothing_exact if {
	claims.compile({"scope": "machines", "action": "get", "specific": 7}) == {"machines": {}} with data.provgate.scopes as fixtures.scopes
}

test_empty_wanted_key_set_not_contained if {
	not claims.covers(
		{"machines": {"get": {"all": false, "keys": {"a": true}}}},
		{"machines": {"get": {"all": false, "keys": {}}}},
	)
}

# compile_wanted agrees with compile on every claim whose specific is one
# plain key; its short path too.
test_compile_wanted_same_as_compile_exact if {
	every w in [
		c("machines", "get", "m1"),
		c("machines", "list", ""),
		c("machines", "update:/Params/a", "m1"),
		c("machines", "*", "m1"),
		c(" machines", "get", "m1"),
		c("machines", "get ", "m1"),
		c("machines,pools", "get,list", "m1"),
		c("bogus", "get", "m1"),
		c("machines", "bogus", "m1"),
		c("info", "update", "x"),
		c("*", "get", "m1"),
	] {
		claims.compile_wanted(w) == claims.compile(w) with data.provgate.scopes as fixtures.scopes
	}
}

# A wanted specific is one key taken exactly: no comma split, no trimming,
# "*" a key like any other (for the short path and the long one).
test_compile_wanted_specific_exact if {
	every specific in ["alice ", " alice", "alice\t", "a,b", "*", " * ", "a, b"] {
		every scope in ["users", "users,info", " users"] {
			claims.compile_wanted(c(scope, "get", specific)).users == {"get": {"all": false, "keys": {specific: true}}} with data.provgate.scopes as fixtures.scopes
		}
	}
}

test_wanted_specific_with_space_not_contained if {
	grant := claims.compile(c("users", "get,password", "alice")) with data.provgate.scopes as fixtures.scopes
	every specific in ["alice ", " alice", "alice\t", "alice,bob", "*"] {
		not claims.covers(grant, claims.compile_wanted(c("users", "password", specific))) with data.provgate.scopes as fixtures.scopes
		not claims.covers_one(grant, claims.wanted(c("users", "password", specific))) with data.provgate.scopes as fixtures.scopes
	}
	claims.covers_one(grant, claims.wanted(c("users", "password", "alice"))) with data.provgate.scopes as fixtures.scopes
}

test_wanted_star_specific_needs_all_not_contained if {
	some_keys := claims.compile(c("machines", "get", "a,b")) with data.provgate.scopes as fixtures.scopes
	all_keys := claims.compile(c("machines", "get", "*")) with data.provgate.scopes as fixtures.scopes
	not claims.covers_one(some_keys, claims.wanted(c("machines", "get", "*"))) with data.provgate.scopes as fixtures.scopes
	not claims.covers_one(some_keys, claims.wanted(c("machines", "get", "a,b"))) with data.provgate.scopes as fixtures.scopes
	claims.covers_one(all_keys, claims.wanted(c("machines", "get", "a,b"))) with data.provgate.scopes as fixtures.scopes
}

# Grants are read as DRP reads them: comma lists with trimmed parts.
test_granted_list_parts_trimmed_contained if {
	grant := claims.compile(c("machines", "get", " a , b ")) with data.provgate.scopes as fixtures.scopes
	claims.covers_one(grant, claims.wanted(c("machines", "get", "b"))) with data.provgate.scopes as fixtures.scopes
	not claims.covers_one(grant, claims.wanted(c("machines", "get", " b"))) with data.provgate.scopes as fixtures.scopes
}
