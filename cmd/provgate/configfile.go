package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/agnivade/levenshtein"
	"go.yaml.in/yaml/v3"
)

// configFlag names the flag (and, through envName, the variable) that
// points at the configuration file.
const configFlag = "config"

// applyFile sets the flags of fs from the YAML file at path: a mapping whose
// keys are the flag names (data-dir, listen, ...) and whose values are
// single values, written as on the command line. Values go through each
// flag's own parser, as the environment's do. It is strict, so that a typo
// never goes unnoticed: an unknown or repeated key, a nested value, an empty
// one or a second document is an error naming the line.
func applyFile(fs *flag.FlagSet, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("--config %s: %w", path, pathErr(err))
	}
	var problems []string
	fail := func(line int, format string, a ...any) error {
		return fmt.Errorf("--config %s: line %d: %s", path, line, fmt.Sprintf(format, a...))
	}
	add := func(line int, format string, a ...any) {
		problems = append(problems, fmt.Sprintf("line %d: %s", line, fmt.Sprintf(format, a...)))
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil // an empty file sets nothing
		}
		return fmt.Errorf("--config %s: %s", path, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return fail(extra.Line, "want one YAML document")
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return fail(doc.Line, "want a mapping of flag names to values")
	}
	top := doc.Content[0]
	if top.Kind == yaml.ScalarNode && top.Tag == "!!null" {
		return nil // only comments
	}
	if top.Kind != yaml.MappingNode {
		return fail(top.Line, "want a mapping of flag names to values, e.g. listen: 127.0.0.1:8092")
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(top.Content); i += 2 {
		k, v := top.Content[i], top.Content[i+1]
		name := k.Value
		if k.Kind != yaml.ScalarNode {
			add(k.Line, "keys must be flag names")
			continue
		}
		f := fs.Lookup(name)
		if f == nil || name == configFlag {
			add(k.Line, "unknown key %q (keys are the flag names of provgate serve -h without the dashes%s)",
				name, suggestion(fs, name))
			continue
		}
		if first, ok := seen[name]; ok {
			add(k.Line, "%s is set again (first on line %d)", name, first)
			continue
		}
		seen[name] = k.Line
		switch {
		case v.Kind == yaml.AliasNode:
			add(v.Line, "%s: aliases are not accepted", name)
			continue
		case v.Kind != yaml.ScalarNode:
			add(v.Line, "%s: want a single value, not a list or mapping", name)
			continue
		case v.Tag == "!!null":
			add(v.Line, "%s has no value (write \"\" for an empty one)", name)
			continue
		}
		if err := f.Value.Set(v.Value); err != nil {
			if _, ok := f.Value.(*secret); ok {
				err = errors.New("invalid value")
			}
			add(v.Line, "%s: %v", name, err)
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("--config %s: %s", path, strings.Join(problems, "; "))
	}
	return nil
}

// suggestion names the flags an unknown key most likely meant: one spelt
// alike up to dashes, underscores and case, or within two typing mistakes.
func suggestion(fs *flag.FlagSet, key string) string {
	norm := func(s string) string { return strings.ToLower(strings.NewReplacer("-", "", "_", "").Replace(s)) }
	var names []string
	fs.VisitAll(func(f *flag.Flag) {
		if f.Name == configFlag {
			return
		}
		if norm(f.Name) == norm(key) || levenshtein.ComputeDistance(f.Name, strings.ToLower(key)) <= 2 {
			names = append(names, f.Name)
		}
	})
	if len(names) == 0 {
		return ""
	}
	slices.Sort(names)
	return "; did you mean " + strings.Join(names, " or ") + "?"
}
