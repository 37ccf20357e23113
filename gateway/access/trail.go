package access

import (
	"strings"

	"github.com/provgate/provgate/backend"
	"github.com/provgate/provgate/policies"
)

// TrailSteps turns a decision's trail into steps, in evaluation order,
// naming only the tenants and roles see allows (the asker's visibility; nil
// shows every name, as the command line does for its operator).
func TrailSteps(x policies.Explanation, see func(scope, name string) bool) []Step {
	if see == nil {
		see = func(string, string) bool { return true }
	}
	visible := func(scope string, names []string) []string {
		out := []string{}
		for _, n := range names {
			if see(scope, n) {
				out = append(out, n)
			}
		}
		return out
	}
	t := x.Trail
	if t == nil {
		d := Step{Step: "claim", Outcome: Pass, Detail: "the served policy gives no trail; its decision allows"}
		if !x.Decision.Allow {
			d.Outcome, d.Detail = Fail, strings.Join(x.Decision.Reasons, "; ")
		}
		return []Step{d}
	}
	var out []Step
	tenants := visible("tenants", t.Tenant.Tenants)
	tenant := Step{Step: "tenant", Outcome: Pass}
	switch {
	case t.Tenant.Hidden && t.Tenant.OtherMachine:
		tenant.Outcome, tenant.Detail = Fail, "a machine's token sees only its own machine: not found (404), roles never consulted"
	case t.Tenant.Hidden:
		tenant.Outcome = Fail
		tenant.Detail = "hidden by the user's tenant" + namedList(visible("tenants", t.Tenant.HiddenBy)) +
			": not found (404), roles never consulted"
	case len(t.Tenant.Tenants) == 0:
		tenant.Detail = "no tenant restricts the user"
	default:
		tenant.Detail = "visible to the user's tenant" + namedList(tenants)
	}
	out = append(out, tenant)
	reached := !t.Tenant.Hidden
	license := Step{Step: "license", Outcome: Pass, Detail: "no claim needs a license"}
	switch {
	case !reached:
		license.Outcome, license.Detail = Skipped, ""
	case len(t.License.Failures) > 0:
		license.Outcome, license.Detail = Fail, strings.Join(t.License.Failures, "; ")
	case t.License.Licensed:
		license.Detail = "licensed (rbac)"
	}
	out = append(out, license)
	for _, st := range t.Claims {
		c := backend.Claim{Scope: st.Claim.Scope, Action: st.Claim.Action, Specific: st.Claim.Specific}
		step := Step{Step: "claim", Claim: &c}
		switch {
		case !reached:
			step.Outcome = Skipped
		case st.Held:
			step.Outcome = Pass
			step.Role, step.Held, step.Detail = cover(st, see)
		default:
			step.Outcome = Fail
			step.Detail = uncovered(st)
			step.GrantedBy = visible("roles", st.GrantedBy)
		}
		if reached && st.Held && !st.Licensed {
			step.Outcome, step.Detail = Fail, step.Detail+"; not licensed"
		}
		out = append(out, step)
	}
	switch {
	case !t.VetoesConsulted:
		out = append(out, Step{Step: "veto", Outcome: Skipped, Detail: "extensions are consulted only for requests the rules above allow"})
	case len(t.Vetoes) == 0:
		out = append(out, Step{Step: "veto", Outcome: Pass, Detail: "no extension vetoes"})
	default:
		for _, v := range t.Vetoes {
			out = append(out, Step{Step: "veto", Outcome: Fail, Package: "provgate.ext." + v.Package,
				Message: v.Message, Detail: "vetoed by provgate.ext." + v.Package + ": " + v.Message})
		}
	}
	return out
}

func namedList(names []string) string {
	if len(names) == 0 {
		return ""
	}
	return " (" + strings.Join(names, ", ") + ")"
}

// cover names the grant covering a held claim: a role and its claim, the
// self claims, a direct claim or a machine token's set.
func cover(st policies.ClaimStep, see func(scope, name string) bool) (role, held, detail string) {
	if len(st.CoveredBy) == 0 {
		return "", "", "held"
	}
	c := st.CoveredBy[0]
	for _, cv := range st.CoveredBy {
		if cv.Source == "role" {
			c = cv
			break
		}
	}
	switch c.Source {
	case "self":
		return "self", "", "held by the implicit self claims (get, token, password on oneself; info get)"
	case "claim":
		return "direct claim", c.Claim, "held by the direct claim " + c.Claim
	case "machine_token":
		return c.Role + " token", "", "held by the " + c.Role + " machine token's set"
	}
	if !see("roles", c.Role) {
		return c.Role, "", "held by role " + c.Role
	}
	detail = "held by role " + c.Role + ": " + c.Claim
	if st.TokenRoles.Restricted {
		detail += "; the token's roles cover it too (" + strings.Join(st.TokenRoles.CoveredBy, ", ") + ")"
	}
	return c.Role, c.Claim, detail
}

// uncovered says why a claim is not held.
func uncovered(st policies.ClaimStep) string {
	switch {
	case st.OwnCredential:
		return "a restricted token never changes its own user's password or Secret"
	case len(st.CoveredBy) == 0:
		return "not covered by any claim of the user"
	case st.TokenRoles.Restricted && len(st.TokenRoles.CoveredBy) == 0:
		return "covered by the user's roles but by none of the roles the token was restricted to"
	case st.Restriction.Restricted && !st.Restriction.Covered:
		return "covered by the user's roles but outside the token's restriction"
	}
	return "not covered"
}
