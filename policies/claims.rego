# Claim compilation and containment, with Digital Rebar Provision's
# semantics (docs/design.md §5.1).
#
# A claim is compiled into {scope: {action: node}}, node being
# {"all": bool, "keys": {specific: true}}: the shape DRP's compile step
# produces, with sets as objects so that membership is a key lookup.
# policies.NewData stores role claims in this shape already (field
# "compiled"); everything here also works on plain claims.

# METADATA
# title: Claims
# description: >-
#   Claim compilation and containment with Digital Rebar Provision's semantics.
# schemas:
#   - input: schema.input
#   - data.provgate.roles: schema.provgate.roles.schema
#   - data.provgate.tenants: schema.provgate.tenants.schema
#   - data.provgate.user_tenant: schema.provgate.user_tenant.schema
#   - data.provgate.machine_tenants: schema.provgate.machine_tenants.schema
#   - data.provgate.license: schema.provgate.license.schema
#   - data.provgate.scopes: schema.provgate.scopes.schema
package provgate.claims

# compile expands a plain claim {scope, action, specific}. Unknown scopes
# and actions are dropped, as DRP does, so the empty claim compiles to {}.
compile(c) := {s: actions_of(s, c) | some s in scopes_of(c.scope)}

# compile_wanted compiles a required claim. Its scope and action come from
# the gateway's route table and are read as compile reads them; its specific
# is the key of the object the request names ("" for lists and creates),
# taken exactly as it is: one key, never split on commas, trimmed or read
# as "*". So a request naming "alice " is never taken for "alice", and one
# naming "a,b" needs a claim on every object of the scope. A claim naming
# one scope and one action takes a short path without splitting strings.
compile_wanted(c) := {c.scope: {c.action: exact(c.specific)}} if {
	single(c.scope)
	single(c.action)
	split(c.action, ":")[0] in data.provgate.scopes[c.scope]
} else := {s: {a: exact(c.specific) | some a in actions_in(s, c.action)} | some s in scopes_of(c.scope)}

# exact(specific): the node of one key, exactly as given. A specific that is
# not a string has no node, so the claim compiles to nothing and is refused.
exact(specific) := {"all": false, "keys": {specific: true}} if is_string(specific)

# single: one value, not "*", no list, nothing to trim. Only scopes and
# actions are read this way; a wanted specific is always one exact key.
single(s) if {
	s != "*"
	not contains(s, ",")
	trim_space(s) == s
}

# A scope of "*" means every known scope; otherwise a comma list.
scopes_of(s) := object.keys(data.provgate.scopes) if {
	trim_space(s) == "*"
} else := {x |
	some part in split(s, ",")
	x := trim_space(part)
	data.provgate.scopes[x]
}

# An action of "*" means exactly the actions valid in the scope; otherwise
# each listed action is kept when its base (before the first ':') is valid.
actions_of(scope, c) := {a: node(c.specific) | some a in actions_in(scope, c.action)}

actions_in(scope, action) := {a | some a in data.provgate.scopes[scope]} if {
	trim_space(action) == "*"
} else := {a |
	some part in split(action, ",")
	a := trim_space(part)
	split(a, ":")[0] in data.provgate.scopes[scope]
}

# A granted specific of "*" means every object of the scope; otherwise it is
# a comma list whose parts are trimmed, as DRP reads the claims of roles.
# Names cannot begin or end with whitespace, so trimming a grant never makes
# it name a different object.
node(specific) := {"all": true, "keys": {}} if {
	trim_space(specific) == "*"
} else := {"all": false, "keys": {trim_space(part): true | some part in split(specific, ",")}} if {
	# A specific that is not a string compiles to nothing rather than to an
	# empty set, which every set would contain.
	is_string(specific)
}

# covers(a, b): the compiled claim a contains the compiled claim b. Every
# scope of b must be in a, and every action of b must find a node in a
# (exactly, or by the fallback of matched) whose specifics contain b's.
covers(a, b) if {
	every scope, wanted in b {
		granted := a[scope]
		every action, n in wanted {
			node_covers(matched(granted, action), n)
		}
	}
}

# matched finds the node of a's actions that answers the wanted action key.
# The exact key wins whenever it is present, even if its specifics then fail
# and a broader action would have matched (DRP tries fallbacks only for an
# absent key).
matched(actions, key) := n if {
	n := actions[key]
} else := first_present(actions, fallback_keys(key))

first_present(actions, keys) := [n | some k in keys; n := actions[k]][0]

# fallback_keys(key): the keys tried, nearest first, when the exact key is
# absent. action:<name> falls back to the bare action; update:<pointer> to
# the nearest ancestor pointer, then update: (the whole object), then bare
# update; update: to bare update. policies.ActionFallback is the same list
# in Go.
fallback_keys(key) := ["action"] if {
	startswith(key, "action:")
} else := ["update"] if {
	key == "update:"
} else := array.concat(ancestors, ["update"]) if {
	# For /p/q/r: update:/p/q, update:/p, update:. Walking whole segments
	# means update:/Par never covers update:/Params.
	startswith(key, "update:/")
	segments := split(substring(key, count("update:"), -1), "/")
	ancestors := [sprintf("update:%s", [concat("/", array.slice(segments, 0, n))]) |
		some n in numbers.range(count(segments) - 1, 1)
	]
} else := ["update:", "update"] if {
	# A pointer without its leading '/' is not a JSON pointer; DRP gives it
	# no fallback at all. provgate's rule wins here (docs/design.md §5.2):
	# update: and bare update cover every update (and the superuser claim
	# contains every claim), so those two are still tried. The gateway never
	# derives such a pointer.
	startswith(key, "update:")
} else := []

node_covers(a, _) if a.all

# docs/design.md §5.4: list and create derive a claim with an empty
# specific. Holding the action on any objects is enough for those; which
# objects a list returns is decided separately (authz visible).
node_covers(_, b) if b.keys == {"": true}

node_covers(a, b) if {
	not b.all
	count(b.keys) > 0
	every k, _ in b.keys {
		a.keys[k]
	}
}

# known: b names at least one known scope and, in each, a known action. DRP
# treats a wanted claim that compiles to nothing as contained by anything;
# the decision refuses such a claim instead (docs/design.md §5.1, last row).
known(b) if {
	count(b) > 0
	every _, actions in b {
		count(actions) > 0
	}
}

# wanted(c) is a required claim naming one scope and one action (nearly
# every claim the gateway derives), in the form the lookups below read: its
# fields plus "base", the action before any ':' (which must be valid in the
# scope), and "fallback", its fallback_keys. Its specific is one exact key,
# as in compile_wanted. The gateway sends required claims in this form
# already (policies/opa, input.go); plain claims are brought to it here.
# Claims with lists or "*" in the scope or action have no wanted form and
# are compiled instead.
wanted(c) := c if {
	is_string(c.base)
	is_array(c.fallback)
} else := {
	"scope": c.scope,
	"action": c.action,
	"specific": c.specific,
	"base": split(c.action, ":")[0],
	"fallback": fallback_keys(c.action),
} if {
	single(c.scope)
	single(c.action)
	is_string(c.specific)
}

# known_one(w): the wanted claim names a known scope and an action valid in
# it (known, for the wanted form).
known_one(w) if w.base in data.provgate.scopes[w.scope]

# covers_one(a, w): a contains the wanted claim w; a is a compiled claim or
# a role's index (policies.IndexClaims). Same answer as
# covers(a, compile_wanted(w)), with key lookups only. w may also be an
# atom of a granted claim (atoms below), which names every object of its
# scope when w.all: only a node granting every object contains it. The
# grant check (grants.ungranted) uses exactly this function, so granting
# and requesting share one containment (docs/design.md §5.9).
covers_one(a, w) := wanted_in(n, w) if {
	n := a[w.scope][w.action]
} else := wanted_in(n, w) if {
	# The exact key is absent: the first fallback key present (matched).
	actions := a[w.scope]
	n := [x | some k in w.fallback; x := actions[k]][0]
}

# wanted_in(n, w): the node n holds w's specific; false otherwise, so that
# an exact key whose specifics fail never falls back (see matched). One
# chain of lookups rather than separate rules or "not w.all", each of
# which costs a sub-evaluation per lookup. List and create derive an empty
# specific (see node_covers).
wanted_in(n, w) if {
	n.all
} else := false if {
	w.all
} else if {
	w.specific == ""
} else := object.get(n.keys, w.specific, false)

# atoms(g): a compiled claim broken into its atomic parts, each in the
# wanted form covers_one reads: one scope, one action key, and either one
# listed specific or every object ("all", specific "*"). A claim holds
# what each of its atoms allows, so another claim set contains it exactly
# when it contains each atom (the breakdown Kubernetes' RBAC escalation
# check uses; docs/design.md §5.9).
atoms(g) := {atom |
	some scope, actions in g
	some action, n in actions
	some atom in node_atoms(scope, action, n)
}

node_atoms(scope, action, n) := {atom(scope, action, "*", true)} if {
	n.all
} else := {atom(scope, action, k, false) | some k, _ in n.keys}

atom(scope, action, specific, all) := {
	"scope": scope,
	"action": action,
	"specific": specific,
	"all": all,
	"base": split(action, ":")[0],
	"fallback": fallback_keys(action),
}
