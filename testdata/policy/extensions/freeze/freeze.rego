# METADATA
# title: Change freeze
# description: |
#   The users listed in data.provgate_ext.freeze.users (data.json) may read
#   but change nothing until the freeze is lifted by editing data.json.
# schemas:
#   - input: schema.input
package provgate.ext.freeze

reads := {"GET", "HEAD"}

deny contains sprintf("change freeze for %s: %s", [input.principal.name, data.provgate_ext.freeze.reason]) if {
	input.principal.kind == "user"
	input.principal.name in data.provgate_ext.freeze.users
	not input.method in reads
}
