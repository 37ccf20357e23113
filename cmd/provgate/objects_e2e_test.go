package main

import (
	"bytes"
	"encoding/json"
	"fmt"
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

// The object suite speaks as the admin throughout; these are its
// shorthands for the test client (client_test.go), which also checks that
// every reply carries the JSON Content-Type DRP clients require.

// obCall is s.On(t).Do as the admin.
func obCall(t *testing.T, s *tserver, method, path string, body any, hdrs ...string) resp {
	t.Helper()
	return s.On(t).Do(method, path, body, admin(), hdrs...)
}

// obRawCall is obCall for a full URL.
func obRawCall(t *testing.T, s *tserver, u, method string, body any, hdrs ...string) resp {
	t.Helper()
	return s.DoURL(t, method, u, body, admin(), hdrs...)
}

// obMust is s.On(t).Must as the admin.
func obMust(t *testing.T, s *tserver, want int, method, path string, body any, hdrs ...string) resp {
	t.Helper()
	return s.On(t).Must(want, method, path, body, admin(), hdrs...)
}

// obObj decodes a JSON object body.
func obObj(t *testing.T, r resp) map[string]any {
	t.Helper()
	return r.Map(t)
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
	t.Parallel()
	forEachDB(t, func(t *testing.T, s *tserver) {
		t.Run("crud", func(t *testing.T) {
			for _, kc := range obKindCases {
				t.Run(kc.prefix, func(t *testing.T) { testCRUD(t, s.On(t), kc) })
			}
		})
		t.Run("in-use", func(t *testing.T) { testInUse(t, s.On(t)) })
		t.Run("list", func(t *testing.T) { testList(t, s.On(t)) })
		t.Run("long-poll", func(t *testing.T) { testLongPoll(t, s.On(t)) })
		t.Run("params", func(t *testing.T) { testParams(t, s.On(t)) })
		t.Run("meta-indexes", func(t *testing.T) { testMetaIndexes(t, s.On(t)) })
		t.Run("workflow-jobs", func(t *testing.T) { testWorkflowJobs(t, s.On(t)) })
		t.Run("drp-waitfor-machine", func(t *testing.T) { testDRPWaitForMachine(t, s.On(t)) })
		t.Run("misc", func(t *testing.T) { testMisc(t, s.On(t)) })
		t.Run("robust", func(t *testing.T) { testRobust(t, s.On(t)) })
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
		wantDRPError(t, obCall(t, s, "POST", p, obJsonOf(t, created)), 409, "CREATE", "already exists").about(t, kc.prefix, key)
	})
	if !kc.noEmptyKey {
		t.Run("empty-key", func(t *testing.T) {
			wantDRPError(t, obCall(t, s, "POST", p, kc.body("")), 400, "CREATE", "Empty key not allowed").about(t, kc.prefix, "*")
		})
	}
	t.Run("invalid-name", func(t *testing.T) {
		wantDRPError(t, obCall(t, s, "POST", p, kc.body(kc.badKey)), 422, "ValidationError", kc.badMsg).about(t, kc.prefix, "*")
	})
	t.Run("bad-json", func(t *testing.T) {
		wantDRPError(t, obCall(t, s, "POST", p, `{"Name":`), 400, "POST", "")
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
		wantDRPError(t, obCall(t, s, "GET", p+"/missing-object", nil), 404, "GET", "Not Found").about(t, kc.prefix, "missing-object")
		wantDRPError(t, obCall(t, s, "PATCH", p+"/missing-object", `[]`), 404, "PATCH", "Not Found").about(t, kc.prefix, "missing-object")
		wantDRPError(t, obCall(t, s, "PUT", p+"/missing-object", kc.body("missing-object")), 404, "PUT", "Not Found").about(t, kc.prefix, "missing-object")
		wantDRPError(t, obCall(t, s, "DELETE", p+"/missing-object", nil), 404, "DELETE", "Not Found").about(t, kc.prefix, "missing-object")
		// Index keys are resolved before authorization; the 404 is still the request's.
		ik := strings.SplitN(kc.index(created)[0], ":", 2)[0] + ":missing-object"
		for _, m := range []string{"GET", "PATCH", "DELETE"} {
			body := ""
			if m == "PATCH" {
				body = "[]"
			}
			wantDRPError(t, obCall(t, s, m, p+"/"+ik, body), 404, m, "Not Found").about(t, kc.prefix, "*")
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
		wantDRPError(t, obCall(t, s, "PATCH", p+"/"+key,
			`[{"op":"test","path":"/Description","from":"","value":"nope"},{"op":"replace","path":"/Description","from":"","value":"x"}]`),
			409, "PATCH", "").about(t,

			kc.prefix, key)

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
		wantDRPError(t, obCall(t, s, "PATCH", p+"/"+key, whole), 409, "PATCH", "").about(t, kc.prefix, key)
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
		wantDRPError(t, obCall(t, s, "PATCH", p+"/"+key, `{"op":"add"}`), 400, "", "")
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
		wantDRPError(t, obCall(t, s, "PUT", p+"/"+key, m), 400, "", "Key change").about(t, kc.prefix, "*")
	})
	t.Run("delete", func(t *testing.T) {
		r := obMust(t, s, 200, "DELETE", p+"/"+key, nil)
		d := obObj(t, r)
		if d[kc.keyField] != key || d["Description"] != "d3" {
			t.Errorf("deleted object %s", r.Body)
		}
		wantDRPError(t, obCall(t, s, "GET", p+"/"+key, nil), 404, "GET", "Not Found").about(t, kc.prefix, key)
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
			wantDRPError(t, obCall(t, s, "DELETE", c.path, nil), 409, "StillInUseError", c.msg).about(t, c.prefix, c.key)
		})
	}
	t.Run("locked-machine", func(t *testing.T) {
		obMust(t, s, 200, "PATCH", "/machines/"+m["Uuid"].(string), `[{"op":"replace","path":"/Locked","from":"","value":true}]`)
		wantDRPError(t, obCall(t, s, "DELETE", "/machines/"+m["Uuid"].(string), nil), 409, "DELETE", "Locked").about(t, "machines", "*")
		obMust(t, s, 200, "PATCH", "/machines/"+m["Uuid"].(string), `[{"op":"replace","path":"/Locked","from":"","value":false}]`)
		obMust(t, s, 200, "DELETE", "/machines/Name:iu-m1", nil)
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
		wantDRPError(t, obCall(t, s, "POST", "/prefs", `{"bogusPref":"1"}`), 422, "ValidationError", "bogusPref")
		wantDRPError(t, obCall(t, s, "POST", "/prefs", `{"knownTokenTimeout":"soon"}`), 422, "ValidationError", "knownTokenTimeout")
	})
	t.Run("events", func(t *testing.T) {
		r := obCall(t, s, "POST", "/events", `{"Type":"machines","Action":"test","Key":"x","Object":{"a":1}}`)
		if r.Status < 200 || r.Status > 299 {
			t.Fatalf("POST /events %d %s", r.Status, r.Body)
		}
		wantDRPError(t, obCall(t, s, "POST", "/events", `{}`), 400, "POST", "").about(t, "events", "*")
	})
	t.Run("plugin-providers", func(t *testing.T) {
		l := obList(t, obMust(t, s, 200, "GET", "/plugin_providers", nil))
		if !slices.Contains(obNames(l), "callback") {
			t.Errorf("providers %v", obNames(l))
		}
		obMust(t, s, 200, "GET", "/plugin_providers/callback", nil)
		obMust(t, s, 200, "HEAD", "/plugin_providers/callback", nil)
		wantDRPError(t, obCall(t, s, "GET", "/plugin_providers/nope", nil), 404, "GET", "Not Found").about(t, "plugin_providers", "nope")
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
		s := s.On(t)
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
		wantDRPError(t, s.Do("GET", "/objects", nil, basic("objects-nobody", "objects-pw")), 403, "AUTH", "objects list")
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
		wantDRPError(t, obCall(t, s, "PATCH", "/bootenvs/local", `[{"op":"replace","path":"/Description","from":"","value":"x"}]`),
			400, "PATCH", "readonly: local").about(t,
			"bootenvs", "local")

		wantDRPError(t, obCall(t, s, "PUT", "/bootenvs/ignore", `{"Name":"ignore","OnlyUnknown":false}`), 400, "PUT", "readonly: ignore").about(t, "bootenvs", "ignore")
		wantDRPError(t, obCall(t, s, "DELETE", "/bootenvs/local", nil), 400, "DELETE", "readonly: local").about(t, "bootenvs", "local")
		wantDRPError(t, obCall(t, s, "PATCH", "/meta/bootenvs/local", `[{"op":"add","path":"/x","from":"","value":"y"}]`),
			400, "PATCH", "readonly: local").about(t,
			"bootenvs", "local")

		obMust(t, s, 200, "GET", "/bootenvs/local", nil)
		// Machines and stages name them as on DRP.
		obMust(t, s, 201, "POST", "/stages", `{"Name":"bi-stage","BootEnv":"local"}`)
		m := obObj(t, obMust(t, s, 201, "POST", "/machines", `{"Name":"bi-m1","BootEnv":"local","Stage":"bi-stage"}`))
		wantDRPError(t, obCall(t, s, "PATCH", "/machines/"+m["Uuid"].(string), `[{"op":"replace","path":"/BootEnv","from":"","value":"ignore"}]`),
			422, "ValidationError", "BootEnv ignore does not allow Machine assignments, it has the OnlyUnknown flag.").about(t,
			"machines", "*")

		// A client cannot make an object read-only.
		b := obObj(t, obMust(t, s, 201, "POST", "/bootenvs", `{"Name":"bi-ro","ReadOnly":true}`))
		if b["ReadOnly"] != false {
			t.Errorf("client-made bootenv ReadOnly %v", b["ReadOnly"])
		}
		obMust(t, s, 200, "DELETE", "/bootenvs/bi-ro", nil)
	})
	t.Run("no-route", func(t *testing.T) {
		wantDRPError(t, obCall(t, s, "GET", "/john", nil), 404, "GET", "No route")
		wantDRPError(t, obCall(t, s, "GET", "/john/x", nil), 404, "GET", "No route")
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
				wantDRPError(t, r, r.Status, "", "")
			}
		})
	}
	t.Run("unique-name", func(t *testing.T) {
		// Name is a unique index of machines (§3.4): a second machine
		// cannot take it, on create or by rename.
		wantDRPError(t, obCall(t, s, "POST", "/machines", `{"Name":"rb1"}`), 422, "ValidationError", "Name rb1 is already in use").about(t, "machines", "*")
		wantDRPError(t, obCall(t, s, "PATCH", "/machines/Name:rb2", `[{"op":"replace","path":"/Name","from":"","value":"rb1"}]`),
			422, "ValidationError", "Name rb1 is already in use").about(t,
			"machines", "*")

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
