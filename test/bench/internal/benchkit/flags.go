package benchkit

import (
	"flag"
	"strings"
)

// Strings is a repeatable string flag.
type Strings []string

func (l *Strings) String() string     { return strings.Join(*l, " ") }
func (l *Strings) Set(v string) error { *l = append(*l, v); return nil }

// ManagerArgsFlag registers --manager-arg: extra flags for the manager under test, repeatable;
// example is one, shown in the usage.
func ManagerArgsFlag(example string) *Strings {
	return ArgsFlag("manager-arg", "manager", example)
}

// ArgsFlag registers --name: extra flags for program, repeatable; example is one, shown in the
// usage.
func ArgsFlag(name, program, example string) *Strings {
	var args Strings
	flag.Var(&args, name, "an extra "+program+" flag, e.g. --"+name+"="+example+" (repeatable)")
	return &args
}
