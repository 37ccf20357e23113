package objects

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/provgate/provgate/backend"
)

// TestListManyDecodedInOrder: a list long enough to be decoded on every
// CPU (decodeRecords) returns every object once, in the store's order,
// sanitized as a short one is, on every database.
func TestListManyDecodedInOrder(t *testing.T) {
	for _, e := range envs(t) {
		t.Run(e.name, func(t *testing.T) {
			ctx := sys()
			const n = 1300
			items := make([]json.RawMessage, n)
			for i := range items {
				items[i] = json.RawMessage(fmt.Sprintf(`{"Name":"lm-%04d","Roles":["r%d"],"Password":"pw-%d"}`, i, i%7, i))
			}
			if _, err := e.svc.Objects.CreateMany(ctx, "users", items); err != nil {
				t.Fatal(err)
			}
			ms, _, _, err := e.svc.Objects.List(ctx, "users", backend.Query{Limit: -1, Sort: []string{"Name"}})
			if err != nil {
				t.Fatal(err)
			}
			var got []*backend.User
			for _, m := range ms {
				if u := m.(*backend.User); len(u.Name) > 3 && u.Name[:3] == "lm-" {
					got = append(got, u)
				}
			}
			if len(got) != n {
				t.Fatalf("listed %d users, want %d", len(got), n)
			}
			for i, u := range got {
				if want := fmt.Sprintf("lm-%04d", i); u.Name != want || len(u.Roles) != 1 || u.Roles[0] != fmt.Sprintf("r%d", i%7) {
					t.Fatalf("user %d: %s %v, want %s", i, u.Name, u.Roles, want)
				}
				if len(u.PasswordHash) != 0 || u.Secret != "" {
					t.Fatalf("user %s not sanitized: %+v", u.Name, u)
				}
			}
		})
	}
}
