package stream

import (
	"errors"
	"strings"

	"github.com/provgate/provgate/backend"
)

// filter is one registered "<type>.<action>.<key>": each part is "*" or a
// comma list of values, as DRP's clients write them (docs/design.md §13.2).
// In a value, \1 stands for '.', \2 for ',' and \3 for '*'. The key is the
// rest after the second dot, so keys with dots (addresses) match whole.
type filter struct {
	parts [3][]string // nil: any
}

func parseFilter(s string) (filter, error) {
	var f filter
	ps := strings.SplitN(s, ".", 3)
	if len(ps) != 3 {
		return f, errors.New("a filter is <type>.<action>.<key>")
	}
	for i, p := range ps {
		p = strings.TrimSpace(p)
		if p == "" {
			return f, errors.New("a filter is <type>.<action>.<key>, each part * or a comma list")
		}
		if p == "*" {
			continue
		}
		for _, v := range strings.Split(p, ",") {
			v = strings.NewReplacer(`\1`, ".", `\2`, ",", `\3`, "*").Replace(strings.TrimSpace(v))
			f.parts[i] = append(f.parts[i], v)
		}
	}
	return f, nil
}

func (f filter) match(e backend.Event) bool {
	return in(f.parts[0], e.Type) && in(f.parts[1], e.Action) && in(f.parts[2], e.Key)
}

func in(list []string, v string) bool {
	if list == nil {
		return true
	}
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}
