package provgate.ext.weekday_freeze_test

import data.provgate.ext.weekday_freeze

request(method) := {
	"principal": {"kind": "user", "name": "ops", "roles": ["superuser"], "token_roles": null, "claims": []},
	"required": [{"scope": "machines", "action": "update:/Description", "specific": "m1"}],
	"operation": "patch",
	"method": method,
	"path": "/api/v3/machines/m1",
}

config := {"days": ["Friday"], "reason": "weekend"}

# Friday 9 January 2026, 10:00 UTC, and the Thursday before.
friday := 1767952800000000000

thursday := friday - ((24 * 3600) * 1000000000)

test_friday_write_denied if {
	weekday_freeze.deny == {"change freeze on Friday: weekend"} with input as request("PATCH")
		with time.now_ns as friday
		with data.provgate_ext.weekday_freeze as config
}

test_friday_read_allowed if {
	count(weekday_freeze.deny) == 0 with input as request("GET")
		with time.now_ns as friday
		with data.provgate_ext.weekday_freeze as config
}

test_thursday_write_allowed if {
	count(weekday_freeze.deny) == 0 with input as request("PATCH")
		with time.now_ns as thursday
		with data.provgate_ext.weekday_freeze as config
}

test_data_shape if {
	is_array(data.provgate_ext.weekday_freeze.days)
	is_string(data.provgate_ext.weekday_freeze.reason)
}
