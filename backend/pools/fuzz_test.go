package pools

import (
	"errors"
	"strings"
	"testing"

	"github.com/provgate/provgate/backend"
)

// FuzzParseBody feeds arbitrary bytes to the pool operation body parser and
// the selection plan built from it: no panic, every refusal a 400
// *backend.Error, and an accepted body within the documented bounds.
func FuzzParseBody(f *testing.F) {
	for _, s := range []string{
		``, `{}`, `null`, `[]`, `"x"`, `{"pool/count":1,"pool/minimum":1}`,
		`{"pool/all-machines":true,"pool/minimum":5}`, `{"pool/count":-1}`, `{"pool/count":1e99}`,
		`{"pool/count":"3"}`, `{"pool/wait-timeout":"100000h"}`, `{"pool/wait-timeout":-1}`,
		`{"pool/wait-timeout":1e308}`, `{"pool/wait-timeout":"NaN"}`, `{"pool/wait-timeout":"-5m"}`,
		`{"pool/machine-list":["Name:m1",""],"pool/count":0}`, `{"pool/add-parameters":{"":1}}`,
		`{"pool/add-parameters":{"a":{"b":[1,2,{"c":null}]}}}`, `{"pool/filter":["Name=Re((a+)+$)"]}`,
		`{"pool/unknown":1}`, `{"pool/workflow":7}`, `{"pool/count":2147483648}`, `{"pool/minimum":3,"pool/count":2}`,
		`{"pool/add-profiles":"p1"}`, "{\"pool/workflow\":\"\u202ewf\x00\"}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := parseBody("addMachines", "p1", body)
		if err == nil {
			_, err = r.plan("p1")
		}
		if err != nil {
			var be *backend.Error
			if !errors.As(err, &be) || be.Code != backend.EBADREQUEST {
				t.Fatalf("refusal is not a 400 *backend.Error: %#v", err)
			}
			return
		}
		if r.Wait < 0 || r.Wait > maxWait {
			t.Fatalf("wait %v out of bounds", r.Wait)
		}
		for _, p := range []*int{r.Count, r.Minimum} {
			if p != nil && *p < 0 {
				t.Fatalf("negative count or minimum accepted: %d", *p)
			}
		}
		if _, ok := r.AddParams[""]; ok {
			t.Fatal("empty parameter name accepted")
		}
		for _, l := range [][]string{r.AddProfiles, r.RemoveProf, r.RemoveParams, r.MachineList, r.Filter} {
			for _, s := range l {
				if strings.TrimSpace(s) == "" {
					t.Fatal("empty string accepted in a list")
				}
			}
		}
		sel, _ := r.plan("p1")
		if !sel.all && (sel.minimum > sel.count || sel.count < 1) {
			t.Fatalf("selection %+v", sel)
		}
	})
}
