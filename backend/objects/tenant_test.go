package objects

import (
	"testing"

	"github.com/provgate/provgate/backend"
)

// TestTenantUsersCheckedWhenAdded: a user may be in one tenant only; a
// patch that adds a user held by another tenant is refused, and a patch
// that keeps a tenant's users as they are (which then reads no other
// tenant) still passes.
func TestTenantUsersCheckedWhenAdded(t *testing.T) {
	each(t, func(t *testing.T, e env) {
		ctx := sys()
		mustCreate(t, e, "users", `{"Name":"u1"}`)
		mustCreate(t, e, "users", `{"Name":"u2"}`)
		mustCreate(t, e, "tenants", `{"Name":"t1","Users":["u1"]}`)
		mustCreate(t, e, "tenants", `{"Name":"t2","Users":["u2"]}`)
		if _, err := e.svc.Objects.Patch(ctx, "tenants", "t1", []byte(`[{"op":"replace","path":"/Description","value":"x"}]`), false); err != nil {
			t.Fatalf("patch keeping the users: %v", err)
		}
		_, err := e.svc.Objects.Patch(ctx, "tenants", "t2", []byte(`[{"op":"add","path":"/Users/-","value":"u1"}]`), false)
		wantErr(t, err, backend.EINVALID, "", "User u1 already in tenant t1")
		if _, err := e.svc.Objects.Patch(ctx, "tenants", "t2", []byte(`[{"op":"add","path":"/Users/-","value":"u2"},{"op":"remove","path":"/Users/0"}]`), false); err != nil {
			t.Fatalf("patch re-adding its own user: %v", err)
		}
	})
}
