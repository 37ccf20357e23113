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

// TestTenantMembersResolved: a Members key may name its object by a unique
// index (Name:m1), stored as the object's key; a key naming nothing, or an
// object the writer cannot see, is refused alike; keys already stored stay.
func TestTenantMembersResolved(t *testing.T) {
	each(t, func(t *testing.T, e env) {
		m1 := mustCreate(t, e, "machines", `{"Name":"mr-m1"}`).(*backend.Machine)
		m2 := mustCreate(t, e, "machines", `{"Name":"mr-m2"}`).(*backend.Machine)
		mustCreate(t, e, "profiles", `{"Name":"mr-p"}`)
		caller := as(hiding{"machines/" + m2.Uuid: true})

		tn, err := e.svc.Objects.Create(caller, "tenants",
			[]byte(`{"Name":"mr-t","Members":{"machines":["Name:mr-m1","`+m1.Uuid+`"],"profiles":["Name:mr-p"],"stages":[]}}`))
		if err != nil {
			t.Fatal(err)
		}
		if got := toJSON(t, tn.(*backend.Tenant).Members); got != `{"machines":["`+m1.Uuid+`"],"profiles":["mr-p"],"stages":[]}` {
			t.Fatalf("Members %s", got)
		}

		_, err = e.svc.Objects.Create(caller, "tenants",
			[]byte(`{"Name":"mr-t2","Members":{"machines":["Name:mr-m2","`+m2.Uuid+`","Name:ghost","no-such-key"],"profiles":["Address:x"]}}`))
		wantMessages(t, err,
			"Members machines: Name:mr-m2 does not exist",
			"Members machines: "+m2.Uuid+" does not exist",
			"Members machines: Name:ghost does not exist",
			"Members machines: no-such-key does not exist",
			"Members profiles: Address:x does not exist")

		// A caller who sees m2 may add it by name; the stored key stays
		// as it is although this caller cannot see it.
		if _, err := e.svc.Objects.Patch(sys(), "tenants", "mr-t", []byte(`[{"op":"add","path":"/Members/machines/-","value":"Name:mr-m2"}]`), false); err != nil {
			t.Fatal(err)
		}
		got, err := e.svc.Objects.Patch(caller, "tenants", "mr-t", []byte(`[{"op":"replace","path":"/Description","value":"x"}]`), false)
		if err != nil {
			t.Fatalf("edit keeping a member the caller cannot see: %v", err)
		}
		if m := toJSON(t, got.(*backend.Tenant).Members["machines"]); m != `["`+m1.Uuid+`","`+m2.Uuid+`"]` {
			t.Fatalf("machines %s", m)
		}
	})
}
