package backend

// Importable says whether objects of prefix may be created many at once
// (POST /api/v3/<prefix>/import, `provgate import`): users and roles, the
// objects an organisation brings by the thousand (docs/design.md §4.9).
func Importable(prefix string) bool {
	return prefix == PrefixUsers || prefix == PrefixRoles
}
