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
// say what would change the answer: a license (docs/design.md §7), or a
// token without its restriction (§5.6).
func (s *authorizer) refusalHints(ctx context.Context, in policies.Input, d policies.Decision) []string {
	var hints []string
	if slices.ContainsFunc(d.Reasons, func(r string) bool { return strings.HasSuffix(r, licenseReason) }) {
		hints = append(hints, licenseHint)
	}
	if h := s.restrictionHint(ctx, in); h != "" {
		hints = append(hints, h)
	}
	return hints
}

// restrictionHint says, for a refused user token restricted by roles= or
// by scope, action and specific, whether the restriction is what refused
// it: the same input decided for the user without the restriction is
// allowed. The question is not a request, so it is not logged as one. The
// user learns only what its own roles allow.
func (s *authorizer) restrictionHint(ctx context.Context, in policies.Input) string {
	p := in.Principal
	if p.Kind != "user" || (p.TokenRoles == nil && len(p.Restrict) == 0) {
		return ""
	}
	wide := in
	wide.Principal.TokenRoles, wide.Principal.Restrict = nil, nil
	d, err := s.question(ctx, wide)
	if err != nil || !d.Allow {
		return ""
	}
	var limits []string
	if p.TokenRoles != nil {
		limits = append(limits, "roles ["+strings.Join(p.TokenRoles, ",")+"]")
	}
	for _, c := range p.Restrict {
		limits = append(limits, "claim "+c.String())
	}
	return "refused by this token's restriction (" + strings.Join(limits, "; ") +
		"): the user's own roles allow this request, a token without that restriction may make it"
}
