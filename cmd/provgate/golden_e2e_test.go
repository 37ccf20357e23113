package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// Golden HTTP transcripts of the main DRP wire shapes (docs/design.md §3.2, §3,
// §5, §6, Appendix A): each file under testdata/http holds one request and
// its normalized response. Run with -update to rewrite them.
//
// A file is one of two kinds:
//   - a step of the sequence in TestE2EGolden (machine-create … machine-delete,
//     pools, token, info): its request is built in Go because it needs a
//     key learned earlier, a preparation, or only the reply's shape;
//   - a case: every other file. Its Request (Method, literal Path, Body) is
//     sent as the admin after the steps, in file name order, on a server
//     where the steps' machine is gone, and the reply must equal Response.
//
// To add a case, write testdata/http/<name>.json holding only
// {"Request": {"Method": "GET", "Path": "/..."}} and run
// go test -count=1 -run TestE2EGolden ./cmd/provgate/ -update, then review
// the Response it wrote (git diff) before committing it.

var updateGolden = flag.Bool("update", false, "rewrite testdata/http/*.json")

const goldenDir = "../../testdata/http"

// transcript is one golden file.
type transcript struct {
	Request struct {
		Method string          `json:"Method"`
		Path   string          `json:"Path"`
		Body   json.RawMessage `json:"Body,omitempty"`
	} `json:"Request"`
	Response struct {
		Status  int               `json:"Status"`
		Headers map[string]string `json:"Headers"`
		Body    any               `json:"Body"`
	} `json:"Response"`
}

var (
	reUUID = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	reTime = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)`)
)

// normalize replaces values that differ between runs with placeholders.
func normalize(s string) string {
	s = reUUID.ReplaceAllString(s, "<uuid>")
	return reTime.ReplaceAllStringFunc(s, func(t string) string {
		if strings.HasPrefix(t, "0001-01-01T00:00:00") {
			return t // Go's zero time is part of the wire shape
		}
		return "<time>"
	})
}

// shapeOf replaces every scalar with its JSON type name: for replies whose
// values are run-specific (token, info) only the keys and types are golden.
func shapeOf(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			out[k] = shapeOf(e)
		}
		return out
	case []any:
		if len(x) == 0 {
			return []any{}
		}
		return []any{shapeOf(x[0])}
	case string:
		return "<string>"
	case float64:
		return "<number>"
	case bool:
		return "<bool>"
	case nil:
		return nil
	}
	return v
}

// goldenStep is one recorded request.
type goldenStep struct {
	name   string
	method string
	path   func() string
	body   string
	// shape records only keys and value types of the body.
	shape bool
	// after receives the decoded reply (to learn keys for later steps).
	after func(t *testing.T, body []byte)
	// before prepares what the step needs; it is not recorded.
	before func(t *testing.T, s *tserver)
}

func TestE2EGolden(t *testing.T) {
	t.Parallel()
	lic := licenseArgs(t)
	for _, db := range databases(t) {
		t.Run(db.Name, func(t *testing.T) {
			// -update rewrites the files the other database's run reads:
			// then the databases run one after the other, and the second
			// compares its replies with what the first wrote.
			if !*updateGolden {
				t.Parallel()
			}
			s := startE2E(t, db, lic...)
			var uuid string
			fixed := func(p string) func() string { return func() string { return p } }
			steps := []goldenStep{
				{name: "machine-create", method: "POST", path: fixed("/machines"), body: obMachineBody("gm1"),
					after: func(t *testing.T, b []byte) {
						var m struct{ Uuid string }
						if err := json.Unmarshal(b, &m); err != nil || m.Uuid == "" {
							t.Fatalf("create: %s", b)
						}
						uuid = m.Uuid
					}},
				{name: "machine-get", method: "GET", path: fixed("/machines/Name:gm1")},
				{name: "machine-head", method: "HEAD", path: func() string { return "/machines/" + uuid }},
				{name: "machine-patch", method: "PATCH", path: func() string { return "/machines/" + uuid },
					body: `[{"op":"test","path":"/Description","from":"","value":""},{"op":"replace","path":"/Description","from":"","value":"hello"}]`},
				{name: "machine-list", method: "GET", path: fixed("/machines?Name=Re%28%5Egm%29&limit=10&slim=Params")},
				{name: "machine-count", method: "HEAD", path: fixed("/machines?Name=Eq%28gm1%29")},
				{name: "machine-params-set", method: "POST", path: func() string { return "/machines/" + uuid + "/params/foo/bar" },
					body: `{"k":1}`},
				{name: "machine-params-absent", method: "GET", path: func() string { return "/machines/" + uuid + "/params/no/such" }},
				// drpcli reads it before sealing a secure param: a JSON string (base64).
				{name: "machine-pubkey", method: "GET", path: func() string { return "/machines/" + uuid + "/pubkey" }, shape: true},
				{name: "error-patch-test", method: "PATCH", path: fixed("/machines/Name:gm1"),
					body: `[{"op":"test","path":"/Description","from":"","value":"x"},{"op":"replace","path":"/Description","from":"","value":"new"}]`},
				{name: "error-param-delete", method: "DELETE", path: func() string { return "/machines/" + uuid + "/params/nope" }},
				// The machine validation cases of DRP's own client tests: DRP
				// refuses each with 422 and these messages.
				{name: "machine-create-no-name", method: "POST", path: fixed("/machines"), body: drpMachine(``)},
				{name: "machine-create-missing-stage-bootenv", method: "POST", path: fixed("/machines"),
					body: drpMachine(`"Name":"foo","BootEnv":"bar","Stage":"baz"`)},
				{name: "machine-create-missing-profile", method: "POST", path: fixed("/machines"),
					body: drpMachine(`"Name":"foo","Profiles":["foo"]`)},
				{name: "machine-create-duplicate-profile", method: "POST", path: fixed("/machines"),
					body:   drpMachine(`"Name":"foo","Profiles":["jill","jill"]`),
					before: func(t *testing.T, s *tserver) { obMust(t, s, 201, "POST", "/profiles", `{"Name":"jill"}`) }},
				{name: "machine-create-bootenv-not-available", method: "POST", path: fixed("/machines"),
					body: drpMachine(`"Name":"foo","BootEnv":"foo"`),
					before: func(t *testing.T, s *tserver) {
						obMust(t, s, 201, "POST", "/bootenvs", `{"Name":"foo","Kernel":"missing-kernel"}`)
					}},
				{name: "machine-create-bootenv-only-unknown", method: "POST", path: fixed("/machines"),
					body: drpMachine(`"Name":"foo","BootEnv":"ignore"`)},
				{name: "machine-create-missing-task", method: "POST", path: fixed("/machines"),
					body: drpMachine(`"Name":"foo","Tasks":["foo"]`)},
				{name: "pool-create", method: "POST", path: fixed("/pools"), body: `{"Id":"gpool"}`},
				{name: "pool-add-machines", method: "POST", path: fixed("/pools/gpool/addMachines"), body: `{"pool/count":1}`},
				{name: "pool-status", method: "GET", path: fixed("/pools/gpool/status")},
				{name: "pools-active", method: "GET", path: fixed("/pools-active")},
				{name: "pool-allocate-machines", method: "POST", path: fixed("/pools/gpool/allocateMachines"), body: `{"pool/count":1}`},
				{name: "machine-release-to-pool", method: "POST", path: fixed("/machines/Name:gm1/releaseToPool"), body: `{}`},
				{name: "machine-delete", method: "DELETE", path: fixed("/machines/Name:gm1")},
				{name: "token", method: "GET", path: fixed("/users/rocketskates/token?ttl=600"), shape: true},
				{name: "info", method: "GET", path: fixed("/info"), shape: true},
			}
			steps = append(steps, goldenCases(t, steps)...)
			for _, st := range steps {
				t.Run(st.name, func(t *testing.T) {
					if st.before != nil {
						st.before(t, s)
					}
					path := st.path()
					var body any
					if st.body != "" {
						body = st.body
					}
					r := obCall(t, s, st.method, path, body)
					if st.after != nil {
						st.after(t, r.Body)
					}
					var got transcript
					got.Request.Method = st.method
					got.Request.Path = normalize(path)
					if st.body != "" {
						got.Request.Body = json.RawMessage(compactJSON(t, st.body))
					}
					got.Response.Status = r.Status
					got.Response.Headers = map[string]string{}
					for _, h := range []string{"Content-Type", "ETag", "X-Drp-List-Count", "X-Drp-List-Filter-Count", "X-Drp-List-Total-Count"} {
						if v := r.Header.Get(h); v != "" {
							if h == "ETag" {
								v = "<etag>"
							}
							got.Response.Headers[h] = v
						}
					}
					if len(r.Body) > 0 {
						var v any
						if err := json.Unmarshal([]byte(normalize(string(r.Body))), &v); err != nil {
							t.Fatalf("reply is not JSON: %q", r.Body)
						}
						if st.shape {
							v = shapeOf(v)
						}
						got.Response.Body = v
					}
					b, err := json.MarshalIndent(got, "", "  ")
					if err != nil {
						t.Fatal(err)
					}
					b = append(b, '\n')
					file := filepath.Join(goldenDir, st.name+".json")
					// Every database must give the same transcript; SQLite,
					// the first, writes it.
					if *updateGolden && s.Name == "sqlite" {
						if err := os.MkdirAll(goldenDir, 0o755); err != nil {
							t.Fatal(err)
						}
						if err := os.WriteFile(file, b, 0o644); err != nil {
							t.Fatal(err)
						}
						return
					}
					want, err := os.ReadFile(file)
					if err != nil {
						t.Fatalf("%v (run with -update to create it)", err)
					}
					if !bytes.Equal(b, want) {
						t.Errorf("%s differs from %s (run with -update if the change is intended):\ngot:\n%s\nwant:\n%s", st.name, file, b, want)
					}
				})
			}
		})
	}
}

// goldenCases reads every golden file that is not one of steps as a case: a
// literal request to replay. A file that is not a transcript, or whose
// request holds a placeholder, fails t.
func goldenCases(t *testing.T, steps []goldenStep) []goldenStep {
	t.Helper()
	isStep := map[string]bool{}
	for _, st := range steps {
		isStep[st.name+".json"] = true
	}
	files, err := filepath.Glob(filepath.Join(goldenDir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	var cases []goldenStep
	for _, f := range files {
		if isStep[filepath.Base(f)] {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var tr transcript
		if err := json.Unmarshal(b, &tr); err != nil {
			t.Fatalf("%s: not a transcript: %v", f, err)
		}
		req := tr.Request
		if req.Method == "" || !strings.HasPrefix(req.Path, "/") || normalize(req.Path) != req.Path ||
			normalize(string(req.Body)) != string(req.Body) {
			t.Fatalf("%s: a case needs a Method and a literal Path and Body (no <uuid> or <time>)", f)
		}
		path := req.Path
		cases = append(cases, goldenStep{name: strings.TrimSuffix(filepath.Base(f), ".json"), method: req.Method,
			path: func() string { return path }, body: string(req.Body)})
	}
	return cases
}

// drpMachine is the machine of DRP's client tests (Uuid
// 24679e38-53a2-4a82-99dd-5280139de00c) with extra fields.
func drpMachine(fields string) string {
	b := `{"Uuid":"24679e38-53a2-4a82-99dd-5280139de00c"`
	if fields != "" {
		b += "," + fields
	}
	return b + "}"
}

func compactJSON(t *testing.T, s string) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(normalize(s))); err != nil {
		t.Fatalf("compact %q: %v", s, err)
	}
	return b.Bytes()
}
