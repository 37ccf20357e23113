package main

import (
	"strings"
)

// subcommand is one subcommand of a command: its name and what runs it
// with the arguments after the name.
type subcommand struct {
	name string
	run  func(args []string) error
}

// runSubcommand runs the subcommand of cmd that args[0] names; none, or
// one that is not among subs, is a usage error naming subs.
func runSubcommand(cmd string, args []string, subs ...subcommand) error {
	names := make([]string, len(subs))
	for i, s := range subs {
		names[i] = s.name
	}
	want := names[len(names)-1]
	if len(names) > 1 {
		want = strings.Join(names[:len(names)-1], ", ") + " or " + want
	}
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return usagef("%s: want a subcommand: %s", cmd, want)
	}
	for _, s := range subs {
		if s.name == args[0] {
			return s.run(args[1:])
		}
	}
	return usagef("%s: unknown subcommand %q (want %s)", cmd, args[0], want)
}
