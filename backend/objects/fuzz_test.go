package objects

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/provgate/provgate/backend"
	"github.com/provgate/provgate/backend/store/storetest"
)

// fuzzObjects are the objects FuzzPatch patches, one per kind, created in
// dependency order.
var fuzzObjects = []struct{ prefix, body string }{
	{"bootenvs", `{"Name":"be1","Description":"d","Meta":{"color":"blue"}}`},
	{"tasks", `{"Name":"t1","Templates":[{"Name":"a","Path":"/x","Contents":"{{.Machine.Name}}"}]}`},
	{"stages", `{"Name":"s1","BootEnv":"be1","Tasks":["t1"],"Params":{"a":1}}`},
	{"workflows", `{"Name":"w1","Stages":["s1"]}`},
	{"params", `{"Name":"count","Schema":{"type":"integer","minimum":1}}`},
	{"params", `{"Name":"sec","Secure":true,"Schema":{"type":"string"}}`},
	{"profiles", `{"Name":"p1","Params":{"count":2,"x":{"y":[1,2]}}}`},
	{"machines", `{"Name":"m1","Uuid":"3e7031fe-3062-45f1-835c-92541bc9cbd3","Address":"192.0.2.5","Profiles":["p1"],"Params":{"count":3}}`},
	{"pools", `{"Id":"pa","Description":"d","EnterActions":{"Workflow":"w1","AddProfiles":["p1"],"AddParameters":{"count":1}}}`},
	{"plugins", `{"Name":"cb","Provider":"callback","Params":{"callback/callbacks":{"a":{"Url":"http://127.0.0.1:1/x"}}}}`},
	{"roles", `{"Name":"ops","Claims":[{"scope":"machines","action":"get,update:/Params/a~1b","specific":"*"}]}`},
	{"users", `{"Name":"bob","Password":"pw1","Roles":["ops"]}`},
	{"tenants", `{"Name":"t1","Users":["bob"],"Members":{"machines":["3e7031fe-3062-45f1-835c-92541bc9cbd3"]}}`},
	{"reservations", `{"Addr":"192.0.2.9","Token":"aa:bb:cc:dd:ee:ff","Strategy":"MAC"}`},
}

var errRollback = errors.New("rollback")

// FuzzPatch applies arbitrary JSON Patch documents to one stored object of
// every kind through Service.Patch on SQLite, inside a transaction that is
// always rolled back so that every input sees the same store. A patch must
// never panic; it either fails with a 4xx *backend.Error, or returns an
// object with the same key that reads back exactly as returned and shows
// no Secret or PasswordHash.
func FuzzPatch(f *testing.F) {
	for _, s := range []string{
		`[]`, `[{"op":"replace","path":"/Description","value":"x"}]`, `[{"op":"test","path":"/Description","value":"nope"}]`,
		`[{"op":"replace","path":"/Name","value":"other"}]`, `[{"op":"remove","path":"/Meta"}]`, `[{"op":"add","path":"","value":{}}]`,
		`[{"op":"replace","path":"/Params","value":{"count":"x"}}]`, `[{"op":"add","path":"/Params/count","value":0}]`,
		`[{"op":"replace","path":"/Profiles","value":"p1"}]`, `[{"op":"add","path":"/Profiles/-","value":"nope"}]`,
		`[{"op":"move","from":"/Description","path":"/Meta/x"}]`, `[{"op":"copy","from":"/Meta","path":"/Params"}]`,
		`[{"op":"replace","path":"/Secret","value":"x"}]`, `[{"op":"test","path":"/Secret","value":""}]`,
		`[{"op":"replace","path":"/PasswordHash","value":"bad"}]`, `[{"op":"replace","path":"/Claims/0/scope","value":"nope"}]`,
		`[{"op":"replace","path":"/Members","value":{"machines":null}}]`, `[{"op":"replace","path":"/Users","value":["ghost"]}]`,
		`[{"op":"replace","path":"/EnterActions/AddParameters","value":[]}]`, `[{"op":"replace","path":"/Stages","value":["s1","s1"]}]`,
		`[{"op":"replace","path":"/Addr","value":"::1"}]`, `[{"op":"replace","path":"/Params/callback~1callbacks/a/Url","value":"{{"}]`,
		`[{"op":"replace","path":"/Locked","value":true}]`, `[{"op":"replace","path":"/Address","value":"not-an-ip"}]`,
		`[{"op":"replace","path":"/Description","value":"` + "\u202e\\u0000\\n" + `"}]`, `[{"op":"add","path":"/Meta/a~1b","value":"x"}]`,
		`[{"op":"replace","path":"/Schema","value":{"type":"nonsense"}}]`, `{"op":"replace"}`, `[1]`, `[{"op":7}]`,
	} {
		for i := range fuzzObjects {
			f.Add(uint8(i), []byte(s))
		}
	}
	st := storetest.SQLite(f)
	svc := New(st, Options{
		HashPassword: func(pw string) ([]byte, error) { return []byte("16384$8$1$73616c74$" + pw), nil },
		SecureKey:    testKey,
		Now:          func() time.Time { return time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC) },
	})
	ctx := sys()
	keys := make([]string, len(fuzzObjects))
	for i, o := range fuzzObjects {
		m, err := svc.Objects.Create(ctx, o.prefix, []byte(o.body))
		if err != nil {
			f.Fatalf("create %s: %v", o.prefix, err)
		}
		keys[i] = m.Key()
	}
	f.Fuzz(func(t *testing.T, which uint8, patch []byte) {
		i := int(which) % len(fuzzObjects)
		prefix, key := fuzzObjects[i].prefix, keys[i]
		var got backend.Model
		var perr error
		err := svc.InTx(ctx, func(ctx context.Context) error {
			got, perr = svc.Objects.Patch(ctx, prefix, key, patch, false)
			if perr == nil {
				back, _, err := svc.Objects.Get(ctx, prefix, key)
				if err != nil {
					t.Fatalf("read back %s/%s: %v", prefix, key, err)
				}
				gj, _ := json.Marshal(got)
				bj, _ := json.Marshal(back)
				if !bytes.Equal(gj, bj) {
					t.Fatalf("patched %s/%s\nreturned %s\nstored   %s", prefix, key, gj, bj)
				}
			}
			return errRollback
		})
		if !errors.Is(err, errRollback) {
			t.Fatalf("transaction: %v", err)
		}
		if perr != nil {
			var be *backend.Error
			if !errors.As(perr, &be) {
				t.Fatalf("error is %T: %v", perr, perr)
			}
			switch be.Code {
			case backend.EBADREQUEST, backend.EINVALID, backend.ECONFLICT, backend.ENOTFOUND, backend.ETOOLARGE:
			default:
				t.Fatalf("patch %s/%s %q: code %s: %v", prefix, key, patch, be.Code, perr)
			}
			return
		}
		if got.Key() != key {
			t.Fatalf("key changed from %q to %q", key, got.Key())
		}
		j, _ := json.Marshal(got)
		var shown map[string]any
		_ = json.Unmarshal(j, &shown)
		for _, f := range []string{"Secret", "PasswordHash"} {
			if v, ok := shown[f]; ok && v != "" {
				t.Fatalf("%s/%s shows %s=%v", prefix, key, f, v)
			}
		}
	})
}
