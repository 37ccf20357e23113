package backend

import "regexp"

// Name rules of DRP's client models (reference §3.3). Each needs at least two
// characters.
var (
	nameRe    = regexp.MustCompile(`^\pL+([- _.]+|\pN+|\pL+)+$`)
	userRe    = regexp.MustCompile(`^\pL+([- @_.]+|\pN+|\pL+)+$`)
	machineRe = regexp.MustCompile(`^(\pL|\pN)+([- _.]+|\pN+|\pL+)+$`)
	paramRe   = regexp.MustCompile(`^\pL+([- _./]+|\pN+|\pL+)+$`)
)

const maxNameLen = 255

// ValidName checks roles, tenants, pools, workflows, stages, profiles,
// plugins, tasks and bootenvs.
func ValidName(s string) bool { return len(s) <= maxNameLen && nameRe.MatchString(s) }

// ValidUserName checks user names (which may hold '@').
func ValidUserName(s string) bool { return len(s) <= maxNameLen && userRe.MatchString(s) }

// ValidMachineName checks machine names (which may start with a digit).
func ValidMachineName(s string) bool { return len(s) <= maxNameLen && machineRe.MatchString(s) }

// ValidParamName checks param names and keys of Params maps (which may hold '/').
func ValidParamName(s string) bool { return len(s) <= maxNameLen && paramRe.MatchString(s) }
