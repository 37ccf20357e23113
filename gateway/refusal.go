package gateway

import (
	"context"
	"slices"
	"strings"

	"github.com/provgate/provgate/policies"
)

// licenseReason ends the policy's reason for a write refused for want of
// the rbac license (policies/authz.rego, docs/design.md §7).
const licenseReason = " is a licensed enterprise feature"

// licenseHint tells whoever meets that refusal how an operator gets and
// installs a license.
const licenseHint = "an rbac license is needed: create a key pair with " +
	"`provgate license keygen --private-key KEY --public-key PUB`, sign a license with " +
	"`provgate license sign --private-key KEY --owner NAME --expires 2030-01-01T00:00:00Z --features rbac > LICENSE`, " +
	"then start the server with --license-public-key PUB --license LICENSE (SIGHUP reloads both files), " +
	"or PUT {\"License\": \"<document>\"} to /api/v3/license on a server started with --license-public-key"

// refusalHints are messages added to a 403 after the policy's reasons, to
// say what would change the answer (docs/design.md §7).
func (s *Server) refusalHints(_ context.Context, _ policies.Input, d policies.Decision) []string {
	var hints []string
	if slices.ContainsFunc(d.Reasons, func(r string) bool { return strings.HasSuffix(r, licenseReason) }) {
		hints = append(hints, licenseHint)
	}
	return hints
}
