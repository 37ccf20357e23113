package backend

import (
	"reflect"
	"strings"
	"testing"
)

// TestFillEmptiesLists: after Fill, no list or map field of any kind is
// nil (JSON null), the envelope's included, except those marked omitempty,
// which stay off the wire when empty (docs/design.md §4.1).
func TestFillEmptiesLists(t *testing.T) {
	c := NewCatalog()
	for _, prefix := range c.Prefixes() {
		m := c.Kind(prefix).New()
		m.Fill()
		checkFilled(t, prefix, reflect.ValueOf(m).Elem())
	}
}

func checkFilled(t *testing.T, prefix string, v reflect.Value) {
	t.Helper()
	for i := range v.NumField() {
		f, fv := v.Type().Field(i), v.Field(i)
		if f.Anonymous {
			checkFilled(t, prefix, fv)
			continue
		}
		switch fv.Kind() {
		case reflect.Slice, reflect.Map:
			if fv.IsNil() && !strings.Contains(f.Tag.Get("json"), ",omitempty") {
				t.Errorf("%s: %s is nil after Fill", prefix, f.Name)
			}
		}
	}
}
