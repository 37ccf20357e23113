package backend

import (
	"errors"
	"net/url"
	"regexp"
	"testing"
)

// FuzzParseQuery feeds arbitrary query strings to ParseQuery for every kind:
// it must not panic, must refuse only with a 406 or 400 *Error, and what it
// accepts must be a query the store can run (known indexes, valid regular
// expressions, bounded limit).
func FuzzParseQuery(f *testing.F) {
	for _, s := range []string{
		"", "Name=m1", "Name=Eq(x' OR '1'='1)", "Name=Re((a+)+$)", "sort=Name;DROP TABLE machines",
		"sort=Name,Uuid&reverse=true&limit=10&offset=2", "limit=-1", "limit=99999999999999999999",
		"Name=Between(a,b)", "Name=In(a,b,c)", "Name=Re([)", "Meta.color=red", "Meta.=x", "foo/bar=5",
		"Available=maybe", "Runnable=Eq(true)", "Name=Eq(", "Name=Nin()", "slim=Params,Meta&params=a,b",
		"decode=yes", "%00=%00", "Name=%E2%80%AE", "Profiles=Gt(a)", "CurrentTask=Lt(x)",
	} {
		f.Add(s, uint8(0))
		f.Add(s, uint8(3))
	}
	kinds := NewCatalog()
	prefixes := kinds.Prefixes()
	isParam := func(s string) bool { return s == "foo/bar" || s == "a" }
	f.Fuzz(func(t *testing.T, raw string, which uint8) {
		kind := kinds.Kind(prefixes[int(which)%len(prefixes)])
		v, _ := url.ParseQuery(raw)
		q, err := ParseQuery(kind, v, isParam)
		if err != nil {
			var be *Error
			if !errors.As(err, &be) {
				t.Fatalf("error is %T, not *backend.Error: %v", err, err)
			}
			if be.Code != ENOTACCEPTABLE && be.Code != EBADREQUEST {
				t.Fatalf("error code %s for %q: %v", be.Code, raw, err)
			}
			return
		}
		if q.Limit < -1 || q.Limit > MaxLimit || q.Offset < 0 {
			t.Fatalf("limit %d offset %d from %q", q.Limit, q.Offset, raw)
		}
		for _, s := range q.Sort {
			if idx, ok := kind.Indexes[s]; !ok || idx.Unordered {
				t.Fatalf("sort on %q accepted for %s", s, kind.Prefix)
			}
		}
		for _, fl := range q.Filters {
			if fl.Target == TargetIndex && !kind.HasIndex(fl.Name) {
				t.Fatalf("filter on unknown index %q", fl.Name)
			}
			if fl.Op == OpRe {
				if _, err := regexp.Compile(fl.Values[0]); err != nil {
					t.Fatalf("invalid regexp accepted: %q", fl.Values[0])
				}
			}
			if len(fl.Values) == 0 {
				t.Fatalf("filter %q without values", fl.Name)
			}
		}
	})
}
