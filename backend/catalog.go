package backend

import (
	"maps"
	"slices"
	"strings"
)

// Catalog is the table of what the server knows by name: every stored
// kind (its prefix, key, indexes and how to make an empty value) and every
// claim scope with the actions valid in it (docs/design.md §1.4, §5.1).
// cmd builds one with NewCatalog at start and passes it to every package
// that turns a name into a kind or checks a scope: the store, the object
// service, the pool service, the event relay, the gateway and the policy
// data. It never changes after NewCatalog returns, so it is safe for
// concurrent use; what its methods return is the caller's to keep (lists
// are copies) except a *Kind, which is shared and must not be modified.
type Catalog struct {
	kinds    map[string]*Kind
	prefixes []string
	scopes   map[string][]string
	names    []string
}

// NewCatalog builds the catalog: DRP's kinds and scopes with provgate's
// additions.
func NewCatalog() *Catalog {
	c := &Catalog{kinds: kindTable(), scopes: scopeTable()}
	c.prefixes = slices.Sorted(maps.Keys(c.kinds))
	c.names = slices.Sorted(maps.Keys(c.scopes))
	return c
}

// Kind returns the kind for a prefix, or nil.
func (c *Catalog) Kind(prefix string) *Kind { return c.kinds[prefix] }

// Lookup is Kind for a prefix a caller asked for: an unknown one is
// ENOTFOUND.
func (c *Catalog) Lookup(prefix string) (*Kind, error) {
	k := c.kinds[prefix]
	if k == nil {
		return nil, OpError(ENOTFOUND, ReadOp, prefix, "", "No such object type "+prefix)
	}
	return k, nil
}

// Prefixes returns every kind's prefix, sorted.
func (c *Catalog) Prefixes() []string { return slices.Clone(c.prefixes) }

// Scopes returns every claim scope, sorted.
func (c *Catalog) Scopes() []string { return slices.Clone(c.names) }

// Actions returns the actions valid in scope (nil for an unknown scope).
func (c *Catalog) Actions(scope string) []string { return slices.Clone(c.scopes[scope]) }

// ScopeActions returns every scope with its actions, as the policy data
// holds them (docs/design.md §9).
func (c *Catalog) ScopeActions() map[string][]string {
	out := make(map[string][]string, len(c.scopes))
	for s, as := range c.scopes {
		out[s] = slices.Clone(as)
	}
	return out
}

// ValidScope reports whether s is a known scope.
func (c *Catalog) ValidScope(s string) bool { _, ok := c.scopes[s]; return ok }

// ValidAction reports whether action is valid in scope. Only the part
// before the first ':' is checked (action:<name>, update:<pointer>).
func (c *Catalog) ValidAction(scope, action string) bool {
	base, _, _ := strings.Cut(action, ":")
	return slices.Contains(c.scopes[scope], base)
}
