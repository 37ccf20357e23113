# METADATA
# title: Protected machines
# description: |
#   Nobody may DELETE a machine whose Meta has protected "true", whatever
#   their roles. Reads input.stored, the machine as stored.
# schemas:
#   - input: schema.input
package provgate.ext.protected

deny contains sprintf("machine %s is protected: clear Meta.protected before deleting it", [input.stored.Name]) if {
	input.object.scope == "machines"
	input.operation == "delete"
	input.stored.Meta.protected == "true"
}
