package backend

import (
	"fmt"
	"maps"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Filter operators of DRP list queries (docs/design.md §3.5).
const (
	OpEq      = "Eq"
	OpNe      = "Ne"
	OpLt      = "Lt"
	OpLte     = "Lte"
	OpGt      = "Gt"
	OpGte     = "Gte"
	OpIn      = "In"
	OpNin     = "Nin"
	OpRe      = "Re"
	OpBetween = "Between"
	OpExcept  = "Except"
)

// ops names the filter operators by their lower-case spelling; a query
// may write them in any case.
var ops = map[string]string{
	"eq": OpEq, "ne": OpNe, "lt": OpLt, "lte": OpLte, "gt": OpGt, "gte": OpGte,
	"in": OpIn, "nin": OpNin, "re": OpRe, "between": OpBetween, "except": OpExcept,
}

// queryLabel names the numeric query parameters in error messages.
var queryLabel = map[string]string{"offset": "Offset", "limit": "Limit"}

// FilterTarget says what a filter reads.
type FilterTarget int

const (
	TargetIndex FilterTarget = iota // an index of the kind
	TargetMeta                      // Meta.<key>
	TargetParam                     // a param value (machines, profiles)
)

// Filter is one condition of a list query. Filters are ANDed.
type Filter struct {
	Name   string // as given: the index name, "Meta.x", or the param name
	Target FilterTarget
	Index  Index // for TargetIndex
	Op     string
	Values []string
}

// Query is a parsed list request.
type Query struct {
	Filters   []Filter
	Offset    int
	Limit     int // -1: no limit
	Sort      []string
	Reverse   bool
	Slim      []string
	Params    []string
	Aggregate bool
	Decode    bool
	Expand    bool
	// Visible, when non-nil, restricts the result to these keys (tenant
	// visibility, pushed into SQL by the store).
	Visible []string
}

// MaxLimit bounds one page.
const MaxLimit = 100000

// controlWords are list query keys that are not filters.
var controlWords = map[string]bool{
	"offset": true, "limit": true, "sort": true, "reverse": true, "slim": true, "decode": true,
	"params": true, "aggregate": true, "expand": true, "exclude-self": true, "filter": true, "raw": true,
	"group-by": true, "range-only": true, "commented": true, "reduced": true, "force": true,
}

// IsControlWord reports whether a query key is a list control word.
func IsControlWord(k string) bool { return controlWords[k] }

// ParseQuery turns query parameters into a Query for kind. isParam says
// whether a name is a known param (for param-value filters); it may be nil.
// Errors are ENOTACCEPTABLE (406) with DRP's texts.
func ParseQuery(kind *Kind, v url.Values, isParam func(string) bool) (Query, error) {
	q := Query{Limit: -1}
	bad := func(format string, args ...any) error {
		return OpError(ENOTACCEPTABLE, ReadOp, kind.Prefix, "", fmt.Sprintf(format, args...))
	}
	keys := slices.Sorted(maps.Keys(v))
	for _, k := range keys {
		vals := v[k]
		val := ""
		if len(vals) > 0 {
			val = vals[len(vals)-1]
		}
		switch k {
		case "offset", "limit":
			n, err := strconv.Atoi(val)
			if err != nil {
				return q, bad("%s must be an integer: %q", queryLabel[k], val)
			}
			if n < 0 {
				return q, bad("%s cannot be negative", queryLabel[k])
			}
			if k == "offset" {
				q.Offset = n
			} else {
				if n > MaxLimit {
					n = MaxLimit
				}
				q.Limit = n
			}
		case "sort":
			for _, s := range vals {
				for _, f := range SplitList(s) {
					idx, ok := kind.Indexes[f]
					if !ok {
						return q, bad("Filter not found: %s", f)
					}
					if idx.Unordered {
						return q, bad("Cannot sort on %s", f)
					}
					q.Sort = append(q.Sort, f)
				}
			}
		case "reverse", "aggregate", "decode", "expand":
			b, err := parseBoolParam(val)
			if err != nil {
				return q, bad("%s must be true or false", k)
			}
			switch k {
			case "reverse":
				q.Reverse = b
			case "aggregate":
				q.Aggregate = b
			case "decode":
				q.Decode = b
			case "expand":
				q.Expand = b
			}
		case "slim":
			q.Slim = SplitList(val)
		case "params":
			q.Params = SplitList(val)
		default:
			if controlWords[k] {
				continue
			}
			f, err := parseFilter(kind, k, val, isParam)
			if err != nil {
				return q, err
			}
			q.Filters = append(q.Filters, f)
		}
	}
	return q, nil
}

func parseBoolParam(s string) (bool, error) {
	if s == "" {
		return true, nil
	}
	return strconv.ParseBool(s)
}

// SplitList splits a comma list (slim=, params=), dropping blank items.
func SplitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func parseFilter(kind *Kind, name, raw string, isParam func(string) bool) (Filter, error) {
	bad := func(format string, args ...any) (Filter, error) {
		return Filter{}, OpError(ENOTACCEPTABLE, ReadOp, kind.Prefix, "", fmt.Sprintf(format, args...))
	}
	f := Filter{Name: name}
	switch {
	case kind.HasIndex(name):
		f.Target = TargetIndex
		f.Index = kind.Indexes[name]
	case strings.HasPrefix(name, "Meta.") && len(name) > len("Meta."):
		f.Target = TargetMeta
	case kind.ParamFilters && ValidParamName(name) && isParam != nil && isParam(name):
		f.Target = TargetParam
	default:
		return bad("Filter not found: %s", name)
	}
	op, args, err := parseOp(raw)
	if err != nil {
		return bad("%s: %s", name, err.Error())
	}
	f.Op, f.Values = op, args
	for _, a := range args {
		if strings.IndexByte(a, 0) >= 0 {
			// Nothing stored holds a NUL, and PostgreSQL refuses one in
			// a query: refuse it on every database alike.
			return bad("%s: values cannot contain NUL", name)
		}
	}
	switch op {
	case OpBetween, OpExcept:
		if len(args) != 2 {
			return bad("%s: %s needs 2 values", name, op)
		}
	case OpIn, OpNin:
		if len(args) == 0 {
			return bad("%s: %s needs at least one value", name, op)
		}
	default:
		if len(args) != 1 {
			return bad("%s: %s needs 1 value", name, op)
		}
	}
	if op == OpRe {
		if _, err := regexp.Compile(args[0]); err != nil {
			return bad("%s: invalid regular expression: %s", name, err.Error())
		}
	}
	if f.Target == TargetIndex {
		for _, a := range f.Values {
			if err := checkIndexValue(f.Index, op, a); err != nil {
				return bad("%s %s", name, err.Error())
			}
		}
		if f.Index.Unordered && (op == OpLt || op == OpLte || op == OpGt || op == OpGte || op == OpBetween || op == OpExcept) {
			return bad("%s: %s is not supported on a list index", name, op)
		}
	}
	return f, nil
}

// parseOp splits "Op(a,b)" into its operator and arguments; a bare value is Eq.
func parseOp(raw string) (string, []string, error) {
	open := strings.IndexByte(raw, '(')
	if open > 0 && strings.HasSuffix(raw, ")") {
		if op, ok := ops[strings.ToLower(raw[:open])]; ok {
			inner := raw[open+1 : len(raw)-1]
			switch op {
			case OpEq, OpNe, OpLt, OpLte, OpGt, OpGte, OpRe:
				return op, []string{inner}, nil
			}
			return op, strings.Split(inner, ","), nil
		}
	}
	if open > 0 {
		if _, ok := ops[strings.ToLower(raw[:open])]; ok {
			return "", nil, fmt.Errorf("malformed filter %q: missing closing parenthesis", raw)
		}
	}
	return OpEq, []string{raw}, nil
}

func checkIndexValue(idx Index, op, v string) error {
	if op == OpRe {
		return nil
	}
	switch idx.Type {
	case IndexBool:
		if v != "true" && v != "false" {
			return fmt.Errorf("must be true or false")
		}
	case IndexInt:
		if _, err := strconv.ParseInt(v, 10, 64); err != nil {
			return fmt.Errorf("must be an integer, not %q", v)
		}
	case IndexIP:
		if net.ParseIP(v) == nil {
			return fmt.Errorf("must be an IP address, not %q", v)
		}
	case IndexTime:
		if _, err := time.Parse(time.RFC3339Nano, v); err != nil {
			return fmt.Errorf("must be an RFC 3339 time, not %q", v)
		}
	}
	return nil
}

// KeyPaged reports whether q is a restricted list without filters, in key
// order, with a limit: its page is the first existing objects of its sorted
// visible keys (read from the read cache by backend/objects and from the
// first visible keys by backend/store).
func (q Query) KeyPaged(k *Kind) bool {
	if q.Visible == nil || len(q.Filters) > 0 || q.Limit < 0 {
		return false
	}
	for _, name := range q.Sort {
		if idx, ok := k.Indexes[name]; !ok || idx.Field != k.KeyField {
			return false
		}
	}
	return true
}
