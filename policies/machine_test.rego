# Machine tokens: fixed permission sets (docs/design.md
# §8.6), independent of roles and direct claims; tenants listing a machine
# restrict its operations token (tenancy_test).
package provgate.machine_test

import data.provgate.claims
import data.provgate.fixtures
import data.provgate.grants

c(scope, action, specific) := fixtures.claim(scope, action, specific)

uuid := "3e7031fe-3062-45f1-835c-92541bc9cbd3"

other := "0b5cbb5c-8d54-4bd6-9c0f-9b3c0d8d6c11"

allowed(token, required) if allowed_with(fixtures.machine(uuid, token), required)

allowed_with(principal, required) if fixtures.decide(fixtures.data_licensed, fixtures.request(principal, required)).allow

test_discovery_create_machine_allowed if allowed("discovery", [c("machines", "create", "")])

test_discovery_get_any_machine_allowed if allowed("discovery", [c("machines", "get", other)])

test_discovery_update_denied if not allowed("discovery", [c("machines", "update:/Name", uuid)])

test_discovery_list_denied if not allowed("discovery", [c("machines", "list", "")])

test_discovery_params_denied if not allowed("discovery", [c("params", "get", "p")])

test_operations_own_machine_get_update_allowed if {
	allowed("operations", [c("machines", "get", uuid)])
	allowed("operations", [c("machines", "update:/Params/foo", uuid)])
	allowed("operations", [c("machines", "getSecure", uuid)])
	allowed("operations", [c("machines", "updateSecure", uuid)])
	allowed("operations", [c("machines", "actions", uuid)])
}

test_operations_own_machine_plugin_action_allowed if allowed("operations", [c("machines", "action:callbackDo", uuid)])

test_operations_other_machine_denied if not allowed("operations", [c("machines", "get", other)])

test_operations_delete_self_denied if not allowed("operations", [c("machines", "delete", uuid)])

test_operations_create_machine_denied if not allowed("operations", [c("machines", "create", "")])

test_operations_reads_allowed if {
	allowed("operations", [c("params", "get", "p")])
	allowed("operations", [c("stages", "get", "s")])
	allowed("operations", [c("tasks", "get", "t")])
	allowed("operations", [c("info", "get", "")])
}

test_operations_profiles_denied if not allowed("operations", [c("profiles", "get", "global")])

test_operations_own_jobs_allowed if {
	allowed("operations", [c("jobs", "create", "")])
	allowed("operations", [c("jobs", "get", uuid)])
	allowed("operations", [c("jobs", "update:/State", uuid)])
	allowed("operations", [c("jobs", "actions", uuid)])
	allowed("operations", [c("jobs", "log", uuid)])
}

test_operations_other_jobs_denied if not allowed("operations", [c("jobs", "log", other)])

test_operations_events_post_allowed if allowed("operations", [c("events", "post", "")])

test_operations_reservation_create_allowed if allowed("operations", [c("reservations", "create", "")])

test_operations_reservation_without_key_denied if not allowed("operations", [c("reservations", "update:/Strategy", "0a000105")])

test_machine_ignores_roles_denied if {
	p := object.union(fixtures.machine(uuid, "operations"), {"roles": ["superuser"]})
	not allowed_with(p, [c("pools", "get", "p1")])
}

test_machine_ignores_direct_claims_denied if {
	p := object.union(fixtures.machine(uuid, "discovery"), {"claims": [c("*", "*", "*")]})
	not allowed_with(p, [c("pools", "get", "p1")])
}

# A job token (docs/design.md §8.7) is an operations token holding its
# task's extra claims as direct claims.
test_job_token_extra_claims_allowed if {
	p := object.union(fixtures.machine(uuid, "operations"), {"claims": [c("profiles", "get", "*")]})
	allowed_with(p, [c("profiles", "get", "global")])
	allowed_with(p, [c("machines", "get", uuid)])
}

test_job_token_extra_claims_do_not_reach_other_machines_denied if {
	p := object.union(fixtures.machine(uuid, "operations"), {"claims": [c("machines", "*", "*")]})
	r := object.union(
		fixtures.request(p, [c("machines", "get", other)]),
		{"object": {"scope": "machines", "key": other}},
	)
	d := fixtures.decide(fixtures.data_licensed, r)
	not d.allow
	d.not_found
}

test_machine_has_no_self_claims_denied if not allowed("operations", [c("users", "get", uuid)])

test_unknown_machine_token_denied if not allowed("bogus", [c("machines", "get", uuid)])

test_machine_not_a_tenant_user_allowed if {
	# A machine named like a tenant user is still not in that user's tenant.
	r := object.union(
		fixtures.request(fixtures.machine("tina", "discovery"), [c("machines", "get", "m9")]),
		{"object": {"scope": "machines", "key": "m9"}},
	)
	fixtures.decide(fixtures.data_licensed, r).allow
}

# The fixed sets are written compiled; they must equal the plain claims of
# docs/design.md §8.6 compiled.
compiled(cs) := [claims.compile(x) | some x in cs]

# The machine fields an operations token may change: those the agent and
# task scripts change (docs/design.md §8.6), and nothing else.
agent_fields := [
	"Runnable", "Context", "Params", "Meta", "Description", "Address", "HardwareAddrs",
	"OS", "Arch", "Fingerprint", "TaskErrorStacks", "RetryTaskAttempt",
]

test_operations_set_exact if {
	p := fixtures.machine(uuid, "operations")
	updates := concat(",", [sprintf("update:/%s", [f]) | some f in agent_fields])
	want := compiled([
		c("machines", sprintf("get,actions,action:callbackDo,getSecure,updateSecure,%s", [updates]), uuid),
		c("params", "get", "*"),
		c("stages", "get", "*"),
		c("tasks", "get", "*"),
		c("info", "get", "*"),
		c("jobs", "create,get,update,actions,log", uuid),
		c("events", "post", "*"),
		c("reservations", "create", "*"),
	]) with data.provgate.scopes as fixtures.scopes
	grants.held == want with input as {"principal": p} with data.provgate.scopes as fixtures.scopes
}

test_operations_agent_fields_allowed if {
	every f in agent_fields {
		allowed("operations", [c("machines", sprintf("update:/%s", [f]), uuid)])
	}
	allowed("operations", [c("machines", "update:/Params/foo/bar", uuid)])
	allowed("operations", [c("machines", "update:/Meta/feature-flags", uuid)])
	allowed("operations", [c("machines", "update:/Fingerprint/SSNHash", uuid)])
}

# Fields that pull other objects' params, profiles or tasks into the
# machine, and those the server's job bookkeeping owns.
test_operations_other_fields_denied if {
	every f in [
		"Profiles", "Profiles/0", "Workflow", "Stage", "BootEnv", "Tasks", "Tasks/-", "Pool",
		"PoolAllocated", "PoolStatus", "Secret", "Locked", "Name", "Uuid", "CurrentJob",
		"CurrentTask", "WorkflowComplete", "Partial", "Errors",
	] {
		d := fixtures.decide(fixtures.data_licensed, fixtures.request(fixtures.machine(uuid, "operations"), [c("machines", sprintf("update:/%s", [f]), uuid)]))
		d.reasons == [sprintf("Requires: machines update:/%s %s", [f, uuid])]
	}
	not allowed("operations", [c("machines", "update", uuid)])
	not allowed("operations", [c("machines", "update:", uuid)])
}

test_operations_release_to_pool_denied if not allowed("operations", [c("machines", "action:releaseToPool", uuid)])

test_operations_other_plugin_action_denied if not allowed("operations", [c("machines", "action:other", uuid)])

test_discovery_set_is_reference_claims_exact if {
	want := compiled([c("machines", "create,get", "*")]) with data.provgate.scopes as fixtures.scopes
	grants.held == want with input as {"principal": fixtures.machine(uuid, "discovery")}
}

test_self_set_is_reference_claims_exact if {
	want := compiled([c("users", "token,password,get", "bob"), c("info", "get", "*")]) with data.provgate.scopes as fixtures.scopes
	grants.self == want with input as {"principal": fixtures.user("bob", [])}
}

# A job token asked for by a tenant user is restricted by that user's
# tenant as well as by its machine's (docs/design.md §8.7): its task's
# extra claims reach nothing the creator's tenant hides.
test_job_token_restricted_by_its_creators_tenant if {
	job := object.union(fixtures.machine(uuid, "operations"), {"claims": [c("machines", "get", "*"), c("profiles", "get", "*")]})
	allowed_with(job, [c("profiles", "get", "global")])
	by_tina := object.union(job, {"grantor": "tina"})
	d := fixtures.decide(fixtures.data_licensed, object.union(
		fixtures.request(by_tina, [c("profiles", "get", "global")]),
		{"object": {"scope": "profiles", "key": "global"}},
	))
	d.not_found
	by_system := object.union(job, {"grantor": "system"})
	allowed_with(by_system, [c("profiles", "get", "global")])
}
