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

test_recent_token_allowed if {
	count(fresh_token.deny) == 0 with input as request(token_user(now_s - 60), "PATCH")
		with time.now_ns as mock_now
}

test_old_token_denied if {
	count(fresh_token.deny) == 1 with input as request(token_user(now_s - 601), "PATCH")
		with time.now_ns as mock_now
}

test_old_token_may_read if {
	count(fresh_token.deny) == 0 with input as request(token_user(now_s - 3000), "GET")
		with time.now_ns as mock_now
}

test_token_without_iat_denied if {
	p := json.remove(token_user(now_s), ["auth/iat"])
	count(fresh_token.deny) == 1 with input as request(p, "PATCH")
		with time.now_ns as mock_now
}

test_basic_allowed if {
	p := json.patch(token_user(0), [{"op": "replace", "path": "/auth", "value": {"method": "basic"}}])
	count(fresh_token.deny) == 0 with input as request(p, "PATCH")
		with time.now_ns as mock_now
}
