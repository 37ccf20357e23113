package policies

import (
	"maps"
	"slices"
	"strings"

	"github.com/provgate/provgate/backend"
)

// SpecNode is the set of specifics an action is granted on.
type SpecNode struct {
	// All is a specific of "*": every object of the scope.
	All bool `json:"all"`
	// Keys are the listed specifics; empty when All.
	Keys map[string]bool `json:"keys"`
}

// CompiledClaim is a claim expanded the way DRP compiles it (reference
// §4.5): scope → action → specifics, with "*" and comma lists resolved
// and unknown scopes and actions dropped. It is the form the Rego
// functions in claims.rego work on.
type CompiledClaim map[string]map[string]SpecNode

// CompileClaim compiles c against scopes (backend.Scopes in production).
// It must agree with data.provgate.claims.compile; a test checks that.
func CompileClaim(c backend.Claim, scopes map[string][]string) CompiledClaim {
	node := SpecNode{Keys: map[string]bool{}}
	if strings.TrimSpace(c.Specific) == "*" {
		node.All = true
	} else {
		for _, k := range strings.Split(c.Specific, ",") {
			node.Keys[strings.TrimSpace(k)] = true
		}
	}
	var names []string
	if strings.TrimSpace(c.Scope) == "*" {
		for s := range scopes {
			names = append(names, s)
		}
	} else {
		for _, s := range strings.Split(c.Scope, ",") {
			s = strings.TrimSpace(s)
			if _, known := scopes[s]; known {
				names = append(names, s)
			}
		}
	}
	out := make(CompiledClaim, len(names))
	for _, s := range names {
		actions := map[string]SpecNode{}
		if strings.TrimSpace(c.Action) == "*" {
			for _, a := range scopes[s] {
				actions[a] = node
			}
		} else {
			for _, a := range strings.Split(c.Action, ",") {
				a = strings.TrimSpace(a)
				base, _, _ := strings.Cut(a, ":")
				if slices.Contains(scopes[s], base) {
					actions[a] = node
				}
			}
		}
		out[s] = actions
	}
	return out
}

// NewData builds what the policies read under data.provgate from the
// stored roles and tenants and the verified license, with the compiled
// and set forms filled in (see Normalized).
func NewData(roles []backend.Role, tenants []backend.Tenant, license LicenseData) Data {
	d := Data{
		Roles:   make(map[string]RoleData, len(roles)),
		Tenants: make(map[string]TenantData, len(tenants)),
		License: license,
	}
	for _, r := range roles {
		d.Roles[r.Name] = RoleData{Claims: r.Claims}
	}
	for _, t := range tenants {
		d.Tenants[t.Name] = TenantData{Members: t.Members, Users: t.Users}
	}
	return d.Normalized()
}

// Normalized returns a copy of d with everything derivable filled in where
// missing: Scopes (backend.Scopes), each role's Compiled claims, each
// tenant's MemberSet, and UserTenant from the tenants' Users. Data written
// by hand, with only the plain fields, thus decides exactly as fast as data
// from NewData. d itself is not modified.
func (d Data) Normalized() Data {
	out := d
	if out.Scopes == nil {
		out.Scopes = backend.Scopes
	}
	out.Roles = make(map[string]RoleData, len(d.Roles))
	for name, r := range d.Roles {
		if r.Claims == nil {
			r.Claims = []backend.Claim{}
		}
		if r.Compiled == nil {
			r.Compiled = make([]CompiledClaim, len(r.Claims))
			for i, c := range r.Claims {
				r.Compiled[i] = CompileClaim(c, out.Scopes)
			}
		}
		out.Roles[name] = r
	}
	out.Tenants = make(map[string]TenantData, len(d.Tenants))
	for name, t := range d.Tenants {
		if t.Members == nil {
			t.Members = map[string][]string{}
		}
		if t.Users == nil {
			t.Users = []string{}
		}
		if t.MemberSet == nil {
			t.MemberSet = make(map[string]map[string]bool, len(t.Members))
			for scope, keys := range t.Members {
				set := make(map[string]bool, len(keys))
				for _, k := range keys {
					set[k] = true
				}
				t.MemberSet[scope] = set
			}
		}
		out.Tenants[name] = t
	}
	if out.UserTenant == nil {
		out.UserTenant = map[string]string{}
		// Reference §4.6: a user is in at most one tenant; the store
		// enforces it, and the first tenant by name wins should it not.
		for _, name := range slices.Sorted(maps.Keys(d.Tenants)) {
			for _, u := range d.Tenants[name].Users {
				if _, taken := out.UserTenant[u]; !taken {
					out.UserTenant[u] = name
				}
			}
		}
	}
	if out.License.Features == nil {
		out.License.Features = []string{}
	}
	return out
}

// Clone returns a copy of d that shares no memory with it.
func (d Decision) Clone() Decision {
	out := d
	out.Reasons = slices.Clone(d.Reasons)
	if d.Visible != nil {
		v := *d.Visible
		v.Keys = slices.Clone(d.Visible.Keys)
		out.Visible = &v
	}
	return out
}
