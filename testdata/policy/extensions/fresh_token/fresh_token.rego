# METADATA
# title: Fresh tokens for user administration
# description: |
#   Changes in the users scope (create, update, delete, password) need a
#   token issued less than data.provgate_ext.fresh_token.max_age_seconds
#   ago (600 in data.json). Basic authentication presents the password on
#   the request itself and is always fresh; any token must be recent.
# schemas:
#   - input: schema.input
package provgate.ext.fresh_token

reads := {"GET", "HEAD"}

deny contains sprintf("users changes need a token issued less than %d seconds ago: get a new token", [max_age]) if {
	users_change
	input.principal.auth.method != "basic"
	not fresh
}

max_age := data.provgate_ext.fresh_token.max_age_seconds

users_change if {
	not input.method in reads
	some c in input.required
	c.scope == "users"
}

# time.now_ns is non-deterministic: provgate never caches a decision that
# called it, so the token's age is always measured now.
fresh if time.now_ns() < (input.principal.auth.iat + max_age) * 1000000000
