package policies

import (
	"crypto/sha256"
	"encoding/hex"
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

// CompiledClaim is a claim expanded the way DRP compiles it (docs/design.md
// §5.1): scope → action → specifics, with "*" and comma lists resolved
// and unknown scopes and actions dropped. It is the form the Rego
// functions in claims.rego work on.
type CompiledClaim map[string]map[string]SpecNode

// CompileClaim compiles c against scopes (backend.Catalog.ScopeActions in
// production).
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

// CompileWanted compiles a required claim: its scope and action as
// CompileClaim reads them, and its specific, the key the request named, as
// exactly one key (never split on commas, trimmed or read as "*"), so that a
// request naming "alice " is never taken for "alice". It must agree with
// data.provgate.claims.compile_wanted; a test checks that.
func CompileWanted(c backend.Claim, scopes map[string][]string) CompiledClaim {
	out := CompileClaim(backend.Claim{Scope: c.Scope, Action: c.Action, Specific: "*"}, scopes)
	for _, actions := range out {
		for a := range actions {
			actions[a] = SpecNode{Keys: map[string]bool{c.Specific: true}}
		}
	}
	return out
}

// ActionFallback lists the action keys DRP tries, nearest first, when a
// claim lacks the exact key (docs/design.md §5.1): action:<name> falls back to
// the bare action; update:/p/q to update:/p, update: and update, walking
// whole pointer segments; update: to update. A pointer without its leading
// '/' has no ancestors, but update: and update still cover it (docs/design.md
// §5.1). Other keys have no fallback. It must agree with
// data.provgate.claims.fallback_keys; a test checks that.
func ActionFallback(key string) []string {
	if strings.HasPrefix(key, "action:") {
		return []string{"action"}
	}
	ptr, ok := strings.CutPrefix(key, "update:")
	switch {
	case !ok:
		return nil
	case ptr == "":
		return []string{"update"}
	case !strings.HasPrefix(ptr, "/"):
		return []string{"update:", "update"}
	}
	segments := strings.Split(ptr, "/")
	out := make([]string, 0, len(segments)+1)
	for n := len(segments) - 1; n >= 1; n-- {
		out = append(out, "update:"+strings.Join(segments[:n], "/"))
	}
	return append(out, "update")
}

// IndexNode is one entry of a role's index: the union of the nodes its
// claims match for one action key, and which claims (positions in the
// role's Claims) feed it, so that what covers a wanted claim is named by
// lookup (docs/design.md §9.8).
type IndexNode struct {
	// All: some claim names every object of the scope.
	All bool `json:"all"`
	// Keys are the listed specifics, each with the positions of the
	// claims covering it: those listing it and those naming every object
	// (never empty, so a listed key reads as true).
	Keys map[string][]int `json:"keys"`
	// AllBy are the positions of the claims naming every object. With
	// those in Keys, they are every claim merged (those covering a wanted
	// claim with an empty specific: lists, creates).
	AllBy []int `json:"all_by"`
}

// Index is a role's claims merged by IndexClaims: scope → action key →
// IndexNode.
type Index map[string]map[string]IndexNode

// IndexClaims merges the compiled claims of one role into a single
// scope → action key → specifics map that decides a one-action,
// one-specific wanted claim exactly as trying the claims one by one does.
// For every key k some claim holds, the entry is the union over the claims
// of the node each would match for a wanted key k (its exact k, else its
// nearest fallback). A wanted key w is then answered by the first of w and
// its fallbacks present in the index: no claim holds a key between w and
// that one, so each claim matches w exactly as it matches it. A union of
// specifics covers one specific when some claim's does; wanted claims
// naming several actions or specifics need one single claim to cover them
// all and are not decided with the index. Each entry also records which
// claims (their positions in compiled) it merged, by what they name.
func IndexClaims(compiled []CompiledClaim) Index {
	out := Index{}
	for _, c := range compiled {
		for scope, actions := range c {
			if out[scope] == nil {
				out[scope] = map[string]IndexNode{}
			}
			for key := range actions {
				out[scope][key] = IndexNode{Keys: map[string][]int{}, AllBy: []int{}}
			}
		}
	}
	for scope, keys := range out {
		for key, merged := range keys {
			for i, c := range compiled {
				n, ok := matchKey(c[scope], key)
				if !ok {
					continue
				}
				if n.All {
					merged.All = true
					merged.AllBy = append(merged.AllBy, i)
				}
				for k := range n.Keys {
					merged.Keys[k] = append(merged.Keys[k], i)
				}
			}
			// A claim naming every object covers each listed key too.
			for k, ps := range merged.Keys {
				merged.Keys[k] = mergePositions(ps, merged.AllBy)
			}
			keys[key] = merged
		}
	}
	return out
}

// mergePositions is the sorted union of two sorted position lists.
func mergePositions(a, b []int) []int {
	if len(b) == 0 {
		return a
	}
	out := make([]int, 0, len(a)+len(b))
	for len(a) > 0 || len(b) > 0 {
		switch {
		case len(b) == 0 || (len(a) > 0 && a[0] < b[0]):
			out, a = append(out, a[0]), a[1:]
		case len(a) == 0 || b[0] < a[0]:
			out, b = append(out, b[0]), b[1:]
		default:
			out, a, b = append(out, a[0]), a[1:], b[1:]
		}
	}
	return out
}

// matchKey is the node actions answer for the wanted key: the exact key if
// present, else the first fallback present.
func matchKey(actions map[string]SpecNode, key string) (SpecNode, bool) {
	if n, ok := actions[key]; ok {
		return n, true
	}
	for _, k := range ActionFallback(key) {
		if n, ok := actions[k]; ok {
			return n, true
		}
	}
	return SpecNode{}, false
}

// NewData builds what the policies read under data.provgate from the
// stored roles and tenants and the verified license, with the compiled
// and set forms filled in (see Normalized), against the scopes of a
// catalog built for it. The server uses NewDataIn with the catalog it was
// given.
func NewData(roles []backend.Role, tenants []backend.Tenant, license LicenseData) Data {
	return NewDataIn(nil, roles, tenants, license)
}

// NewDataIn is NewData against scopes (backend.Catalog.ScopeActions); nil
// scopes are those of a catalog built for it.
func NewDataIn(scopes map[string][]string, roles []backend.Role, tenants []backend.Tenant, license LicenseData) Data {
	d := Data{
		Scopes:  scopes,
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
// missing: Scopes (those of a catalog built for it; the server sets them
// from the catalog it was given, backend.Catalog.ScopeActions), each role's Compiled claims, each
// tenant's MemberSet, UserTenant from the tenants' Users and MachineTenants
// from their Members["machines"]. Data written
// by hand, with only the plain fields, thus decides exactly as fast as data
// from NewData. d itself is not modified.
func (d Data) Normalized() Data {
	out := d
	if out.Scopes == nil {
		out.Scopes = backend.NewCatalog().ScopeActions()
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
		if r.Index == nil {
			r.Index = IndexClaims(r.Compiled)
		}
		out.Roles[name] = r
	}
	out.RolesIndexed = true
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
		// docs/design.md §6.1: a user is in at most one tenant; the store
		// enforces it, and the first tenant by name wins should it not.
		for _, name := range slices.Sorted(maps.Keys(d.Tenants)) {
			for _, u := range d.Tenants[name].Users {
				if _, taken := out.UserTenant[u]; !taken {
					out.UserTenant[u] = name
				}
			}
		}
	}
	if out.MachineTenants == nil {
		// Every shard is there, empty or not, so that a write adds or
		// removes an entry of its shard and never the shard itself.
		out.MachineTenants = make(map[string]map[string][]string, MachineShards)
		for i := range MachineShards {
			out.MachineTenants[hex.EncodeToString([]byte{byte(i)})] = map[string][]string{}
		}
		for _, name := range slices.Sorted(maps.Keys(d.Tenants)) {
			for _, m := range d.Tenants[name].Members["machines"] {
				shard := MachineShard(m)
				if !slices.Contains(out.MachineTenants[shard][m], name) {
					out.MachineTenants[shard][m] = append(out.MachineTenants[shard][m], name)
				}
			}
		}
	}
	if out.License.Features == nil {
		out.License.Features = []string{}
	}
	return out
}

// MachineShard names the shard of data.provgate.machine_tenants holding a
// machine's entry: the first two hex digits of the SHA-256 of its key, so
// that the machines spread evenly over 256 shards whatever their keys look
// like. OPA's in-memory store rehashes a whole object when one of its keys
// is replaced, so a write changing one machine's tenants costs a shard,
// not the fleet (docs/design.md §14.4). It must agree with
// data.provgate.tenancy.shard; a test checks that.
func MachineShard(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:1])
}

// MachineShards is how many shards machine_tenants has: the values of the
// one byte MachineShard takes from the hash.
const MachineShards = 256

// Clone returns a copy of d that shares no memory with it but the visible
// keys, which no holder changes (Visible): a tenant's thousands of keys are
// not copied again for every request a cached decision answers.
func (d Decision) Clone() Decision {
	out := d
	out.Reasons = slices.Clone(d.Reasons)
	if d.Visible != nil {
		v := *d.Visible
		out.Visible = &v
	}
	return out
}
