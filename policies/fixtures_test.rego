# Shared test data: the scope table (kept equal to backend.Catalog's scopes by a Go
# test) and a small world of roles, tenants and a license, in plain form
# and, for a few entries, in the compiled form policies.NewData produces.
package provgate.fixtures

import data.provgate.tenancy

scopes := {
	"bootenvs": ["action", "actions", "create", "delete", "get", "list", "update"],
	"catalog_items": ["action", "actions", "create", "delete", "get", "list", "update"],
	"contents": ["create", "delete", "get", "list", "update"],
	"contexts": ["action", "actions", "create", "delete", "get", "list", "update"],
	"endpoints": ["action", "actions", "create", "delete", "get", "list", "update"],
	"events": ["list", "post"],
	"files": ["delete", "get", "list", "post"],
	"info": ["get"],
	"interfaces": ["action", "actions", "create", "delete", "get", "list", "update"],
	"isos": ["delete", "get", "list", "post"],
	"jobs": ["action", "actions", "create", "delete", "get", "list", "log", "update"],
	"leases": ["action", "actions", "create", "delete", "get", "list", "update"],
	"license": ["get", "update"],
	"machines": ["action", "actions", "create", "delete", "get", "getSecure", "list", "token", "update", "updateSecure", "updateTaskList", "whoami"],
	"objects": ["list"],
	"params": ["action", "actions", "create", "delete", "get", "list", "update"],
	"plugin_providers": ["action", "actions", "create", "delete", "get", "list", "update"],
	"plugins": ["action", "actions", "create", "delete", "exec", "get", "getSecure", "list", "update", "updateSecure"],
	"pools": ["action", "actions", "create", "delete", "get", "list", "update"],
	"preferences": ["list", "post"],
	"profiles": ["action", "actions", "create", "delete", "get", "getSecure", "list", "update", "updateSecure"],
	"reservations": ["action", "actions", "create", "delete", "get", "list", "update"],
	"roles": ["action", "actions", "bind", "create", "delete", "escalate", "get", "list", "update"],
	"stages": ["action", "actions", "create", "delete", "get", "getSecure", "list", "update", "updateSecure"],
	"subnets": ["action", "actions", "create", "delete", "get", "list", "update"],
	"system": ["action", "active", "passive", "replicate", "upgrade"],
	"tasks": ["action", "actions", "create", "delete", "get", "list", "update"],
	"templates": ["action", "actions", "create", "delete", "get", "list", "update"],
	"tenants": ["action", "actions", "create", "delete", "get", "list", "update"],
	"users": ["action", "actions", "create", "delete", "get", "impersonate", "list", "password", "token", "update"],
	"version_sets": ["action", "actions", "create", "delete", "get", "list", "update"],
	"workflows": ["action", "actions", "create", "delete", "get", "list", "update"],
}

claim(scope, action, specific) := {"scope": scope, "action": action, "specific": specific}

roles := {
	"superuser": {"claims": [claim("*", "*", "*")]},
	"operator": {"claims": [
		claim("machines", "get,list,action:callbackDo", "*"),
		claim("pools", "*", "p1,p2"),
	]},
	"reader": {"claims": [claim("machines", "get,list", "*")]},
	"m1reader": {"claims": [claim("machines", "get,list", "m1")]},
	"poolreader": {"claims": [claim("pools", "get,list", "*")]},
	"params-updater": {"claims": [
		claim("machines", "update:/Params", "abc"),
		claim("machines", "update", "*"),
	]},
	"rbac-admin": {"claims": [claim("roles,tenants", "*", "*")]},
	"role-reader": {"claims": [claim("roles", "get,list", "*")]},
	"empty": {"claims": []},
	# Compiled form, as policies.NewData stores it; "claims" is what the
	# compiled form came from and is not read when "compiled" is present.
	"precompiled": {
		"claims": [claim("machines", "get", "m9")],
		"compiled": [{"machines": {"get": {"all": false, "keys": {"m9": true}}}}],
	},
}

tenants := {
	"t1": {"members": {"machines": ["m1", "m2"], "profiles": []}, "users": ["tina"]},
	"t2": {
		"members": {"machines": ["m3"]},
		"member_set": {"machines": {"m3": true}},
		"users": ["tom"],
	},
	# Tenants of machines (no users): mt1 is in t3 and t4, mt2 in t4 only.
	"t3": {"members": {"machines": ["mt1"], "stages": ["s1"]}, "users": []},
	"t4": {"members": {"machines": ["mt1", "mt2"], "stages": ["s1", "s2"], "tasks": ["k1"]}, "users": []},
}

data_licensed := {
	"roles": roles,
	"tenants": tenants,
	"user_tenant": {"tina": "t1", "tom": "t2"},
	"machine_tenants": sharded({"mt1": ["t3", "t4"], "mt2": ["t4"]}),
	"license": {"valid": true, "features": ["rbac", "secure-params"]},
	"scopes": scopes,
}

data_unlicensed := object.union(data_licensed, {"license": {"valid": false, "features": []}})

user(name, roles) := {"kind": "user", "name": name, "roles": roles, "claims": []}

machine(uuid, token) := {"kind": "machine", "name": uuid, "roles": [], "claims": [], "machine_token": token}

request(principal, required) := {
	"principal": principal,
	"required": required,
	"operation": "",
	"method": "GET",
	"path": "/api/v3/test",
}

# decide evaluates the decision against a world shaped like policies.Data.
# Each data key is replaced on its own: replacing data.provgate as a whole
# would also replace the policy packages that live under it.
decide(world, request_) := d if {
	d := data.provgate.authz.decision with input as request_
		with data.provgate.roles as world.roles
		with data.provgate.tenants as world.tenants
		with data.provgate.user_tenant as world.user_tenant
		with data.provgate.machine_tenants as world.machine_tenants
		with data.provgate.license as world.license
		with data.provgate.scopes as world.scopes
}

token_roles(world, user_roles, requested) := kept if {
	kept := data.provgate.authz.token_roles with input as {"user_roles": user_roles, "requested": requested}
		with data.provgate.roles as world.roles
		with data.provgate.scopes as world.scopes
}

# ungranted evaluates the grant check (docs/design.md §5.9) of principal
# handing out grants, against a world shaped like policies.Data.
ungranted(world, principal, grants) := out if {
	out := data.provgate.grants.ungranted with input as {"principal": principal, "grants": grants}
		with data.provgate.roles as world.roles
		with data.provgate.tenants as world.tenants
		with data.provgate.user_tenant as world.user_tenant
		with data.provgate.machine_tenants as world.machine_tenants
		with data.provgate.license as world.license
		with data.provgate.scopes as world.scopes
}

# sharded(entries): machine_tenants entries (machine → tenants) in the
# shards the data keeps them in (tenancy.shard).
sharded(entries) := {s: {m: ts | some m, ts in entries; tenancy.shard(m) == s} |
	some m, _ in entries
	s := tenancy.shard(m)
}
