package backend

// Change is one entry of the store's change log: at revision Rev, the
// object Prefix/Key (users, roles, tenants) or the setting Key (Prefix
// "settings") was written. Replicas read the entries after the revision
// they hold and reload only those objects (docs/design.md §14.4).
type Change struct {
	Rev    int64
	Prefix string
	Key    string
}

// PrefixSettings names server settings in the change log.
const PrefixSettings = "settings"
