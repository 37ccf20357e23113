package backend

import (
	"fmt"
	"strings"
)

// RevisionNotice is the payload the store sends when it bumps the
// authorization data revision (docs/design.md §14.4).
const RevisionNotice = `{"r":true}`

// storeActions are the actions of the events the server publishes when a
// stored object changes.
var storeActions = map[string]bool{"create": true, "save": true, "update": true, "delete": true}

// CheckPosted decides whether a client may post e (POST /events) and
// returns it as it is published. Only the server reports changes of stored
// objects: an event whose Type names a stored kind and whose Action is a
// store action (create, save, update, delete; in any case) is invalid, so
// a made-up "machines update" with WorkflowComplete true never reaches an
// agent, an operator's stream or a "machines wait" (docs/design.md §13.1).
// A Type naming a kind in another case is written as the kind's name, so
// that streams decide it as an event of that kind: it reaches only the
// subscribers who may see the object it names (docs/design.md §13.2).
func (c *Catalog) CheckPosted(e Event) (Event, error) {
	if e.Type == "" || e.Action == "" {
		return e, NewError(EBADREQUEST, "POST", "events", "", "event needs Type and Action")
	}
	for _, prefix := range c.prefixes {
		if strings.EqualFold(strings.TrimSpace(e.Type), prefix) {
			e.Type = prefix
			break
		}
	}
	if c.Kind(e.Type) != nil && storeActions[strings.ToLower(strings.TrimSpace(e.Action))] {
		return e, NewError(EINVALID, "ValidationError", "events", e.Key,
			fmt.Sprintf("a posted event cannot be %s %s: only the server reports changes of stored objects",
				e.Type, strings.ToLower(strings.TrimSpace(e.Action))))
	}
	return e, nil
}
