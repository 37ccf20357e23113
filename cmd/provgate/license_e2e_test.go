package main

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"
	"time"
)

// End-to-end proof of licensing (docs/design.md §7): unlicensed servers
// refuse the gated writes, a license is installed and refused through the
// API, and a licensed start enables them, on every database.

type accInfoLicense struct {
	License struct {
		Licenses []struct {
			Name    string
			Active  bool
			Expired bool
		}
	} `json:"License"`
	Provgate struct {
		Valid    bool
		Features []string
		Error    string
	} `json:"provgate_license"`
}

func accLicenseView(t testing.TB, s *tserver) accInfoLicense {
	t.Helper()
	var v accInfoLicense
	s.Must(200, "GET", "/info", nil, admin()).JSON(t, &v)
	return v
}

func (v accInfoLicense) rbac() bool {
	for _, l := range v.License.Licenses {
		if l.Name == "rbac" && l.Active {
			return v.Provgate.Valid
		}
	}
	return false
}

// accGatedWrites are the role and tenant changes the rbac license gates.
var accGatedWrites = []struct {
	name, method, path string
	body               any
	msg                string
}{
	{"role create", "POST", "/roles", map[string]any{"Name": "g-r", "Claims": []any{}}, "roles create is a licensed enterprise feature"},
	{"role patch", "PATCH", "/roles/superuser", jsonPatch("replace", "/Description", "x"), "is a licensed enterprise feature"},
	{"role put", "PUT", "/roles/superuser", map[string]any{"Name": "superuser", "Claims": []map[string]string{{"scope": "*", "action": "*", "specific": "*"}}}, "roles update is a licensed enterprise feature"},
	{"role delete", "DELETE", "/roles/superuser", nil, "roles delete is a licensed enterprise feature"},
	{"tenant create", "POST", "/tenants", map[string]any{"Name": "g-t", "Users": []string{}, "Members": map[string]any{}}, "tenants create is a licensed enterprise feature"},
	{"tenant patch", "PATCH", "/tenants/g-t", jsonPatch("replace", "/Description", "x"), "is a licensed enterprise feature"},
	{"tenant delete", "DELETE", "/tenants/g-t", nil, "tenants delete is a licensed enterprise feature"},
}

func TestE2EAccessLicense(t *testing.T) {
	t.Parallel()
	t.Run("unlicensed", func(t *testing.T) {
		forEachDB(t, func(t *testing.T, s *tserver) {
			for _, c := range accGatedWrites {
				t.Run(c.name, func(t *testing.T) {
					r := s.On(t).Do(c.method, c.path, c.body, admin())
					wantDRPError(t, r, 403, "", c.msg)
				})
			}
			t.Run("reads work", func(t *testing.T) {
				s := s.On(t)
				for _, p := range []string{"/roles", "/roles/superuser", "/tenants"} {
					s.Must(200, "GET", p, nil, admin())
				}
				s.Must(200, "HEAD", "/roles", nil, admin())
			})
			t.Run("info shows no license", func(t *testing.T) {
				if v := accLicenseView(t, s.On(t)); v.rbac() || v.Provgate.Valid || v.Provgate.Error == "" {
					t.Fatalf("info license %+v", v)
				}
			})
			t.Run("no public key", func(t *testing.T) {
				r := s.On(t).Do("PUT", "/license", map[string]any{"License": "x.y"}, admin())
				if r.Status < 400 || r.Status >= 500 {
					t.Fatalf("got %s", r)
				}
				wantDRPError(t, r, r.Status, "", "public key")
			})
		})
	})
	t.Run("loaded over the API", func(t *testing.T) {
		k := newLicenseKit(t)
		other := newLicenseKit(t)
		now := time.Now()
		good := k.sign("rbac", now.Add(-time.Hour), now.Add(24*time.Hour))
		head, sig, _ := strings.Cut(good, ".")
		payload, err := base64.RawURLEncoding.DecodeString(head)
		if err != nil {
			t.Fatal(err)
		}
		tampered := base64.RawURLEncoding.EncodeToString(bytes.Replace(payload, []byte(`"tests"`), []byte(`"other"`), 1)) + "." + sig
		bad := []struct{ name, doc, msg string }{
			{"tampered", tampered, "signature"},
			{"expired", k.sign("rbac", now.Add(-48*time.Hour), now.Add(-time.Hour)), "expired"},
			{"not yet valid", k.sign("rbac", now.Add(time.Hour), now.Add(48*time.Hour)), "valid from"},
			{"wrong key", other.sign("rbac", now.Add(-time.Hour), now.Add(24*time.Hour)), "key"},
			{"garbage", "not a license", "malformed"},
			{"empty", "", ""},
		}
		forEachDB(t, func(t *testing.T, s *tserver) {
			for _, c := range bad {
				t.Run(c.name, func(t *testing.T) {
					s := s.On(t)
					r := s.Do("PUT", "/license", map[string]any{"License": c.doc}, admin())
					if r.Status < 400 || r.Status >= 500 {
						t.Fatalf("got %s, want 4xx", r)
					}
					if c.msg != "" {
						wantDRPError(t, r, r.Status, "", c.msg)
					}
					if v := accLicenseView(t, s); v.rbac() {
						t.Fatalf("licensed after a bad document: %+v", v)
					}
					s.Must(403, "POST", "/roles", map[string]any{"Name": "g-r", "Claims": []any{}}, admin())
				})
			}
			t.Run("non-admin cannot load", func(t *testing.T) {
				s := s.On(t)
				s.AddUser("g-user", "g-user-pw")
				s.Must(403, "PUT", "/license", map[string]any{"License": good}, basic("g-user", "g-user-pw"))
			})
			t.Run("valid", func(t *testing.T) {
				s := s.On(t)
				s.Must(200, "PUT", "/license", map[string]any{"License": good}, admin())
				if v := accLicenseView(t, s); !v.rbac() {
					t.Fatalf("info after load %+v", v)
				}
				s.Must(201, "POST", "/roles", map[string]any{"Name": "g-r", "Claims": []any{}}, admin())
				s.Must(201, "POST", "/tenants", map[string]any{"Name": "g-t", "Users": []string{}, "Members": map[string]any{}}, admin())
				s.Must(200, "PATCH", "/tenants/g-t", jsonPatch("replace", "/Description", "x"), admin())
				s.Must(200, "DELETE", "/tenants/g-t", nil, admin())
				s.Must(200, "DELETE", "/roles/g-r", nil, admin())
				// A bad document afterwards leaves the good one in place.
				s.Do("PUT", "/license", map[string]any{"License": tampered}, admin())
				if v := accLicenseView(t, s); !v.rbac() {
					t.Fatalf("bad document replaced the good one: %+v", v)
				}
			})
		}, "--license-public-key", k.pub)
	})
	t.Run("licensed at start", func(t *testing.T) {
		forEachDB(t, func(t *testing.T, s *tserver) {
			if v := accLicenseView(t, s); !v.rbac() {
				t.Fatalf("info %+v", v)
			}
			for _, c := range accGatedWrites[:1] {
				s.Must(201, c.method, c.path, c.body, admin())
			}
		}, licenseArgs(t)...)
	})
}
