package provgate.ext.freeze_test

import data.provgate.ext.freeze

user(name) := {"kind": "user", "name": name, "roles": ["superuser"], "token_roles": null, "claims": []}

request(name, method) := {
	"principal": user(name),
	"required": [{"scope": "machines", "action": "update:/Description", "specific": "m1"}],
	"operation": "patch",
	"method": method,
	"path": "/machines/m1",
}

# The rules are tested with data of their own, so that editing data.json
# (freezing or thawing someone) needs no change here.
frozen := {"users": ["carol"], "reason": "release weekend"}

test_frozen_user_write_denied if {
	freeze.deny == {"change freeze for carol: release weekend"} with input as request("carol", "PATCH")
		with data.provgate_ext.freeze as frozen
}

test_frozen_user_read_allowed if {
	count(freeze.deny) == 0 with input as request("carol", "GET")
		with data.provgate_ext.freeze as frozen
}

test_other_user_write_allowed if {
	count(freeze.deny) == 0 with input as request("dave", "PATCH")
		with data.provgate_ext.freeze as frozen
}

test_lifted_freeze_allows if {
	count(freeze.deny) == 0 with input as request("carol", "PATCH")
		with data.provgate_ext.freeze as {"users": [], "reason": ""}
}

# data.json, as loaded under data.provgate_ext, has the shape the rule reads:
# a mistyped edit is refused at load instead of freezing nobody.
test_data_shape if {
	is_array(data.provgate_ext.freeze.users)
	every u in data.provgate_ext.freeze.users {
		is_string(u)
	}
	is_string(data.provgate_ext.freeze.reason)
}
