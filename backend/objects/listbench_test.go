package objects

import (
	"fmt"
	"net/url"
	"testing"

	"github.com/provgate/provgate/backend"
)

// BenchmarkList50 lists a page of 50 machines out of 2,000, encoded as a
// list reply, with and without view options, against the cached read of
// one machine (docs/design.md §14.6).
func BenchmarkList50(b *testing.B) {
	t := &testing.T{}
	e := envs(t)[0]
	ctx := sys()
	for i := 0; i < 2000; i++ {
		body := fmt.Sprintf(`{"Name":"m%d","Uuid":"%08x-0000-4000-8000-000000000000","Params":{"a":%d,"b":"x"}}`, i, i, i)
		if _, err := e.svc.Objects.Create(ctx, "machines", []byte(body)); err != nil {
			b.Fatal(err)
		}
	}
	k := backend.NewCatalog().Kind("machines")
	for _, raw := range []string{"limit=50", "limit=50&slim=Params", "limit=50&Name=m7"} {
		vals, _ := url.ParseQuery(raw)
		q, err := backend.ParseQuery(k, vals, func(string) bool { return false })
		if err != nil {
			b.Fatal(err)
		}
		b.Run(raw, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if _, _, _, err := e.svc.Objects.ListJSON(ctx, "machines", q); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	key := fmt.Sprintf("%08x-0000-4000-8000-000000000000", 7)
	b.Run("get", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, err := e.svc.Objects.View(ctx, "machines", key); err != nil {
				b.Fatal(err)
			}
		}
	})
}
