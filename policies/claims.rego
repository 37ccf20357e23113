# Claim compilation and containment, with Digital Rebar Provision's
# semantics (reference §4.5; spec "Claim").
#
# A claim is compiled into {scope: {action: node}}, node being
# {"all": bool, "keys": {specific: true}}: the shape DRP's compile step
# produces, with sets as objects so that membership is a key lookup.
# policies.NewData stores role claims in this shape already (field
# "compiled"); everything here also works on plain claims.
package provgate.claims

# compile expands a plain claim {scope, action, specific}. Unknown scopes
# and actions are dropped, as DRP does, so the empty claim compiles to {}.
compile(c) := {s: actions_of(s, c) | some s in scopes_of(c.scope)}

# compile_wanted compiles a required claim. The gateway's claims nearly
# always name one scope, one action and one specific; those take a short
# path that gives the same result as compile without splitting strings.
compile_wanted(c) := {c.scope: {c.action: {"all": false, "keys": {c.specific: true}}}} if {
	single(c.scope)
	single(c.action)
	single(c.specific)
	split(c.action, ":")[0] in data.provgate.scopes[c.scope]
} else := compile(c)

# single: one value, not "*", no list, nothing to trim.
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
actions_of(scope, c) := {a: node(c.specific) | some a in data.provgate.scopes[scope]} if {
	trim_space(c.action) == "*"
} else := {a: node(c.specific) |
	some part in split(c.action, ",")
	a := trim_space(part)
	split(a, ":")[0] in data.provgate.scopes[scope]
}

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
# absent key). action:<name> falls back to the bare action; update:<pointer>
# to the nearest ancestor pointer (see nearest_update).
matched(actions, key) := n if {
	n := actions[key]
} else := n if {
	startswith(key, "action:")
	n := actions.action
} else := n if {
	startswith(key, "update:")
	n := nearest_update(actions, substring(key, count("update:"), -1))
}

# The empty pointer (the whole object) is covered by bare update only.
nearest_update(actions, "") := actions.update

# For /p/q/r the candidates are, nearest first, update:/p/q, update:/p,
# update: and update. Walking whole segments means update:/Par never covers
# update:/Params.
nearest_update(actions, ptr) := found[0] if {
	startswith(ptr, "/")
	segments := split(ptr, "/")
	ancestors := [sprintf("update:%s", [concat("/", array.slice(segments, 0, n))]) |
		some n in numbers.range(count(segments) - 1, 1)
	]
	found := [actions[k] | some k in array.concat(ancestors, ["update"]); actions[k]]
}

# A pointer without its leading '/' is not a JSON pointer; DRP gives it no
# fallback at all. The spec's rules win here: update: and bare update cover
# every update (and the superuser claim contains every claim), so those two
# are still tried. The gateway never derives such a pointer.
nearest_update(actions, ptr) := found[0] if {
	ptr != ""
	not startswith(ptr, "/")
	found := [actions[k] | some k in ["update:", "update"]; actions[k]]
}

node_covers(a, _) if a.all

# Spec "Authentication": list and create derive a claim with an empty
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
# the decision refuses such a claim instead (reference §4.5, last row).
known(b) if {
	count(b) > 0
	every _, actions in b {
		count(actions) > 0
	}
}
