package provgate.ext.fresh_token_test

import data.provgate.ext.fresh_token

now_s := 1800000000

token_user(iat) := {
	"kind": "user", "name": "alice", "roles": ["superuser"], "token_roles": null, "claims": [],
	"auth": {"method": "bearer", "kind": "user", "iat": iat, "exp": iat + 3600, "jti": "t1"},
}

request(p, method) := {
	"principal": p,
	"required": [{"scope": "users", "action": "update:/Roles", "specific": "bob"}],
	"operation": "patch",
	"method": method,
	"path": "/users/bob",
}

mock_now := now_s * 1000000000

# The rules are tested with a window of their own, so that editing
# data.json needs no change here.
window := {"max_age_seconds": 600}

test_recent_token_allowed if {
	count(fresh_token.deny) == 0 with input as request(token_user(now_s - 60), "PATCH")
		with time.now_ns as mock_now
		with data.provgate_ext.fresh_token as window
}

test_old_token_denied if {
	count(fresh_token.deny) == 1 with input as request(token_user(now_s - 601), "PATCH")
		with time.now_ns as mock_now
		with data.provgate_ext.fresh_token as window
}

test_old_token_may_read if {
	count(fresh_token.deny) == 0 with input as request(token_user(now_s - 3000), "GET")
		with time.now_ns as mock_now
		with data.provgate_ext.fresh_token as window
}

test_token_without_iat_denied if {
	p := json.remove(token_user(now_s), ["auth/iat"])
	count(fresh_token.deny) == 1 with input as request(p, "PATCH")
		with time.now_ns as mock_now
		with data.provgate_ext.fresh_token as window
}

test_basic_allowed if {
	p := json.patch(token_user(0), [{"op": "replace", "path": "/auth", "value": {"method": "basic"}}])
	count(fresh_token.deny) == 0 with input as request(p, "PATCH")
		with time.now_ns as mock_now
		with data.provgate_ext.fresh_token as window
}

# data.json, as loaded under data.provgate_ext, has the shape the rule
# reads: a mistyped edit is refused at load.
test_data_shape if {
	is_number(data.provgate_ext.fresh_token.max_age_seconds)
	data.provgate_ext.fresh_token.max_age_seconds > 0
}
