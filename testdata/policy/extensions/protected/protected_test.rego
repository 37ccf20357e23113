package provgate.ext.protected_test

import data.provgate.authz
import data.provgate.ext.protected

admin := {"kind": "user", "name": "ops", "roles": ["superuser"], "token_roles": null, "claims": [], "auth": {"method": "basic"}}

roles := {"superuser": {"claims": [{"scope": "*", "action": "*", "specific": "*"}]}}

scopes := {"machines": ["list", "get", "create", "update", "delete", "actions", "action"]}

request(op, method, meta) := {
	"principal": admin,
	"required": [{"scope": "machines", "action": op, "specific": "m-uuid"}],
	"object": {"scope": "machines", "key": "m-uuid"},
	"operation": op,
	"method": method,
	"path": "/machines/m-uuid",
	"stored": {"Name": "db1", "Uuid": "m-uuid", "Meta": meta},
}

test_delete_protected_denied if {
	count(protected.deny) == 1 with input as request("delete", "DELETE", {"protected": "true"})
}

test_delete_unprotected_allowed if {
	count(protected.deny) == 0 with input as request("delete", "DELETE", {"protected": "false"})
	count(protected.deny) == 0 with input as request("delete", "DELETE", {})
}

test_get_protected_allowed if {
	count(protected.deny) == 0 with input as request("get", "GET", {"protected": "true"})
}

# Through the whole decision: the superuser is refused, with the reason.
test_decision_refuses_superuser if {
	d := authz.decision with input as request("delete", "DELETE", {"protected": "true"})
		with data.provgate.roles as roles
		with data.provgate.scopes as scopes
	not d.allow
	d.reasons == ["machine db1 is protected: clear Meta.protected before deleting it"]
}
