package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// End-to-end tests of the DRP object API (docs/design.md §3.2, §3, §10): every
// reply a DRP client reads is checked for its status, its error object and
// its Content-Type, on SQLite and PostgreSQL.

// obCall sends one request as the admin and checks the Content-Type every
// DRP client requires (docs/design.md §3.3): application/json on every reply
// that is neither HEAD nor 304. Unlike tserver.Do it fails t, so it is
// safe inside subtests.
func obCall(t *testing.T, s *tserver, method, path string, body any, hdrs ...string) resp {
	t.Helper()
	r := obRawCall(t, s, s.Base+path, method, body, hdrs...)
	if method != http.MethodHead && r.Status != http.StatusNotModified {
		if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			t.Errorf("%s %s: %d with Content-Type %q, want application/json", method, path, r.Status, ct)
		}
	}
	return r
}

// obRawCall sends one request as the admin to a full URL, without checks.
func obRawCall(t *testing.T, s *tserver, u, method string, body any, hdrs ...string) resp {
	t.Helper()
	return s.DoURL(t, method, u, body, admin(), hdrs...)
}

// obMust is obCall that fails t unless the status is want.
func obMust(t *testing.T, s *tserver, want int, method, path string, body any, hdrs ...string) resp {
	t.Helper()
	r := obCall(t, s, method, path, body, hdrs...)
	if r.Status != want {
		t.Fatalf("%s %s: got %d %s, want %d", method, path, r.Status, r.Body, want)
	}
	return r
}

// obObj decodes a JSON object body.
func obObj(t *testing.T, r resp) map[string]any {
	t.Helper()
	m := map[string]any{}
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("decode object %q: %v", r.Body, err)
	}
	return m
}

// obList decodes a JSON obList of objects.
func obList(t *testing.T, r resp) []map[string]any {
	t.Helper()
	var l []map[string]any
	if err := json.Unmarshal(r.Body, &l); err != nil {
		t.Fatalf("decode obList %q: %v", r.Body, err)
	}
	return l
}

// obWantErr checks a DRP error object (docs/design.md §3.2): all five fields
// present, Code equal to the status, and the given Type, Model, Key ("*"
// skips a check) and a message containing msg.
func obWantErr(t *testing.T, r resp, status int, typ, model, key, msg string) {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d, want %d: %s", r.Status, status, r.Body)
	}
	m := map[string]any{}
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("error body %q is not a JSON object: %v", r.Body, err)
	}
	for _, f := range []string{"Model", "Key", "Type", "Messages", "Code"} {
		if _, ok := m[f]; !ok {
			t.Errorf("error object lacks %s: %s", f, r.Body)
		}
	}
	if c, _ := m["Code"].(float64); int(c) != status {
		t.Errorf("Code %v, want %d: %s", m["Code"], status, r.Body)
	}
	for _, c := range []struct{ f, want string }{{"Type", typ}, {"Model", model}, {"Key", key}} {
		if c.want != "*" && m[c.f] != c.want {
			t.Errorf("%s = %v, want %q: %s", c.f, m[c.f], c.want, r.Body)
		}
	}
	msgs, _ := m["Messages"].([]any)
	if len(msgs) == 0 {
		t.Errorf("no Messages: %s", r.Body)
	}
	found := msg == ""
	for _, x := range msgs {
		if s, _ := x.(string); strings.Contains(s, msg) {
			found = true
		}
	}
	if !found {
		t.Errorf("Messages %v lack %q", msgs, msg)
	}
}

// obNames returns the Name of each object in a list.
func obNames(l []map[string]any) []string {
	out := []string{}
	for _, m := range l {
		out = append(out, fmt.Sprint(m["Name"]))
	}
	return out
}

func obJsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// drpEnv is the envelope drpcli sends on create: an unfilled Go struct
// (docs/design.md §4.1, §3.7).
const drpEnv = `"Validated":false,"Available":false,"Errors":null,"ReadOnly":false,"Meta":null,"Endpoint":"","Bundle":""`

// obMachineBody is drpcli's "machines create <name>" body, verbatim (§3.6).
func obMachineBody(name string) string {
	return `{` + drpEnv + `,
 "Partial":false,"Name":"` + name + `","Description":"","Uuid":"","CurrentJob":"","Address":"","Stage":"","BootEnv":"",
 "Profiles":null,"Params":null,"Tasks":null,"CurrentTask":0,"RetryTaskAttempt":0,"TaskErrorStacks":null,
 "Runnable":false,"Secret":"","OS":"","HardwareAddrs":null,"Workflow":"","Arch":"","Locked":false,"Context":"",
 "Fingerprint":{"SSNHash":null,"CSNHash":null,"CloudInstanceID":"","SystemUUID":"","MemoryIds":null},
 "Pool":"","PoolAllocated":false,"PoolStatus":"","WorkflowComplete":false}`
}

// obKindCase describes one object type for the CRUD table.
type obKindCase struct {
	prefix   string
	keyField string
	key      string // the key of the created object ("" = server assigned)
	// body is the create body drpcli sends for key k.
	body func(k string) string
	// index is a Field:value lookup key for the created object.
	index func(m map[string]any) []string
	// badKey is a key that fails validation, and the message it gives.
	badKey, badMsg string
	// noEmptyKey: the server assigns the key when it is empty.
	noEmptyKey bool
	// defaults checks type-specific filled fields.
	defaults func(t *testing.T, m map[string]any)
	// descOmitEmpty: Description is omitempty (pools), so drpcli adds it.
	descOmitEmpty bool
	// wantErrors are the validation Errors of the bare object: saved, but
	// not Available (docs/design.md §3.1, "Saved but not available").
	wantErrors []string
}

func obNameIndex(m map[string]any) []string { return []string{"Name:" + fmt.Sprint(m["Name"])} }

func obWantEmptyList(t *testing.T, m map[string]any, fields ...string) {
	t.Helper()
	for _, f := range fields {
		if l, ok := m[f].([]any); !ok || len(l) != 0 {
			t.Errorf("%s = %#v, want []", f, m[f])
		}
	}
}

func obWantEmptyMap(t *testing.T, m map[string]any, fields ...string) {
	t.Helper()
	for _, f := range fields {
		if mm, ok := m[f].(map[string]any); !ok || len(mm) != 0 {
			t.Errorf("%s = %#v, want {}", f, m[f])
		}
	}
}

var obKindCases = []obKindCase{
	{prefix: "users", keyField: "Name", key: "user1",
		body: func(k string) string {
			return `{` + drpEnv + `,"Name":"` + k + `","Description":"","Roles":null,"PasswordHash":null,"Secret":""}`
		},
		index: obNameIndex, badKey: "[asdgasdg]", badMsg: "Invalid Name `[asdgasdg]`",
		defaults: func(t *testing.T, m map[string]any) {
			obWantEmptyList(t, m, "Roles")
			if _, ok := m["Secret"]; ok {
				t.Errorf("Secret returned")
			}
			if _, ok := m["PasswordHash"]; ok {
				t.Errorf("PasswordHash returned")
			}
		}},
	{prefix: "roles", keyField: "Name", key: "role1",
		body: func(k string) string {
			return `{` + drpEnv + `,"Name":"` + k + `","Description":"","Documentation":"","Claims":null}`
		},
		index: obNameIndex, badKey: "[bad]", badMsg: "Invalid Name `[bad]`",
		defaults: func(t *testing.T, m map[string]any) { obWantEmptyList(t, m, "Claims") }},
	{prefix: "tenants", keyField: "Name", key: "tenant1",
		body: func(k string) string {
			return `{` + drpEnv + `,"Name":"` + k + `","Description":"","Documentation":"","Members":null,"Users":null}`
		},
		index: obNameIndex, badKey: "[bad]", badMsg: "Invalid Name `[bad]`",
		defaults: func(t *testing.T, m map[string]any) {
			obWantEmptyList(t, m, "Users")
			obWantEmptyMap(t, m, "Members")
		}},
	{prefix: "machines", keyField: "Uuid", body: obMachineBody, noEmptyKey: true,
		index: func(m map[string]any) []string {
			return []string{"Name:" + fmt.Sprint(m["Name"]), "Uuid:" + fmt.Sprint(m["Uuid"])}
		},
		badKey: "[bad]", badMsg: "Invalid Name `[bad]`",
		defaults: func(t *testing.T, m map[string]any) {
			if u, _ := m["Uuid"].(string); len(u) != 36 {
				t.Errorf("Uuid %q not generated", u)
			}
			if m["Arch"] != "amd64" || m["Pool"] != "default" || m["PoolStatus"] != "Free" || m["Runnable"] != true {
				t.Errorf("defaults: Arch %v Pool %v PoolStatus %v Runnable %v", m["Arch"], m["Pool"], m["PoolStatus"], m["Runnable"])
			}
			if _, ok := m["Secret"]; ok {
				t.Errorf("Secret returned")
			}
			obWantEmptyList(t, m, "Profiles", "Tasks", "TaskErrorStacks", "HardwareAddrs")
			obWantEmptyMap(t, m, "Params")
			fp, _ := m["Fingerprint"].(map[string]any)
			if l, ok := fp["MemoryIds"].([]any); !ok || len(l) != 0 {
				t.Errorf("Fingerprint.MemoryIds = %#v", fp["MemoryIds"])
			}
		}},
	{prefix: "profiles", keyField: "Name", key: "prof1",
		body: func(k string) string {
			return `{` + drpEnv + `,"Partial":false,"Name":"` + k + `","Description":"","Documentation":"","Params":null,"Profiles":null}`
		},
		index: obNameIndex, badKey: "[bad]", badMsg: "Invalid Name `[bad]`",
		defaults: func(t *testing.T, m map[string]any) {
			obWantEmptyList(t, m, "Profiles")
			obWantEmptyMap(t, m, "Params")
		}},
	{prefix: "params", keyField: "Name", key: "crud/param-one",
		body: func(k string) string {
			return `{` + drpEnv + `,"Name":"` + k + `","Description":"","Documentation":"","Secure":false,"Schema":null}`
		},
		index: obNameIndex, badKey: "a", badMsg: "Invalid Name `a`",
		defaults: func(t *testing.T, m map[string]any) {
			if m["Secure"] != false {
				t.Errorf("Secure = %v", m["Secure"])
			}
		}},
	{prefix: "bootenvs", keyField: "Name", key: "benv1",
		body: func(k string) string {
			return `{` + drpEnv + `,"Name":"` + k + `","Description":"","Documentation":"",` +
				`"OS":{"Name":"","Family":"","Codename":"","Version":"","IsoFile":"","IsoSha256":"","IsoUrl":"","SupportedArchitectures":null},` +
				`"Templates":null,"Kernel":"","Initrds":null,"BootParams":"","RequiredParams":null,"OptionalParams":null,"OnlyUnknown":false}`
		},
		index: obNameIndex, badKey: "[bad]", badMsg: "Invalid Name `[bad]`",
		defaults: func(t *testing.T, m map[string]any) { obWantEmptyList(t, m, "Templates") }},
	{prefix: "workflows", keyField: "Name", key: "wflow1",
		body: func(k string) string {
			return `{` + drpEnv + `,"Name":"` + k + `","Description":"","Documentation":"","Stages":null}`
		},
		index: obNameIndex, badKey: "[bad]", badMsg: "Invalid Name `[bad]`",
		defaults: func(t *testing.T, m map[string]any) { obWantEmptyList(t, m, "Stages") }},
	{prefix: "stages", keyField: "Name", key: "stage1",
		body: func(k string) string {
			return `{` + drpEnv + `,"Partial":false,"Name":"` + k + `","Description":"","Documentation":"","Templates":null,` +
				`"RequiredParams":null,"OptionalParams":null,"Params":null,"BootEnv":"","Tasks":null,"Profiles":null,"Reboot":false,"RunnerWait":false}`
		},
		index: obNameIndex, badKey: "[bad]", badMsg: "Invalid Name `[bad]`",
		defaults: func(t *testing.T, m map[string]any) {
			obWantEmptyList(t, m, "Templates", "RequiredParams", "OptionalParams", "Tasks", "Profiles")
			obWantEmptyMap(t, m, "Params")
		}},
	{prefix: "tasks", keyField: "Name", key: "task1",
		body: func(k string) string {
			return `{` + drpEnv + `,"Name":"` + k + `","Description":"","Documentation":"","Templates":null,` +
				`"RequiredParams":null,"OptionalParams":null,"Prerequisites":null}`
		},
		index: obNameIndex, badKey: "[bad]", badMsg: "Invalid Name `[bad]`",
		defaults: func(t *testing.T, m map[string]any) {
			obWantEmptyList(t, m, "Templates", "RequiredParams", "OptionalParams", "Prerequisites")
		}},
	{prefix: "pools", keyField: "Id", key: "pool1", descOmitEmpty: true,
		body:   func(k string) string { return `{` + drpEnv + `,"Id":"` + k + `"}` },
		index:  func(m map[string]any) []string { return []string{"Id:" + fmt.Sprint(m["Id"])} },
		badKey: "[bad]", badMsg: "[bad]",
		defaults: func(t *testing.T, m map[string]any) {}},
	{prefix: "plugins", keyField: "Name", key: "plug1",
		body: func(k string) string {
			return `{` + drpEnv + `,"Partial":false,"Name":"` + k + `","Description":"","Documentation":"","Params":null,` +
				`"Provider":"callback","PluginErrors":null}`
		},
		index: obNameIndex, badKey: "[bad]", badMsg: "Invalid Name `[bad]`",
		// The callback provider requires its callbacks map.
		wantErrors: []string{"Missing Parameter callback/callbacks"},
		defaults:   func(t *testing.T, m map[string]any) { obWantEmptyMap(t, m, "Params") }},
	{prefix: "reservations", keyField: "Addr", key: "192.168.124.10",
		body: func(k string) string {
			return `{` + drpEnv + `,"Addr":"` + k + `","Token":"01:02:03:04:05:06","Strategy":"MAC","Scoped":false,` +
				`"Duration":0,"Options":null,"NextServer":"","Subnet":"","Description":""}`
		},
		index:  func(m map[string]any) []string { return []string{"Addr:" + fmt.Sprint(m["Addr"])} },
		badKey: "not-an-ip", badMsg: "Invalid Address `not-an-ip`",
		defaults: func(t *testing.T, m map[string]any) { obWantEmptyList(t, m, "Options") }},
}

// TestE2EObjects proves the DRP object API over HTTP on every database.
func TestE2EObjects(t *testing.T) {
	forEachDB(t, func(t *testing.T, s *tserver) {
		t.Run("crud", func(t *testing.T) {
			for _, kc := range obKindCases {
				t.Run(kc.prefix, func(t *testing.T) { testCRUD(t, s, kc) })
			}
		})
		t.Run("in-use", func(t *testing.T) { testInUse(t, s) })
		t.Run("list", func(t *testing.T) { testList(t, s) })
		t.Run("long-poll", func(t *testing.T) { testLongPoll(t, s) })
		t.Run("params", func(t *testing.T) { testParams(t, s) })
		t.Run("meta-indexes", func(t *testing.T) { testMetaIndexes(t, s) })
		t.Run("workflow-jobs", func(t *testing.T) { testWorkflowJobs(t, s) })
		t.Run("misc", func(t *testing.T) { testMisc(t, s) })
		t.Run("robust", func(t *testing.T) { testRobust(t, s) })
	}, licenseArgs(t)...)
}

func testCRUD(t *testing.T, s *tserver, kc obKindCase) {
	p := "/" + kc.prefix
	name := kc.key
	if kc.keyField != "Name" && kc.prefix == "machines" {
		name = "crud-m1"
	}
	var created map[string]any
	var key string
	t.Run("create", func(t *testing.T) {
		r := obMust(t, s, 201, "POST", p, kc.body(name))
		created = obObj(t, r)
		key, _ = created[kc.keyField].(string)
		if key == "" || (kc.key != "" && key != kc.key) {
			t.Fatalf("created key %q, want %q: %s", key, kc.key, r.Body)
		}
		wantErrors := []any{}
		for _, e := range kc.wantErrors {
			wantErrors = append(wantErrors, e)
		}
		if !reflect.DeepEqual(created["Errors"], wantErrors) {
			t.Errorf("Errors = %#v, want %#v", created["Errors"], wantErrors)
		}
		if _, ok := created["Meta"].(map[string]any); !ok {
			t.Errorf("Meta = %#v, want an object", created["Meta"])
		}
		if created["Validated"] != true || created["Available"] != (len(kc.wantErrors) == 0) {
			t.Errorf("Validated %v Available %v", created["Validated"], created["Available"])
		}
		kc.defaults(t, created)
	})
	if key == "" {
		t.FailNow()
	}
	t.Run("duplicate", func(t *testing.T) {
		obWantErr(t, obCall(t, s, "POST", p, obJsonOf(t, created)), 409, "CREATE", kc.prefix, key, "already exists")
	})
	if !kc.noEmptyKey {
		t.Run("empty-key", func(t *testing.T) {
			obWantErr(t, obCall(t, s, "POST", p, kc.body("")), 400, "CREATE", kc.prefix, "*", "Empty key not allowed")
		})
	}
	t.Run("invalid-name", func(t *testing.T) {
		obWantErr(t, obCall(t, s, "POST", p, kc.body(kc.badKey)), 422, "ValidationError", kc.prefix, "*", kc.badMsg)
	})
	t.Run("bad-json", func(t *testing.T) {
		obWantErr(t, obCall(t, s, "POST", p, `{"Name":`), 400, "POST", "*", "*", "")
	})
	t.Run("get", func(t *testing.T) {
		r := obMust(t, s, 200, "GET", p+"/"+key, nil)
		if r.Header.Get("ETag") == "" {
			t.Errorf("no ETag on GET")
		}
		if got := obObj(t, r)[kc.keyField]; got != key {
			t.Errorf("GET key %v, want %s", got, key)
		}
		for _, ik := range kc.index(created) {
			r := obMust(t, s, 200, "GET", p+"/"+ik, nil)
			if got := obObj(t, r)[kc.keyField]; got != key {
				t.Errorf("GET %s key %v, want %s", ik, got, key)
			}
		}
	})
	t.Run("head", func(t *testing.T) {
		r := obMust(t, s, 200, "HEAD", p+"/"+key, nil)
		if r.Header.Get("ETag") == "" {
			t.Errorf("no ETag on HEAD")
		}
		if len(r.Body) != 0 {
			t.Errorf("HEAD body %q", r.Body)
		}
		obMust(t, s, 404, "HEAD", p+"/missing-object", nil)
	})
	t.Run("not-found", func(t *testing.T) {
		obWantErr(t, obCall(t, s, "GET", p+"/missing-object", nil), 404, "GET", kc.prefix, "missing-object", "Not Found")
		obWantErr(t, obCall(t, s, "PATCH", p+"/missing-object", `[]`), 404, "PATCH", kc.prefix, "missing-object", "Not Found")
		obWantErr(t, obCall(t, s, "PUT", p+"/missing-object", kc.body("missing-object")), 404, "PUT", kc.prefix, "missing-object", "Not Found")
		obWantErr(t, obCall(t, s, "DELETE", p+"/missing-object", nil), 404, "DELETE", kc.prefix, "missing-object", "Not Found")
		// Index keys are resolved before authorization; the 404 is still the request's.
		ik := strings.SplitN(kc.index(created)[0], ":", 2)[0] + ":missing-object"
		for _, m := range []string{"GET", "PATCH", "DELETE"} {
			body := ""
			if m == "PATCH" {
				body = "[]"
			}
			obWantErr(t, obCall(t, s, m, p+"/"+ik, body), 404, m, kc.prefix, "*", "Not Found")
		}
	})
	t.Run("patch", func(t *testing.T) {
		ops := `[{"op":"test","path":"/Description","from":"","value":""},{"op":"replace","path":"/Description","from":"","value":"d1"}]`
		if kc.descOmitEmpty {
			ops = `[{"op":"add","path":"/Description","from":"","value":"d1"}]`
		}
		r := obMust(t, s, 200, "PATCH", p+"/"+key, ops)
		if got := obObj(t, r)["Description"]; got != "d1" {
			t.Errorf("patched Description %v", got)
		}
		obWantErr(t, obCall(t, s, "PATCH", p+"/"+key,
			`[{"op":"test","path":"/Description","from":"","value":"nope"},{"op":"replace","path":"/Description","from":"","value":"x"}]`),
			409, "PATCH", kc.prefix, key, "")
		r = obMust(t, s, 200, "PATCH", p+"/"+key, `[]`)
		if got := obObj(t, r)[kc.keyField]; got != key {
			t.Errorf("empty patch returned key %v", got)
		}
		// drpcli --ref: one test of the whole document as a client sees it.
		doc := obMust(t, s, 200, "GET", p+"/"+key, nil).Body
		whole := `[{"op":"test","path":"","from":"","value":` + string(doc) + `},{"op":"replace","path":"/Description","from":"","value":"d2"}]`
		r = obMust(t, s, 200, "PATCH", p+"/"+key, whole)
		if got := obObj(t, r)["Description"]; got != "d2" {
			t.Errorf("whole-document patch Description %v", got)
		}
		obWantErr(t, obCall(t, s, "PATCH", p+"/"+key, whole), 409, "PATCH", kc.prefix, key, "")
		if kc.prefix == "users" || kc.prefix == "machines" {
			// drpcli decodes the reference into DRP's model first, which
			// adds a blank Secret; that test passes too.
			doc := obMust(t, s, 200, "GET", p+"/"+key, nil).Body
			ref := `{"Secret":"",` + strings.TrimPrefix(string(doc), "{")
			r = obMust(t, s, 200, "PATCH", p+"/"+key, `[{"op":"test","path":"","from":"","value":`+ref+`},{"op":"replace","path":"/Description","from":"","value":"d3"}]`)
			if got := obObj(t, r)["Description"]; got != "d3" {
				t.Errorf("model-shaped whole-document patch Description %v", got)
			}
		}
		obWantErr(t, obCall(t, s, "PATCH", p+"/"+key, `{"op":"add"}`), 400, "*", "*", "*", "")
	})
	t.Run("put", func(t *testing.T) {
		m := obObj(t, obMust(t, s, 200, "GET", p+"/"+key, nil))
		m["Description"] = "d3"
		r := obMust(t, s, 200, "PUT", p+"/"+key, m)
		if got := obObj(t, r)["Description"]; got != "d3" {
			t.Errorf("PUT Description %v", got)
		}
		other := "other-key"
		switch kc.prefix {
		case "machines":
			other = "6f2f1b1e-0000-4000-8000-000000000001"
		case "reservations":
			other = "192.168.124.11"
		}
		m[kc.keyField] = other
		obWantErr(t, obCall(t, s, "PUT", p+"/"+key, m), 400, "*", kc.prefix, "*", "Key change")
	})
	t.Run("delete", func(t *testing.T) {
		r := obMust(t, s, 200, "DELETE", p+"/"+key, nil)
		d := obObj(t, r)
		if d[kc.keyField] != key || d["Description"] != "d3" {
			t.Errorf("deleted object %s", r.Body)
		}
		obWantErr(t, obCall(t, s, "GET", p+"/"+key, nil), 404, "GET", kc.prefix, key, "Not Found")
	})
}

// testInUse: deletes of referenced objects are 409 StillInUseError (§2.2).
func testInUse(t *testing.T, s *tserver) {
	obMust(t, s, 201, "POST", "/roles", `{"Name":"iu-role","Claims":[]}`)
	obMust(t, s, 201, "POST", "/users", `{"Name":"iu-user","Roles":["iu-role"]}`)
	obMust(t, s, 201, "POST", "/tenants", `{"Name":"iu-tenant","Users":["iu-user"]}`)
	obMust(t, s, 201, "POST", "/bootenvs", `{"Name":"iu-benv"}`)
	obMust(t, s, 201, "POST", "/tasks", `{"Name":"iu-task"}`)
	obMust(t, s, 201, "POST", "/profiles", `{"Name":"iu-prof"}`)
	obMust(t, s, 201, "POST", "/stages", `{"Name":"iu-stage","BootEnv":"iu-benv","Tasks":["iu-task"],"Profiles":["iu-prof"]}`)
	obMust(t, s, 201, "POST", "/workflows", `{"Name":"iu-wf","Stages":["iu-stage"]}`)
	obMust(t, s, 201, "POST", "/pools", `{"Id":"iu-pool"}`)
	m := obObj(t, obMust(t, s, 201, "POST", "/machines", `{"Name":"iu-m1","Profiles":["iu-prof"],"Pool":"iu-pool","Workflow":"iu-wf"}`))
	cases := []struct{ path, prefix, key, msg string }{
		{"/roles/iu-role", "roles", "iu-role", "In use by User iu-user"},
		{"/tenants/iu-tenant", "tenants", "iu-tenant", "Constraining Users"},
		{"/profiles/iu-prof", "profiles", "iu-prof", "In use by"},
		{"/stages/iu-stage", "stages", "iu-stage", "In use by Workflow iu-wf"},
		{"/bootenvs/iu-benv", "bootenvs", "iu-benv", "In use by Stage iu-stage"},
		{"/tasks/iu-task", "tasks", "iu-task", "In use by Stage iu-stage"},
		{"/workflows/iu-wf", "workflows", "iu-wf", "In use by Machine iu-m1"},
		{"/pools/iu-pool", "pools", "iu-pool", "In use by Machine iu-m1"},
		{"/roles/superuser", "roles", "superuser", "In use by User rocketskates"},
	}
	for _, c := range cases {
		t.Run(c.prefix, func(t *testing.T) {
			obWantErr(t, obCall(t, s, "DELETE", c.path, nil), 409, "StillInUseError", c.prefix, c.key, c.msg)
		})
	}
	t.Run("locked-machine", func(t *testing.T) {
		obMust(t, s, 200, "PATCH", "/machines/"+m["Uuid"].(string), `[{"op":"replace","path":"/Locked","from":"","value":true}]`)
		obWantErr(t, obCall(t, s, "DELETE", "/machines/"+m["Uuid"].(string), nil), 409, "DELETE", "machines", "*", "Locked")
		obMust(t, s, 200, "PATCH", "/machines/"+m["Uuid"].(string), `[{"op":"replace","path":"/Locked","from":"","value":false}]`)
		obMust(t, s, 200, "DELETE", "/machines/Name:iu-m1", nil)
	})
}

// testList covers filters, paging, shaping and the count headers (§3.4).
func testList(t *testing.T, s *tserver) {
	obMust(t, s, 201, "POST", "/params", `{"Name":"lst/p","Schema":{"type":"integer"}}`)
	obMust(t, s, 201, "POST", "/profiles", `{"Name":"lst-p1","Params":{"lst/p":1,"lst/q":"from-profile"}}`)
	obMust(t, s, 201, "POST", "/profiles", `{"Name":"lst-p2","Params":{"lst/p":2}}`)
	for _, b := range []string{
		`{"Name":"lst1","Description":"lst","Runnable":true,"Profiles":["lst-p1"],"Meta":{"color":"red"},"Params":{"lst/p":5,"other":"a"}}`,
		`{"Name":"lst2","Description":"lst","Profiles":["lst-p1","lst-p2"],"Meta":{"color":"blue"},"Params":{"lst/p":7,"other":"b"}}`,
		`{"Name":"lst3","Description":"lst","Profiles":[],"Meta":{"color":"green"},"Params":{"lst/p":9}}`,
	} {
		obMust(t, s, 201, "POST", "/machines", b)
	}
	// Runnable and CurrentTask as a running system would have them. The
	// task list names tasks that exist: DRP refuses a missing one (422).
	for _, task := range []string{"a1", "a2", "a3"} {
		obMust(t, s, 201, "POST", "/tasks", `{"Name":"`+task+`"}`)
	}
	obMust(t, s, 200, "PATCH", "/machines/Name:lst2", `[{"op":"replace","path":"/Runnable","from":"","value":false}]`)
	for i, n := range []string{"lst1", "lst2", "lst3"} {
		obMust(t, s, 200, "PATCH", "/machines/Name:"+n,
			fmt.Sprintf(`[{"op":"replace","path":"/Tasks","from":"","value":["a1","a2","a3"]},{"op":"replace","path":"/CurrentTask","from":"","value":%d}]`, i-1))
	}
	base := "/machines?Description=lst&sort=Name"
	cases := []struct {
		name, query string
		want        []string
	}{
		{"bare", "&Name=lst2", []string{"lst2"}},
		{"eq", "&Name=Eq(lst2)", []string{"lst2"}},
		{"ne", "&Name=Ne(lst2)", []string{"lst1", "lst3"}},
		{"lt-string", "&Name=Lt(lst2)", []string{"lst1"}},
		{"gte-string", "&Name=Gte(lst2)", []string{"lst2", "lst3"}},
		{"in", "&Name=In(lst1,lst3)", []string{"lst1", "lst3"}},
		{"nin", "&Name=Nin(lst1,lst3)", []string{"lst2"}},
		{"re", "&Name=Re(^lst[12]$)", []string{"lst1", "lst2"}},
		{"between-string", "&Name=Between(lst2,lst3)", []string{"lst2", "lst3"}},
		{"except-string", "&Name=Except(lst2,lst3)", []string{"lst1"}},
		{"int-bare", "&CurrentTask=0", []string{"lst2"}},
		{"int-eq-negative", "&CurrentTask=Eq(-1)", []string{"lst1"}},
		{"int-ne", "&CurrentTask=Ne(0)", []string{"lst1", "lst3"}},
		{"int-lt", "&CurrentTask=Lt(0)", []string{"lst1"}},
		{"int-lte", "&CurrentTask=Lte(0)", []string{"lst1", "lst2"}},
		{"int-gt", "&CurrentTask=Gt(0)", []string{"lst3"}},
		{"int-gte", "&CurrentTask=Gte(0)", []string{"lst2", "lst3"}},
		{"int-in", "&CurrentTask=In(-1,1)", []string{"lst1", "lst3"}},
		{"int-nin", "&CurrentTask=Nin(-1,1)", []string{"lst2"}},
		{"int-between", "&CurrentTask=Between(-1,0)", []string{"lst1", "lst2"}},
		{"int-except", "&CurrentTask=Except(-1,0)", []string{"lst3"}},
		// Integers compare as numbers, not strings: "10" > "9".
		{"int-gt-numeric", "&CurrentTask=Gt(-10)", []string{"lst1", "lst2", "lst3"}},
		{"bool-true", "&Runnable=true", []string{"lst1", "lst3"}},
		{"bool-eq-false", "&Runnable=Eq(false)", []string{"lst2"}},
		{"bool-ne", "&Runnable=Ne(true)", []string{"lst2"}},
		{"list-contains", "&Profiles=lst-p2", []string{"lst2"}},
		{"list-eq", "&Profiles=Eq(lst-p1)", []string{"lst1", "lst2"}},
		{"list-ne", "&Profiles=Ne(lst-p1)", []string{"lst3"}},
		{"list-in", "&Profiles=In(lst-p2,nothing)", []string{"lst2"}},
		{"list-nin", "&Profiles=Nin(lst-p2)", []string{"lst1", "lst3"}},
		{"list-re", "&Profiles=Re(p2$)", []string{"lst2"}},
		{"meta-eq", "&Meta.color=red", []string{"lst1"}},
		{"meta-in", "&Meta.color=In(red,green)", []string{"lst1", "lst3"}},
		{"meta-ne", "&Meta.color=Ne(red)", []string{"lst2", "lst3"}},
		{"meta-re", "&Meta.color=Re(^(b|g))", []string{"lst2", "lst3"}},
		{"param-eq", "&lst/p=7", []string{"lst2"}},
		{"param-gt", "&lst/p=Gt(6)", []string{"lst2", "lst3"}},
		{"param-between", "&lst/p=Between(5,7)", []string{"lst1", "lst2"}},
		{"param-in", "&lst/p=In(5,9)", []string{"lst1", "lst3"}},
		{"param-ne", "&lst/p=Ne(5)", []string{"lst2", "lst3"}},
		{"offset-limit", "&offset=1&limit=1", []string{"lst2"}},
		{"limit-zero", "&limit=0", []string{}},
		{"huge-offset", "&offset=1000000000", []string{}},
		{"reverse", "&reverse=true", []string{"lst3", "lst2", "lst1"}},
		{"reverse-offset", "&reverse=true&offset=1&limit=1", []string{"lst2"}},
		{"sort-int-reverse", "&sort=CurrentTask&reverse=true", []string{"lst3", "lst2", "lst1"}},
		{"and", "&Runnable=true&CurrentTask=Gte(0)", []string{"lst3"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			q := base + c.query
			if strings.Contains(c.query, "sort=") {
				q = "/machines?Description=lst" + c.query
			}
			got := obNames(obList(t, obMust(t, s, 200, "GET", q, nil)))
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("GET %s: got %v, want %v", q, got, c.want)
			}
		})
	}
	t.Run("profiles-param-filter", func(t *testing.T) {
		got := obNames(obList(t, obMust(t, s, 200, "GET", "/profiles?lst/p=Gte(2)&Name=Re(^lst-)", nil)))
		if !reflect.DeepEqual(got, []string{"lst-p2"}) {
			t.Errorf("got %v", got)
		}
	})
	t.Run("slim", func(t *testing.T) {
		for _, m := range obList(t, obMust(t, s, 200, "GET", base+"&slim=Params,Meta", nil)) {
			if p, _ := m["Params"].(map[string]any); len(p) != 0 {
				t.Errorf("%v Params not slimmed: %v", m["Name"], m["Params"])
			}
			if p, _ := m["Meta"].(map[string]any); len(p) != 0 {
				t.Errorf("%v Meta not slimmed: %v", m["Name"], m["Meta"])
			}
			if m["Partial"] != true {
				t.Errorf("%v Partial = %v", m["Name"], m["Partial"])
			}
		}
	})
	t.Run("params", func(t *testing.T) {
		l := obList(t, obMust(t, s, 200, "GET", base+"&params=lst/p,nope", nil))
		if len(l) != 3 {
			t.Fatalf("got %d", len(l))
		}
		if p := l[0]["Params"]; !reflect.DeepEqual(p, map[string]any{"lst/p": 5.0}) {
			t.Errorf("params=lst/p: %v", p)
		}
	})
	t.Run("aggregate", func(t *testing.T) {
		l := obList(t, obMust(t, s, 200, "GET", base+"&aggregate=true", nil))
		p, _ := l[0]["Params"].(map[string]any)
		if p["lst/p"] != 5.0 || p["lst/q"] != "from-profile" || p["other"] != "a" {
			t.Errorf("aggregate Params of lst1: %v", p)
		}
		p, _ = l[2]["Params"].(map[string]any)
		if _, ok := p["lst/q"]; ok {
			t.Errorf("aggregate Params of lst3: %v", p)
		}
	})
	t.Run("head-counts", func(t *testing.T) {
		all := obList(t, obMust(t, s, 200, "GET", "/machines", nil))
		r := obMust(t, s, 200, "HEAD", "/machines?Description=lst&Runnable=true", nil)
		for h, want := range map[string]string{"X-DRP-LIST-FILTER-COUNT": "2", "X-DRP-LIST-COUNT": "2",
			"X-DRP-LIST-TOTAL-COUNT": fmt.Sprint(len(all))} {
			if got := r.Header.Get(h); got != want {
				t.Errorf("%s = %q, want %q", h, got, want)
			}
		}
		if len(r.Body) != 0 {
			t.Errorf("HEAD obList body %q", r.Body)
		}
		r = obMust(t, s, 200, "GET", "/machines?Description=lst", nil)
		if got := r.Header.Get("X-DRP-LIST-FILTER-COUNT"); got != "3" {
			t.Errorf("GET filter count %q", got)
		}
		r = obMust(t, s, 200, "HEAD", "/profiles", nil)
		if r.Header.Get("X-DRP-LIST-FILTER-COUNT") == "" {
			t.Errorf("no filter count on profiles")
		}
	})
	errCases := []struct{ name, query, msg string }{
		{"unknown-filter", "Bogus=1", "Filter not found: Bogus"},
		{"unknown-sort", "sort=Bogus", "Bogus"},
		{"unclosed-re", "Name=Re(", "Name"},
		{"unclosed-re-value", "Name=Re(^lst", "Name"},
		{"bad-regex", "Name=Re([)", "Name"},
		{"bad-bool", "Runnable=maybe", "Runnable"},
		{"bad-int", "CurrentTask=Gt(x)", "CurrentTask"},
		{"between-one-arg", "CurrentTask=Between(1)", "CurrentTask"},
		{"negative-limit", "limit=-1", "Limit cannot be negative"},
		{"negative-offset", "offset=-1", "Offset cannot be negative"},
		{"non-numeric-limit", "limit=ten", "Limit"},
		{"overflow-offset", "offset=99999999999999999999999", "Offset"},
		{"bad-reverse", "reverse=maybe", "reverse"},
		{"param-filter-unknown-param", "no/such/param=1", "Filter not found: no/such/param"},
	}
	for _, c := range errCases {
		t.Run("error-"+c.name, func(t *testing.T) {
			u := "/machines?" + c.query
			r := obCall(t, s, "GET", u, nil)
			if r.Status < 400 || r.Status >= 500 {
				t.Fatalf("GET %s: %d %s, want 4xx", u, r.Status, r.Body)
			}
			obWantErr(t, r, r.Status, "GET", "machines", "*", c.msg)
			if h := obCall(t, s, "HEAD", u, nil); h.Status < 400 || h.Status >= 500 {
				t.Errorf("HEAD %s: %d, want 4xx", u, h.Status)
			}
		})
	}
	t.Run("error-406", func(t *testing.T) {
		obWantErr(t, obCall(t, s, "GET", "/machines?Bogus=1", nil), 406, "GET", "machines", "*", "Filter not found: Bogus")
		obWantErr(t, obCall(t, s, "GET", "/bootenvs?limit=-1", nil), 406, "GET", "bootenvs", "*", "Limit cannot be negative")
	})
}

// testLongPoll: If-None-Match + Prefer: wait (§3.5).
func testLongPoll(t *testing.T, s *tserver) {
	m := obObj(t, obMust(t, s, 201, "POST", "/machines", `{"Name":"poll1"}`))
	p := "/machines/" + m["Uuid"].(string)
	etag := obMust(t, s, 200, "HEAD", p, nil).Header.Get("ETag")
	if etag == "" {
		t.Fatal("no ETag")
	}
	t.Run("unchanged-304", func(t *testing.T) {
		start := time.Now()
		r := obCall(t, s, "GET", p, nil, "If-None-Match", etag, "Prefer", "wait=2s")
		d := time.Since(start)
		if r.Status != 304 {
			t.Fatalf("got %d %s, want 304", r.Status, r.Body)
		}
		if d < 1800*time.Millisecond || d > 10*time.Second {
			t.Errorf("304 after %v, want about 2s", d)
		}
	})
	t.Run("changed-200", func(t *testing.T) {
		type result struct {
			r resp
			d time.Duration
		}
		done := make(chan result, 1)
		start := time.Now()
		go func() {
			r := obRawCall(t, s, s.Base+p, "GET", nil, "If-None-Match", etag, "Prefer", "wait=20s")
			done <- result{r, time.Since(start)}
		}()
		time.Sleep(300 * time.Millisecond)
		obMust(t, s, 200, "PATCH", p, `[{"op":"replace","path":"/Description","from":"","value":"changed"}]`)
		var res result
		select {
		case res = <-done:
		case <-time.After(30 * time.Second):
			t.Fatal("long poll did not return")
		}
		if res.r.Status != 200 {
			t.Fatalf("got %d %s, want 200", res.r.Status, res.r.Body)
		}
		if res.d > 5*time.Second {
			t.Errorf("long poll returned after %v, want promptly", res.d)
		}
		if got := obObj(t, res.r)["Description"]; got != "changed" {
			t.Errorf("Description %v", got)
		}
		if ct := res.r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			t.Errorf("Content-Type %q", ct)
		}
		if e := res.r.Header.Get("ETag"); e == "" || e == etag {
			t.Errorf("ETag after change %q (was %q)", e, etag)
		}
	})
	// pollAfter starts a long poll on path, runs change, and returns the
	// reply with how long the poll took.
	pollAfter := func(t *testing.T, path string, change func()) (resp, time.Duration) {
		t.Helper()
		et := obMust(t, s, 200, "HEAD", path, nil).Header.Get("ETag")
		type result struct {
			r resp
			d time.Duration
		}
		done := make(chan result, 1)
		start := time.Now()
		go func() {
			r := obRawCall(t, s, s.Base+path, "GET", nil, "If-None-Match", et, "Prefer", "wait=20s")
			done <- result{r, time.Since(start)}
		}()
		time.Sleep(300 * time.Millisecond)
		change()
		select {
		case res := <-done:
			return res.r, res.d
		case <-time.After(30 * time.Second):
			t.Fatal("long poll did not return")
		}
		return resp{}, 0
	}
	t.Run("woken-by-params", func(t *testing.T) {
		r, d := pollAfter(t, p, func() { obMust(t, s, 200, "POST", p+"/params/poll/p", `1`) })
		if r.Status != 200 || d > 5*time.Second {
			t.Fatalf("got %d after %v: %s", r.Status, d, r.Body)
		}
		if ps, _ := obObj(t, r)["Params"].(map[string]any); ps["poll/p"] != 1.0 {
			t.Errorf("Params %v", ps)
		}
	})
	t.Run("woken-by-delete", func(t *testing.T) {
		m := obObj(t, obMust(t, s, 201, "POST", "/machines", `{"Name":"poll2"}`))
		path := "/machines/" + m["Uuid"].(string)
		r, d := pollAfter(t, path, func() { obMust(t, s, 200, "DELETE", path, nil) })
		if d > 5*time.Second {
			t.Fatalf("long poll of a deleted object returned after %v", d)
		}
		obWantErr(t, r, 404, "GET", "machines", "*", "Not Found")
	})
	t.Run("stale-etag-200", func(t *testing.T) {
		start := time.Now()
		r := obMust(t, s, 200, "GET", p, nil, "If-None-Match", etag, "Prefer", "wait=5s")
		if time.Since(start) > 3*time.Second {
			t.Errorf("stale ETag waited")
		}
		if obObj(t, r)["Description"] != "changed" {
			t.Errorf("body %s", r.Body)
		}
	})
}

// testParams: params sub-resources, aggregation, secure params, schemas (§3.9).
func testParams(t *testing.T, s *tserver) {
	m := obObj(t, obMust(t, s, 201, "POST", "/machines", `{"Name":"par1"}`))
	mp := "/machines/" + m["Uuid"].(string)
	obMust(t, s, 201, "POST", "/profiles", `{"Name":"par-prof"}`)
	obMust(t, s, 201, "POST", "/stages", `{"Name":"par-stage"}`)
	obMust(t, s, 201, "POST", "/plugins", `{"Name":"par-plug","Provider":"callback"}`)
	for _, target := range []string{mp, "/machines/Name:par1", "/profiles/par-prof", "/stages/par-stage", "/plugins/par-plug"} {
		t.Run("basic"+strings.ReplaceAll(target, "/", "_"), func(t *testing.T) {
			obMust(t, s, 200, "POST", target+"/params", `{}`)
			if got := obObj(t, obMust(t, s, 200, "GET", target+"/params", nil)); len(got) != 0 {
				t.Errorf("params %v", got)
			}
			if r := obMust(t, s, 200, "GET", target+"/params/no/such", nil); string(r.Body) != "null" {
				t.Errorf("absent param %q, want null", r.Body)
			}
			r := obMust(t, s, 200, "POST", target+"/params/foo/bar", `{"k":1}`)
			if string(r.Body) != `{"k":1}` {
				t.Errorf("set param reply %s", r.Body)
			}
			if got := obObj(t, obMust(t, s, 200, "GET", target+"/params/foo/bar", nil)); got["k"] != 1.0 {
				t.Errorf("get foo/bar %v", got)
			}
			got := obObj(t, obMust(t, s, 200, "POST", target+"/params", `{"foo/bar":{"k":2},"a-b":"x"}`))
			if !reflect.DeepEqual(got, map[string]any{"foo/bar": map[string]any{"k": 2.0}, "a-b": "x"}) {
				t.Errorf("full map %v", got)
			}
			cur := string(obMust(t, s, 200, "GET", target+"/params", nil).Body)
			got = obObj(t, obMust(t, s, 200, "PATCH", target+"/params",
				`[{"op":"test","path":"","value":`+cur+`},{"op":"add","path":"/newp","value":5}]`))
			if got["newp"] != 5.0 || got["a-b"] != "x" {
				t.Errorf("patched params %v", got)
			}
			obWantErr(t, obCall(t, s, "PATCH", target+"/params", `[{"op":"test","path":"","from":"","value":`+cur+`},{"op":"add","path":"/x","from":"","value":5}]`),
				409, "PATCH", "*", "*", "")
			if r := obMust(t, s, 200, "DELETE", target+"/params/newp", nil); string(r.Body) != "5" {
				t.Errorf("delete reply %s", r.Body)
			}
			obWantErr(t, obCall(t, s, "DELETE", target+"/params/newp", nil), 404, "DELETE", "params", "newp", "Not Found")
			if r := obMust(t, s, 200, "DELETE", target+"/params/foo/bar", nil); string(r.Body) != `{"k":2}` {
				t.Errorf("delete foo/bar reply %s", r.Body)
			}
		})
	}
	t.Run("missing-object", func(t *testing.T) {
		obWantErr(t, obCall(t, s, "GET", "/machines/Name:nope/params", nil), 404, "GET", "machines", "*", "Not Found")
		obWantErr(t, obCall(t, s, "POST", "/profiles/nope/params/a", `1`), 404, "*", "profiles", "*", "Not Found")
	})
	t.Run("no-params-kind", func(t *testing.T) {
		r := obCall(t, s, "GET", "/users/rocketskates/params", nil)
		if r.Status != 404 {
			t.Errorf("users params: %d %s", r.Status, r.Body)
		}
	})
	t.Run("escaped-pointer", func(t *testing.T) {
		// A param with a slash and no definition: callback/callbacks is
		// Secure, and a patch cannot reach inside a sealed value.
		obMust(t, s, 200, "PATCH", mp, `[{"op":"add","path":"/Params/esc~1ptr","from":"","value":{}}]`)
		r := obMust(t, s, 200, "PATCH", mp, `[{"op":"add","path":"/Params/esc~1ptr/a","from":"","value":{"Url":"http://x"}}]`)
		p, _ := obObj(t, r)["Params"].(map[string]any)
		if !reflect.DeepEqual(p["esc/ptr"], map[string]any{"a": map[string]any{"Url": "http://x"}}) {
			t.Errorf("Params %v", p)
		}
		r = obMust(t, s, 200, "PATCH", "/plugins/par-plug", `[{"op":"add","path":"/Params/callback~1callbacks","from":"","value":{"a":{"Url":"http://x"}}}]`)
		p, _ = obObj(t, r)["Params"].(map[string]any)
		if _, ok := p["callback/callbacks"]; !ok {
			t.Errorf("plugin Params %v", p)
		}
	})
	t.Run("aggregate-order", func(t *testing.T) {
		obMust(t, s, 201, "POST", "/params", `{"Name":"agg/p","Schema":{"type":"string","default":"from-default"}}`)
		obMust(t, s, 201, "POST", "/machines", `{"Name":"agg1"}`)
		obMust(t, s, 201, "POST", "/profiles", `{"Name":"agg-prof"}`)
		obMust(t, s, 201, "POST", "/profiles", `{"Name":"agg-prof2","Params":{"agg/p":"from-profile2"}}`)
		obMust(t, s, 201, "POST", "/stages", `{"Name":"agg-stage"}`)
		if r := obCall(t, s, "GET", "/profiles/global", nil); r.Status == 404 {
			obMust(t, s, 201, "POST", "/profiles", `{"Name":"global"}`)
		}
		obMust(t, s, 200, "PATCH", "/machines/Name:agg1",
			`[{"op":"replace","path":"/Profiles","from":"","value":["agg-prof","agg-prof2"]},{"op":"replace","path":"/Stage","from":"","value":"agg-stage"}]`)
		get := func() any {
			var v any
			if err := json.Unmarshal(obMust(t, s, 200, "GET", "/machines/Name:agg1/params/agg/p?aggregate=true", nil).Body, &v); err != nil {
				t.Fatal(err)
			}
			return v
		}
		// Without aggregate the machine has nothing.
		if r := obMust(t, s, 200, "GET", "/machines/Name:agg1/params/agg/p", nil); string(r.Body) != "null" {
			t.Errorf("non-aggregate %s", r.Body)
		}
		obMust(t, s, 200, "DELETE", "/profiles/agg-prof2/params/agg/p", nil)
		if got := get(); got != "from-default" {
			t.Errorf("default layer: %v", got)
		}
		layers := []struct{ path, value string }{
			{"/profiles/global/params/agg/p", "from-global"},
			{"/stages/agg-stage/params/agg/p", "from-stage"},
			{"/profiles/agg-prof2/params/agg/p", "from-profile2"},
			{"/profiles/agg-prof/params/agg/p", "from-profile"},
			{"/machines/Name:agg1/params/agg/p", "from-machine"},
		}
		for _, l := range layers {
			obMust(t, s, 200, "POST", l.path, `"`+l.value+`"`)
			if got := get(); got != l.value {
				t.Errorf("after %s: %v, want %s", l.path, got, l.value)
			}
		}
		all := obObj(t, obMust(t, s, 200, "GET", "/machines/Name:agg1/params?aggregate=true", nil))
		if all["agg/p"] != "from-machine" {
			t.Errorf("aggregate map %v", all)
		}
		one := obObj(t, obMust(t, s, 200, "GET", "/machines/Name:agg1?aggregate=true", nil))
		if p, _ := one["Params"].(map[string]any); p["agg/p"] != "from-machine" {
			t.Errorf("aggregate object Params %v", one["Params"])
		}
		sel := obObj(t, obMust(t, s, 200, "GET", "/machines/Name:agg1/params?aggregate=true&params=agg/p", nil))
		if len(sel) != 1 {
			t.Errorf("params=agg/p: %v", sel)
		}
	})
	t.Run("secure", func(t *testing.T) {
		obMust(t, s, 201, "POST", "/params", `{"Name":"sec/p","Secure":true,"Schema":{"type":"string"}}`)
		r := obMust(t, s, 200, "POST", mp+"/params/sec/p", `"s3cret-value"`)
		if strings.Contains(string(r.Body), "s3cret-value") {
			t.Errorf("set reply shows plaintext: %s", r.Body)
		}
		for _, u := range []string{mp + "/params/sec/p", mp + "/params", mp, "/machines?Name=par1"} {
			if r := obMust(t, s, 200, "GET", u, nil); strings.Contains(string(r.Body), "s3cret-value") {
				t.Errorf("GET %s shows plaintext: %s", u, r.Body)
			}
		}
		if r := obMust(t, s, 200, "GET", mp+"/params/sec/p?decode=true", nil); string(r.Body) != `"s3cret-value"` {
			t.Errorf("decoded %s", r.Body)
		}
		if p := obObj(t, obMust(t, s, 200, "GET", mp+"?decode=true", nil))["Params"].(map[string]any); p["sec/p"] != "s3cret-value" {
			t.Errorf("decoded object %v", p["sec/p"])
		}
		if p := obObj(t, obMust(t, s, 200, "GET", mp+"/params?decode=true", nil)); p["sec/p"] != "s3cret-value" {
			t.Errorf("decoded map %v", p["sec/p"])
		}
		l := obList(t, obMust(t, s, 200, "GET", "/machines?Name=par1&decode=true", nil))
		if len(l) != 1 || l[0]["Params"].(map[string]any)["sec/p"] != "s3cret-value" {
			t.Errorf("decoded obList %v", l)
		}
		// The secure value is stored sealed: a schema violation is still caught.
		obWantErr(t, obCall(t, s, "POST", mp+"/params/sec/p", `42`), 422, "ValidationError", "machines", "*", "sec/p")
	})
	t.Run("schema", func(t *testing.T) {
		obMust(t, s, 201, "POST", "/params", `{"Name":"int/p","Schema":{"type":"integer"}}`)
		obWantErr(t, obCall(t, s, "POST", mp+"/params/int/p", `"str"`), 422, "ValidationError", "machines", "*", "int/p")
		obWantErr(t, obCall(t, s, "POST", "/profiles/par-prof/params", `{"int/p":"str"}`), 422, "ValidationError", "profiles", "*", "int/p")
		obWantErr(t, obCall(t, s, "PATCH", mp, `[{"op":"add","path":"/Params/int~1p","from":"","value":"x"}]`), 422, "ValidationError", "machines", "*", "int/p")
		obMust(t, s, 200, "POST", mp+"/params/int/p", `3`)
		obWantErr(t, obCall(t, s, "POST", "/params", `{"Name":"bad/schema","Schema":{"type":12}}`), 422, "ValidationError", "params", "*", "Schema")
	})
}

func testMetaIndexes(t *testing.T, s *tserver) {
	m := obObj(t, obMust(t, s, 201, "POST", "/machines", `{"Name":"meta1"}`))
	p := "/meta/machines/" + m["Uuid"].(string)
	got := obObj(t, obMust(t, s, 200, "GET", p, nil))
	if got["feature-flags"] != "change-stage-v2" {
		t.Errorf("meta %v", got)
	}
	got = obObj(t, obMust(t, s, 200, "PATCH", p, `[{"op":"add","path":"/color","from":"","value":"red"}]`))
	if got["color"] != "red" {
		t.Errorf("patched meta %v", got)
	}
	got = obObj(t, obMust(t, s, 200, "GET", "/meta/machines/Name:meta1", nil))
	if got["color"] != "red" {
		t.Errorf("meta by name %v", got)
	}
	obWantErr(t, obCall(t, s, "PATCH", p, `[{"op":"test","path":"/color","from":"","value":"blue"}]`), 409, "PATCH", "machines", "*", "")
	obWantErr(t, obCall(t, s, "GET", "/meta/machines/Name:nope", nil), 404, "GET", "machines", "*", "Not Found")
	idx := obObj(t, obMust(t, s, 200, "GET", "/indexes/machines", nil))
	want := map[string]map[string]any{
		"Name":        {"Type": "string", "Unique": true, "Regex": true},
		"Uuid":        {"Unique": true},
		"CurrentTask": {"Type": "integer"},
		"Runnable":    {"Type": "boolean"},
		"Profiles":    {"Unordered": true},
	}
	for n, fields := range want {
		i, _ := idx[n].(map[string]any)
		if i == nil {
			t.Errorf("index %s missing: %v", n, idx)
			continue
		}
		for f, v := range fields {
			if i[f] != v {
				t.Errorf("index %s %s = %v, want %v", n, f, i[f], v)
			}
		}
	}
	obWantErr(t, obCall(t, s, "GET", "/indexes/nope", nil), 404, "GET", "*", "*", "")
}

// obJobBody is drpcli's "machines jobs create" body: a full zero Job.
func obJobBody(machine string) string {
	return `{` + drpEnv + `,"Uuid":"","Previous":"","Machine":"` + machine + `","Task":"","Stage":"","Context":"",` +
		`"State":"","ExitState":"","StartTime":"0001-01-01T00:00:00Z","EndTime":"0001-01-01T00:00:00Z","Archived":false,` +
		`"Current":false,"CurrentIndex":0,"NextIndex":0,"Workflow":"","BootEnv":""}`
}

func testWorkflowJobs(t *testing.T, s *tserver) {
	obMust(t, s, 201, "POST", "/bootenvs", `{"Name":"wj-benv"}`)
	obMust(t, s, 201, "POST", "/tasks", `{"Name":"wj-t1"}`)
	obMust(t, s, 201, "POST", "/tasks", `{"Name":"wj-t2"}`)
	obMust(t, s, 201, "POST", "/stages", `{"Name":"wj-s1","BootEnv":"wj-benv","Tasks":["wj-t1","wj-t2"]}`)
	obMust(t, s, 201, "POST", "/stages", `{"Name":"wj-s2","Tasks":["wj-t1"]}`)
	obMust(t, s, 201, "POST", "/workflows", `{"Name":"wj-wf","Stages":["wj-s1","wj-s2"]}`)
	m := obObj(t, obMust(t, s, 201, "POST", "/machines", obMachineBody("wj1")))
	id := m["Uuid"].(string)
	mp := "/machines/" + id
	wantTasks := []any{"stage:wj-s1", "bootenv:wj-benv", "wj-t1", "wj-t2", "stage:wj-s2", "wj-t1"}
	t.Run("set-workflow", func(t *testing.T) {
		r := obMust(t, s, 200, "PATCH", mp, `[{"op":"test","path":"/Workflow","from":"","value":""},{"op":"replace","path":"/Workflow","from":"","value":"wj-wf"}]`)
		m = obObj(t, r)
		if !reflect.DeepEqual(m["Tasks"], wantTasks) {
			t.Errorf("Tasks %v, want %v", m["Tasks"], wantTasks)
		}
		if m["CurrentTask"] != -1.0 || m["WorkflowComplete"] != false {
			t.Errorf("CurrentTask %v WorkflowComplete %v", m["CurrentTask"], m["WorkflowComplete"])
		}
	})
	// nextJob posts jobs until one is made (201) or nothing is left (204).
	nextJob := func(t *testing.T) (int, map[string]any) {
		t.Helper()
		for i := 0; i < 6; i++ {
			r := obCall(t, s, "POST", "/jobs", obJobBody(id))
			switch r.Status {
			case 201, 202:
				return r.Status, obObj(t, r)
			case 204:
				if len(r.Body) != 0 {
					t.Errorf("204 with body %q", r.Body)
				}
				mm := obObj(t, obMust(t, s, 200, "GET", mp, nil))
				if ct, _ := mm["CurrentTask"].(float64); int(ct) >= len(wantTasks) {
					return 204, nil
				}
			default:
				t.Fatalf("POST /jobs: %d %s", r.Status, r.Body)
			}
		}
		t.Fatal("no job after 6 tries")
		return 0, nil
	}
	patchState := func(t *testing.T, j, from, to string) map[string]any {
		t.Helper()
		return obObj(t, obMust(t, s, 200, "PATCH", "/jobs/"+j,
			fmt.Sprintf(`[{"op":"test","path":"/State","value":%q},{"op":"replace","path":"/State","value":%q}]`, from, to)))
	}
	var job map[string]any
	t.Run("create-201", func(t *testing.T) {
		st, j := nextJob(t)
		if st != 201 || j["State"] != "created" || j["Task"] != "wj-t1" || j["Machine"] != id {
			t.Fatalf("job %d %v", st, j)
		}
		job = j
		if mm := obObj(t, obMust(t, s, 200, "GET", mp, nil)); mm["CurrentJob"] != j["Uuid"] || mm["Stage"] != "wj-s1" || mm["BootEnv"] != "wj-benv" {
			t.Errorf("machine CurrentJob %v Stage %v BootEnv %v", mm["CurrentJob"], mm["Stage"], mm["BootEnv"])
		}
	})
	if job == nil {
		t.FailNow()
	}
	jid := job["Uuid"].(string)
	t.Run("conflict-409", func(t *testing.T) {
		obWantErr(t, obCall(t, s, "POST", "/jobs", obJobBody(id)), 409, "Conflict", "*", "*", "already has running or created job")
	})
	t.Run("missing-machine-422", func(t *testing.T) {
		u := "0b3a1c7e-1111-4222-8333-444455556666"
		obWantErr(t, obCall(t, s, "POST", "/jobs", obJobBody(u)), 422, "ValidationError", "*", "*", "Machine "+u+" does not exist")
	})
	t.Run("no-machine-400", func(t *testing.T) {
		obWantErr(t, obCall(t, s, "POST", "/jobs", `{"Uuid":""}`), 400, "*", "*", "*", "Machine")
	})
	t.Run("log", func(t *testing.T) {
		r := obCall(t, s, "PUT", "/jobs/"+jid+"/log", "line\n")
		obWantErr(t, r, 415, "PUT", "jobs", "*", "content type")
		r = obCall(t, s, "PUT", "/jobs/"+jid+"/log", "hello\n", "Content-Type", "application/octet-stream")
		if r.Status != 204 || len(r.Body) != 0 {
			t.Fatalf("PUT log: %d %q", r.Status, r.Body)
		}
		obMust(t, s, 204, "PUT", "/jobs/"+jid+"/log", "world\n", "Content-Type", "application/octet-stream")
		g := obRawCall(t, s, s.Base+"/jobs/"+jid+"/log", "GET", nil, "Accept", "application/octet-stream")
		if g.Status != 200 || string(g.Body) != "hello\nworld\n" {
			t.Errorf("GET log %d %q", g.Status, g.Body)
		}
		if ct := g.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/octet-stream") {
			t.Errorf("log Content-Type %q", ct)
		}
		obWantErr(t, obCall(t, s, "GET", "/jobs/0b3a1c7e-1111-4222-8333-444455556666/log", nil), 404, "*", "jobs", "*", "Not Found")
	})
	t.Run("delete-created-422", func(t *testing.T) {
		obWantErr(t, obCall(t, s, "DELETE", "/jobs/"+jid, nil), 422, "ValidationError", "jobs", jid, "is not in a deletable state: created")
	})
	t.Run("fail-makes-not-runnable", func(t *testing.T) {
		patchState(t, jid, "created", "running")
		obWantErr(t, obCall(t, s, "PATCH", "/jobs/"+jid, `[{"op":"test","path":"/State","value":"created"},{"op":"replace","path":"/State","value":"running"}]`),
			409, "PATCH", "jobs", jid, "")
		j := obObj(t, obMust(t, s, 200, "PATCH", "/jobs/"+jid,
			`[{"op":"test","path":"/State","value":"running"},{"op":"replace","path":"/State","value":"failed"},{"op":"replace","path":"/ExitState","value":"failed"}]`))
		if j["State"] != "failed" {
			t.Errorf("job %v", j)
		}
		if mm := obObj(t, obMust(t, s, 200, "GET", mp, nil)); mm["Runnable"] != false {
			t.Errorf("machine Runnable %v after failed job", mm["Runnable"])
		}
		obWantErr(t, obCall(t, s, "POST", "/jobs", obJobBody(id)), 409, "Conflict", "*", "*", "is not runnable")
		obWantErr(t, obCall(t, s, "PATCH", "/jobs/"+jid, `[{"op":"replace","path":"/ExitState","value":"fred"}]`), 422, "ValidationError", "jobs", jid, "fred")
	})
	t.Run("retry-incomplete-finish", func(t *testing.T) {
		obMust(t, s, 200, "PATCH", mp, `[{"op":"test","path":"/Runnable","from":"","value":false},{"op":"replace","path":"/Runnable","from":"","value":true}]`)
		st, j := nextJob(t)
		if st != 201 || j["Task"] != "wj-t1" || j["Uuid"] == jid {
			t.Fatalf("retry job %d %v", st, j)
		}
		j2 := j["Uuid"].(string)
		patchState(t, j2, "created", "running")
		patchState(t, j2, "running", "incomplete")
		st, j = nextJob(t)
		// The agent re-runs it from created, as it does a new job (§8.4).
		if st != 202 || j["Uuid"] != j2 || j["State"] != "created" {
			t.Fatalf("incomplete job: %d %v, want 202 with %s created", st, j, j2)
		}
		patchState(t, j2, "created", "running")
		patchState(t, j2, "running", "finished")
		tasks := []string{"wj-t2", "wj-t1"}
		for _, want := range tasks {
			st, j = nextJob(t)
			if st != 201 || j["Task"] != want {
				t.Fatalf("next job %d %v, want task %s", st, j, want)
			}
			patchState(t, j["Uuid"].(string), "created", "running")
			patchState(t, j["Uuid"].(string), "running", "finished")
		}
		st, _ = nextJob(t)
		if st != 204 {
			t.Fatalf("after last task: %d, want 204", st)
		}
		mm := obObj(t, obMust(t, s, 200, "GET", mp, nil))
		if mm["WorkflowComplete"] != true || mm["Stage"] != "wj-s2" {
			t.Errorf("WorkflowComplete %v Stage %v", mm["WorkflowComplete"], mm["Stage"])
		}
		r := obCall(t, s, "POST", "/jobs", obJobBody(id))
		if r.Status != 204 || len(r.Body) != 0 {
			t.Errorf("nothing to do: %d %q", r.Status, r.Body)
		}
		d := obObj(t, obMust(t, s, 200, "DELETE", "/jobs/"+j2, nil))
		if d["Uuid"] != j2 {
			t.Errorf("deleted job %v", d)
		}
		l := obList(t, obMust(t, s, 200, "GET", "/jobs?Machine="+id+"&sort=StartTime&reverse=true", nil))
		if len(l) < 3 {
			t.Errorf("jobs of machine: %d", len(l))
		}
		obMust(t, s, 200, "HEAD", "/jobs?State=finished", nil)
	})
}

func testMisc(t *testing.T, s *tserver) {
	t.Run("prefs", func(t *testing.T) {
		p := obObj(t, obMust(t, s, 200, "GET", "/prefs", nil))
		if _, ok := p["knownTokenTimeout"]; !ok {
			t.Errorf("prefs %v", p)
		}
		p = obObj(t, obMust(t, s, 200, "POST", "/prefs", `{"knownTokenTimeout":"7200"}`))
		if p["knownTokenTimeout"] != "7200" {
			t.Errorf("set prefs %v", p)
		}
		if p := obObj(t, obMust(t, s, 200, "GET", "/prefs", nil)); p["knownTokenTimeout"] != "7200" {
			t.Errorf("prefs after set %v", p)
		}
		obWantErr(t, obCall(t, s, "POST", "/prefs", `{"bogusPref":"1"}`), 422, "ValidationError", "*", "*", "bogusPref")
		obWantErr(t, obCall(t, s, "POST", "/prefs", `{"knownTokenTimeout":"soon"}`), 422, "ValidationError", "*", "*", "knownTokenTimeout")
	})
	t.Run("events", func(t *testing.T) {
		r := obCall(t, s, "POST", "/events", `{"Type":"machines","Action":"test","Key":"x","Object":{"a":1}}`)
		if r.Status < 200 || r.Status > 299 {
			t.Fatalf("POST /events %d %s", r.Status, r.Body)
		}
		obWantErr(t, obCall(t, s, "POST", "/events", `{}`), 400, "POST", "events", "*", "")
	})
	t.Run("plugin-providers", func(t *testing.T) {
		l := obList(t, obMust(t, s, 200, "GET", "/plugin_providers", nil))
		if !slices.Contains(obNames(l), "callback") {
			t.Errorf("providers %v", obNames(l))
		}
		obMust(t, s, 200, "GET", "/plugin_providers/callback", nil)
		obMust(t, s, 200, "HEAD", "/plugin_providers/callback", nil)
		obWantErr(t, obCall(t, s, "GET", "/plugin_providers/nope", nil), 404, "GET", "plugin_providers", "nope", "Not Found")
	})
	t.Run("double-slash", func(t *testing.T) {
		u := strings.Replace(s.Base, "/api/v3", "//api/v3", 1)
		r := obRawCall(t, s, u+"/machines", "GET", nil)
		if r.Status != 200 {
			t.Fatalf("GET //api/v3/machines: %d %s", r.Status, r.Body)
		}
		obList(t, r)
		r = obRawCall(t, s, u+"/profiles", "POST", `{"Name":"dslash"}`)
		if r.Status != 201 {
			t.Fatalf("POST //api/v3/profiles: %d %s", r.Status, r.Body)
		}
		obMust(t, s, 200, "GET", "/profiles/dslash", nil)
	})
	t.Run("objects", func(t *testing.T) {
		var got []string
		if err := json.Unmarshal(obMust(t, s, 200, "GET", "/objects", nil).Body, &got); err != nil {
			t.Fatal(err)
		}
		want := []string{"bootenvs", "jobs", "machines", "params", "plugins", "pools", "profiles", "reservations",
			"roles", "stages", "tasks", "tenants", "users", "workflows"}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("GET /objects %v, want %v", got, want)
		}
		// The claim is DRP's "objects list".
		s.AddUser("objects-nobody", "objects-pw")
		obWantErr(t, s.Do("GET", "/objects", nil, basic("objects-nobody", "objects-pw")), 403, "AUTH", "*", "*", "objects list")
	})
	t.Run("builtin-bootenvs", func(t *testing.T) {
		l := obList(t, obMust(t, s, 200, "GET", "/bootenvs?Name=In(local,ignore)&sort=Name", nil))
		if names := obNames(l); !reflect.DeepEqual(names, []string{"ignore", "local"}) {
			t.Fatalf("built-in bootenvs %v", names)
		}
		for _, b := range l {
			if b["ReadOnly"] != true || b["Available"] != true || b["OnlyUnknown"] != (b["Name"] == "ignore") {
				t.Errorf("built-in %v: ReadOnly %v Available %v OnlyUnknown %v", b["Name"], b["ReadOnly"], b["Available"], b["OnlyUnknown"])
			}
		}
		if got := obList(t, obMust(t, s, 200, "GET", "/bootenvs?OnlyUnknown=true", nil)); !reflect.DeepEqual(obNames(got), []string{"ignore"}) {
			t.Errorf("OnlyUnknown=true: %v", obNames(got))
		}
		obWantErr(t, obCall(t, s, "PATCH", "/bootenvs/local", `[{"op":"replace","path":"/Description","from":"","value":"x"}]`),
			400, "PATCH", "bootenvs", "local", "readonly: local")
		obWantErr(t, obCall(t, s, "PUT", "/bootenvs/ignore", `{"Name":"ignore","OnlyUnknown":false}`), 400, "PUT", "bootenvs", "ignore", "readonly: ignore")
		obWantErr(t, obCall(t, s, "DELETE", "/bootenvs/local", nil), 400, "DELETE", "bootenvs", "local", "readonly: local")
		obWantErr(t, obCall(t, s, "PATCH", "/meta/bootenvs/local", `[{"op":"add","path":"/x","from":"","value":"y"}]`),
			400, "PATCH", "bootenvs", "local", "readonly: local")
		obMust(t, s, 200, "GET", "/bootenvs/local", nil)
		// Machines and stages name them as on DRP.
		obMust(t, s, 201, "POST", "/stages", `{"Name":"bi-stage","BootEnv":"local"}`)
		m := obObj(t, obMust(t, s, 201, "POST", "/machines", `{"Name":"bi-m1","BootEnv":"local","Stage":"bi-stage"}`))
		obWantErr(t, obCall(t, s, "PATCH", "/machines/"+m["Uuid"].(string), `[{"op":"replace","path":"/BootEnv","from":"","value":"ignore"}]`),
			422, "ValidationError", "machines", "*", "BootEnv ignore does not allow Machine assignments, it has the OnlyUnknown flag.")
		// A client cannot make an object read-only.
		b := obObj(t, obMust(t, s, 201, "POST", "/bootenvs", `{"Name":"bi-ro","ReadOnly":true}`))
		if b["ReadOnly"] != false {
			t.Errorf("client-made bootenv ReadOnly %v", b["ReadOnly"])
		}
		obMust(t, s, 200, "DELETE", "/bootenvs/bi-ro", nil)
	})
	t.Run("no-route", func(t *testing.T) {
		obWantErr(t, obCall(t, s, "GET", "/john", nil), 404, "GET", "*", "*", "No route")
		obWantErr(t, obCall(t, s, "GET", "/john/x", nil), 404, "GET", "*", "*", "No route")
	})
	t.Run("users-password-not-leaked", func(t *testing.T) {
		r := obMust(t, s, 201, "POST", "/users", `{"Name":"pwuser","Password":"Secret-Pa55"}`)
		if strings.Contains(string(r.Body), "Secret-Pa55") || strings.Contains(string(r.Body), "PasswordHash") {
			t.Errorf("user reply %s", r.Body)
		}
		for _, u := range []string{"/users/pwuser", "/users"} {
			if b := obMust(t, s, 200, "GET", u, nil).Body; bytes.Contains(b, []byte("PasswordHash")) || bytes.Contains(b, []byte(`"Secret"`)) {
				t.Errorf("GET %s leaks: %s", u, b)
			}
		}
	})
	t.Run("query-key-escaping", func(t *testing.T) {
		obMust(t, s, 201, "POST", "/params", `{"Name":"esc/p"}`)
		obMust(t, s, 200, "GET", "/params/"+url.PathEscape("esc/p"), nil)
		obMust(t, s, 200, "GET", "/params/esc/p", nil)
		obMust(t, s, 200, "GET", "/params/Name:esc/p", nil)
	})
}

// testRobust sends odd but plausible requests: each must get its expected
// status class and a DRP error object, never a 5xx.
func testRobust(t *testing.T, s *tserver) {
	must := func(want int, method, path, body string) resp {
		t.Helper()
		var b any
		if body != "" {
			b = body
		}
		return obMust(t, s, want, method, path, b)
	}
	must(201, "POST", "/params", `{"Name":"mix/p"}`)
	must(201, "POST", "/params", `{"Name":"rsec/p","Secure":true}`)
	must(201, "POST", "/machines", `{"Name":"rb1","Address":"10.0.0.5","Params":{"mix/p":"x"},"Meta":{"n":"5"}}`)
	must(201, "POST", "/machines", `{"Name":"rb2","Address":"10.0.0.40","Params":{"mix/p":7}}`)
	must(201, "POST", "/machines", `{"Name":"rb3","Params":{"mix/p":{"a":[1,2]}}}`)
	must(201, "POST", "/machines", `{"Name":"rb4","Params":{"mix/p":true}}`)
	must(201, "POST", "/machines", `{"Name":"машина-1"}`)
	cases := []struct {
		name, method, path, body string
		class                    int // 2 or 4
	}{
		{"re-on-int", "GET", "/machines?CurrentTask=Re(^0)", "", 2},
		{"re-on-bool", "GET", "/machines?Runnable=Re(^t)", "", 2},
		{"re-on-uuid", "GET", "/machines?Uuid=Re(^[0-9a-f])", "", 2},
		{"re-on-ip", "GET", "/machines?Address=Re(^10\\.)", "", 2},
		{"ip-gt", "GET", "/machines?Address=Gt(10.0.0.6)", "", 2},
		{"ip-bad", "GET", "/machines?Address=Gt(not-an-ip)", "", 4},
		{"ip-between", "GET", "/machines?Address=Between(10.0.0.1,10.0.0.9)", "", 2},
		{"uuid-bad", "GET", "/machines?Uuid=Eq(nope)", "", 2},
		{"uuid-lt", "GET", "/machines?CurrentJob=Lt(nope)", "", 2},
		{"bool-between", "GET", "/machines?Runnable=Between(false,true)", "", 2},
		{"time-bad", "GET", "/jobs?StartTime=Gt(yesterday)", "", 4},
		{"time-gt", "GET", "/jobs?StartTime=Gt(2020-01-01T00:00:00Z)", "", 2},
		{"time-re", "GET", "/jobs?StartTime=Re(^2)", "", 2},
		{"sort-time", "GET", "/jobs?sort=StartTime&reverse=true", "", 2},
		{"sort-ip", "GET", "/machines?sort=Address", "", 2},
		{"sort-bool", "GET", "/machines?sort=Runnable", "", 2},
		{"sort-list", "GET", "/machines?sort=Profiles", "", 4},
		{"param-mixed-gt", "GET", "/machines?mix/p=Gt(5)", "", 2},
		{"param-mixed-lt-string", "GET", "/machines?mix/p=Lt(y)", "", 2},
		{"param-mixed-between", "GET", "/machines?mix/p=Between(1,x)", "", 2},
		{"param-mixed-re", "GET", "/machines?mix/p=Re(x)", "", 2},
		{"param-mixed-in", "GET", "/machines?mix/p=In(x,7,true)", "", 2},
		{"param-mixed-except", "GET", "/machines?mix/p=Except(1,9)", "", 2},
		{"param-secure-eq", "GET", "/machines?rsec/p=Eq(x)", "", 2},
		{"meta-gt", "GET", "/machines?Meta.n=Gt(4)", "", 2},
		{"meta-between", "GET", "/machines?Meta.n=Between(1,9)", "", 2},
		{"empty-eq", "GET", "/machines?Name=", "", 2},
		{"empty-in", "GET", "/machines?Name=In()", "", 2},
		{"unknown-op-is-value", "GET", "/machines?Name=Foo(x)", "", 2},
		{"max-offset", "GET", "/machines?offset=9223372036854775807", "", 2},
		{"max-limit", "GET", "/machines?limit=9223372036854775807", "", 2},
		{"bad-query-escape", "GET", "/machines?Name=%zz", "", 4},
		{"index-key-empty", "GET", "/machines/Name:", "", 4},
		{"index-key-unknown", "GET", "/machines/Bogus:x", "", 4},
		{"index-key-not-unique", "GET", "/machines/Arch:amd64", "", 4},
		{"unicode-name", "GET", "/machines/Name:%D0%BC%D0%B0%D1%88%D0%B8%D0%BD%D0%B0-1", "", 2},
		{"body-null", "POST", "/machines", `null`, 4},
		{"body-list", "POST", "/profiles", `[]`, 4},
		{"body-wrong-type", "POST", "/profiles", `{"Name":"rbp","Params":"str"}`, 4},
		{"body-wrong-nested", "POST", "/machines", `{"Name":"rb9","Fingerprint":{"SSNHash":"!!"}}`, 4},
		{"patch-wrong-type", "PATCH", "/machines/Name:rb1", `[{"op":"replace","path":"/CurrentTask","from":"","value":"x"}]`, 4},
		{"patch-key-change", "PATCH", "/profiles/global", `[{"op":"replace","path":"/Name","from":"","value":"other"}]`, 4},
		{"patch-remove-key", "PATCH", "/machines/Name:rb1", `[{"op":"remove","path":"/Uuid","from":""}]`, 4},
		{"patch-bad-op", "PATCH", "/machines/Name:rb1", `[{"op":"frob","path":"/Name","from":""}]`, 4},
		{"patch-bad-path", "PATCH", "/machines/Name:rb1", `[{"op":"replace","path":"/Nope/x","from":"","value":1}]`, 4},
		{"patch-not-json", "PATCH", "/machines/Name:rb1", `not json`, 4},
		{"patch-move", "PATCH", "/machines/Name:rb1", `[{"op":"copy","path":"/Description","from":"/Name"},{"op":"move","path":"/OS","from":"/Description"}]`, 2},
		{"params-body-list", "POST", "/machines/Name:rb1/params", `[1,2]`, 4},
		{"param-body-bad", "POST", "/machines/Name:rb1/params/a", `{`, 4},
		{"params-patch-not-object", "PATCH", "/machines/Name:rb1/params", `[{"op":"replace","path":"","value":5}]`, 4},
		{"params-patch-bad", "PATCH", "/machines/Name:rb1/params", `{}`, 4},
		{"param-empty-name", "POST", "/machines/Name:rb1/params/", `1`, 4},
		{"jobs-garbage", "POST", "/jobs", `garbage`, 4},
		{"jobs-machine-not-uuid", "POST", "/jobs", `{"Machine":"Name:rb1"}`, 2},
		{"jobs-bad-state", "POST", "/jobs", `{"Machine":"nope","State":"fred"}`, 4},
		{"meta-patch-bad", "PATCH", "/meta/machines/Name:rb1", `{}`, 4},
		{"meta-patch-non-string", "PATCH", "/meta/machines/Name:rb1", `[{"op":"add","path":"/n","value":5}]`, 4},
		{"long-poll-missing", "GET", "/machines/Name:nope", "", 4},
		{"events-bad", "POST", "/events", `[]`, 4},
		{"prefs-bad", "POST", "/prefs", `{"knownTokenTimeout":5}`, 4},
		{"put-not-object", "PUT", "/profiles/global", `[]`, 4},
		{"put-bad-type", "PUT", "/profiles/global", `{"Name":"global","Profiles":"x"}`, 4},
		{"create-job-via-put", "PUT", "/jobs/0b3a1c7e-1111-4222-8333-444455556666", `{}`, 4},
		{"method-not-routed", "PATCH", "/info", `[]`, 4},
		{"delete-prefs", "DELETE", "/prefs", "", 4},
		{"too-large", "POST", "/profiles", `{"Name":"big","Description":"` + strings.Repeat("x", 5<<20) + `"}`, 4},
		{"deep-json", "POST", "/profiles", `{"Name":"deep","Params":{"a":` + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + `}}`, 4},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var b any
			if c.body != "" {
				b = c.body
			}
			var r resp
			if len(c.body) > 1<<20 {
				// Over the body limit: declared, not sent (doLarge), so the
				// 413 never races a connection reset against the write.
				r = doLarge(t, s, c.method, c.path, admin(), len(c.body))
			} else {
				r = obCall(t, s, c.method, c.path, b)
			}
			if r.Status/100 != c.class {
				t.Fatalf("%s %s: %d %s, want %dxx", c.method, c.path, r.Status, r.Body, c.class)
			}
			if c.class == 4 {
				obWantErr(t, r, r.Status, "*", "*", "*", "")
			}
		})
	}
	t.Run("unique-name", func(t *testing.T) {
		// Name is a unique index of machines (§3.4): a second machine
		// cannot take it, on create or by rename.
		obWantErr(t, obCall(t, s, "POST", "/machines", `{"Name":"rb1"}`), 422, "ValidationError", "machines", "*", "Name rb1 is already in use")
		obWantErr(t, obCall(t, s, "PATCH", "/machines/Name:rb2", `[{"op":"replace","path":"/Name","from":"","value":"rb1"}]`),
			422, "ValidationError", "machines", "*", "Name rb1 is already in use")
		// Names are case-sensitive.
		must(201, "POST", "/machines", `{"Name":"RB1"}`)
	})
	t.Run("slim-case-insensitive", func(t *testing.T) {
		for _, m := range obList(t, must(200, "GET", "/machines?Name=rb1&slim=params,meta", "")) {
			if len(m["Params"].(map[string]any)) != 0 || len(m["Meta"].(map[string]any)) != 0 {
				t.Errorf("slim=params,meta: %v %v", m["Params"], m["Meta"])
			}
		}
		m := obObj(t, must(200, "GET", "/machines/Name:rb1?slim=Params", ""))
		if len(m["Params"].(map[string]any)) != 0 || m["Partial"] != true {
			t.Errorf("GET one slim=Params: %v Partial %v", m["Params"], m["Partial"])
		}
	})
	t.Run("ip-order", func(t *testing.T) {
		// Addresses compare as addresses: 10.0.0.40 > 10.0.0.6 > 10.0.0.5.
		for q, want := range map[string][]string{
			"Address=Gt(10.0.0.6)":                   {"rb2"},
			"Address=Lte(10.0.0.39)":                 {"rb1"},
			"Address=Between(10.0.0.6,10.0.0.255)":   {"rb2"},
			"Address=Eq(10.0.0.5)":                   {"rb1"},
			"Address=In(10.0.0.40,::1)":              {"rb2"},
			"Name=Re(^rb)&sort=Address&reverse=true": {"rb2", "rb1", "rb3", "rb4"},
		} {
			got := obNames(obList(t, must(200, "GET", "/machines?Name=Re(^rb)&sort=Name&"+q, "")))
			if strings.Contains(q, "sort=Address") {
				got = obNames(obList(t, must(200, "GET", "/machines?"+q, "")))
				got = got[:2]
				want = want[:2]
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s: got %v, want %v", q, got, want)
			}
		}
	})
	t.Run("time-order", func(t *testing.T) {
		l := obList(t, must(200, "GET", "/jobs?sort=StartTime", ""))
		var prev time.Time
		for _, j := range l {
			st, err := time.Parse(time.RFC3339Nano, j["StartTime"].(string))
			if err != nil {
				t.Fatal(err)
			}
			if st.Before(prev) {
				t.Errorf("jobs not sorted by StartTime: %v before %v", st, prev)
			}
			prev = st
		}
		if len(l) > 0 {
			first := l[0]["StartTime"].(string)
			n := len(obList(t, must(200, "GET", "/jobs?StartTime=Gte("+url.QueryEscape(first)+")", "")))
			if n != len(l) {
				t.Errorf("StartTime=Gte(first): %d of %d", n, len(l))
			}
		}
	})
	t.Run("secure-via-patch-and-map", func(t *testing.T) {
		r := must(200, "PATCH", "/machines/Name:rb1", `[{"op":"add","path":"/Params/rsec~1p","from":"","value":"patch-plain"}]`)
		if strings.Contains(string(r.Body), "patch-plain") {
			t.Errorf("PATCH reply shows plaintext: %s", r.Body)
		}
		if b := must(200, "GET", "/machines/Name:rb1", "").Body; strings.Contains(string(b), "patch-plain") {
			t.Errorf("stored in plaintext: %s", b)
		}
		if b := must(200, "GET", "/machines/Name:rb1/params/rsec/p?decode=true", "").Body; string(b) != `"patch-plain"` {
			t.Errorf("decoded %s", b)
		}
		r = must(200, "POST", "/machines/Name:rb2/params", `{"rsec/p":"map-plain"}`)
		if strings.Contains(string(r.Body), "map-plain") {
			t.Errorf("POST params reply shows plaintext: %s", r.Body)
		}
		cur := must(200, "GET", "/machines/Name:rb2", "").Body
		m := obObj(t, resp{Body: cur})
		r = must(200, "PUT", "/machines/Name:rb2", string(cur))
		if strings.Contains(string(r.Body), "map-plain") {
			t.Errorf("PUT reply %s", r.Body)
		}
		if b := must(200, "GET", "/machines/Name:rb2/params/rsec/p?decode=true", "").Body; string(b) != `"map-plain"` {
			t.Errorf("after PUT round trip decoded %s", b)
		}
		m["Params"] = map[string]any{"rsec/p": "put-plain"}
		must(200, "PUT", "/machines/Name:rb2", obJsonOf(t, m))
		if b := must(200, "GET", "/machines/Name:rb2", "").Body; strings.Contains(string(b), "put-plain") {
			t.Errorf("PUT stored plaintext: %s", b)
		}
		must(201, "POST", "/profiles", `{"Name":"rsec-prof","Params":{"rsec/p":"prof-plain"}}`)
		if b := must(200, "GET", "/profiles/rsec-prof", "").Body; strings.Contains(string(b), "prof-plain") {
			t.Errorf("profile create stored plaintext: %s", b)
		}
	})
}
