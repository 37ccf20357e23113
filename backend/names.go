package backend

import (
	"regexp"
	"strings"
)

// Name rules of DRP's client models (docs/design.md §4.2). Each needs at least two
// characters.
var (
	nameRe    = regexp.MustCompile(`^\pL+([- _.]+|\pN+|\pL+)+$`)
	userRe    = regexp.MustCompile(`^\pL+([- @_.]+|\pN+|\pL+)+$`)
	machineRe = regexp.MustCompile(`^(\pL|\pN)+([- _.]+|\pN+|\pL+)+$`)
	paramRe   = regexp.MustCompile(`^\pL+([- _./]+|\pN+|\pL+)+$`)
)

const maxNameLen = 255

// validName applies a rule and, beyond DRP's patterns (which let a name end
// in spaces), refuses leading and trailing whitespace: "alice " and "alice"
// would otherwise be two objects that people, logs and any comparison that
// trims cannot tell apart.
func validName(re *regexp.Regexp, s string) bool {
	return len(s) <= maxNameLen && strings.TrimSpace(s) == s && re.MatchString(s)
}

// ValidName checks roles, tenants, pools, workflows, stages, profiles,
// plugins, tasks and bootenvs.
func ValidName(s string) bool { return validName(nameRe, s) }

// ValidUserName checks user names (which may hold '@').
func ValidUserName(s string) bool { return validName(userRe, s) }

// ValidMachineName checks machine names (which may start with a digit).
func ValidMachineName(s string) bool { return validName(machineRe, s) }

// ValidParamName checks param names and keys of Params maps (which may hold '/').
func ValidParamName(s string) bool { return validName(paramRe, s) }
