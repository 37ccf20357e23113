package policies

import (
	"embed"
	"io/fs"
	"strings"
)

// The policy and its test suites are embedded together: the engine serves
// the policy, and go test runs the suites against exactly the embedded
// files (docs/design.md §16.5: the Rego suites run both by opa test and go test).
//
//go:embed *.rego
var regoFiles embed.FS

// TestSuffix marks Rego test files; they are never part of the served policy.
const TestSuffix = "_test.rego"

// Policies returns the embedded policy modules, file name → source, without
// the test files.
func Policies() map[string]string { return files(false) }

// Tests returns the embedded Rego test modules (*_test.rego), file name →
// source. They need Policies() alongside to run.
func Tests() map[string]string { return files(true) }

func files(tests bool) map[string]string {
	out := map[string]string{}
	names, _ := fs.Glob(regoFiles, "*.rego")
	for _, name := range names {
		if strings.HasSuffix(name, TestSuffix) != tests {
			continue
		}
		src, err := regoFiles.ReadFile(name)
		if err != nil {
			// The embedded FS cannot fail to read a file it lists.
			panic(err)
		}
		out[name] = string(src)
	}
	return out
}
