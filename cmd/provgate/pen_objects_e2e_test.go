package main

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/provgate/provgate/backend/store"
)

// TestE2EPenObjects replays the object findings of the penetration test
// through the real server: each subtest sends the attacker's requests and
// expects the refusal, on SQLite and PostgreSQL.
func TestE2EPenObjects(t *testing.T) {
	t.Parallel()
	args := append(licenseArgs(t), receiverArgs...)
	forEachDB(t, func(t *testing.T, s *tserver) {
		p := penSetup(t, s)
		// A value sealed by the first version (bound to its param name
		// only) is planted while the server is down; the restarted server
		// must re-seal it to its object (checked in finding 4).
		old := penPlantFirstFormSeal(t, s, p)
		s = startE2EIn(t, dbCase{Name: s.Name, DSN: s.DSN}, s.DataDir, args...)
		t.Run("finding_2_hidden_references", func(t *testing.T) { penHiddenReferences(t, s.On(t), p) })
		t.Run("finding_4_sealed_values_stay_bound", func(t *testing.T) {
			penSealedValues(t, s.On(t), p)
			penMigrated(t, s.On(t), p, old)
		})
		t.Run("finding_5_jobs_stay_on_their_machine", func(t *testing.T) { penJobs(t, s.On(t), p) })
		t.Run("finding_16_messages_name_only_visible_objects", func(t *testing.T) { penMessages(t, s.On(t), p) })
	}, args...)
}

// penPlantFirstFormSeal stops s and stores, on the hidden machine, the
// param pen/old sealed as the first version sealed it: AES-256-GCM under the
// server's key with the param name as additional data and the bare key id
// as Key. It also clears the setting that records the migration, as a store
// written by that version has it. It returns the envelope.
func penPlantFirstFormSeal(t *testing.T, s *tserver, p penFixture) map[string]any {
	t.Helper()
	s.Must(201, "POST", "/params", map[string]any{"Name": "pen/old", "Secure": true}, admin())
	s.Stop()
	dsn := s.DSN
	if dsn == "" {
		dsn = filepath.Join(s.DataDir, "provgate.db")
	}
	ctx := context.Background()
	st, err := store.Open(ctx, dsn, store.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	k64, _, err := st.GetSetting(ctx, "secure_param_key")
	key, derr := base64.StdEncoding.DecodeString(k64)
	if err != nil || derr != nil || len(key) != 32 {
		t.Fatalf("secure key setting: %v %v", err, derr)
	}
	blk, _ := aes.NewCipher(key)
	gcm, _ := cipher.NewGCM(blk)
	nonce := make([]byte, gcm.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(append([]byte("provgate secure params key id\x00"), key...))
	env := map[string]any{
		"Key":     base64.RawURLEncoding.EncodeToString(sum[:9]),
		"Nonce":   base64.StdEncoding.EncodeToString(nonce),
		"Payload": base64.StdEncoding.EncodeToString(gcm.Seal(nil, nonce, []byte(`"old-secret"`), []byte("pen/old"))),
	}
	rec, err := st.Get(ctx, "machines", p.victim)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(rec.Data, &m); err != nil {
		t.Fatal(err)
	}
	m["Params"].(map[string]any)["pen/old"] = env
	data, _ := json.Marshal(m)
	if _, err := st.Update(ctx, "machines", p.victim, rec.Rev, data); err != nil {
		t.Fatal(err)
	}
	if err := st.SetSetting(ctx, "secure_param_seal", ""); err != nil {
		t.Fatal(err)
	}
	return env
}

// penMigrated checks the planted value was re-sealed at start-up, still
// decodes, and that its first form is refused from clients.
func penMigrated(t *testing.T, s *tserver, p penFixture, old map[string]any) {
	t.Run("first_form_seals_migrated_at_start", func(t *testing.T) {
		s := s.On(t)
		env := penEnvelope(t, s, "/machines/"+p.victim, "pen/old")
		if k, _ := env["Key"].(string); !strings.HasPrefix(k, "v2.") || env["Payload"] == old["Payload"] {
			t.Fatalf("pen/old not re-sealed: %v", env)
		}
		if r := s.Must(200, "GET", "/machines/"+p.victim+"/params/pen/old?decode=true", nil, admin()); string(r.Body) != `"old-secret"` {
			t.Fatalf("migrated value decodes to %s", r.Body)
		}
		for _, target := range []string{p.victim, p.visible} {
			r := s.Do("POST", "/machines/"+target+"/params/pen/old", old, admin())
			wantDRPError(t, r, 422, "ValidationError", "")
		}
	})
}

// penFixture is what the tests share: a tenant user who sees a few objects
// of each kind, and objects its tenant hides.
type penFixture struct {
	user    string // Basic credentials of the tenant user
	victim  string // Uuid of a machine the tenant hides
	visible string // Uuid of a machine the tenant user made
}

const penSecret = "hunter2-pen-secret"

func penSetup(t *testing.T, s *tserver) penFixture {
	t.Helper()
	s.Must(201, "POST", "/params", map[string]any{"Name": "pen/token", "Secure": true, "Schema": map[string]any{"type": "string"}}, admin())
	s.Must(201, "POST", "/params", map[string]any{"Name": "pen/hidden-int", "Secure": true, "Schema": map[string]any{"type": "integer"}}, admin())
	for _, n := range []string{"pen-task-open", "pen-task-hidden"} {
		s.Must(201, "POST", "/tasks", map[string]any{"Name": n}, admin())
	}
	for _, n := range []string{"pen-benv-open", "pen-benv-hidden"} {
		s.Must(201, "POST", "/bootenvs", map[string]any{"Name": n}, admin())
	}
	s.Must(201, "POST", "/profiles", map[string]any{"Name": "pen-secret", "Params": map[string]any{"pen/token": penSecret}}, admin())
	s.Must(201, "POST", "/profiles", map[string]any{"Name": "pen-open", "Params": map[string]any{"pen/token": "open-value"}}, admin())
	s.Must(201, "POST", "/stages", map[string]any{"Name": "pen-stage-open", "Tasks": []string{"pen-task-open"}}, admin())
	s.Must(201, "POST", "/stages", map[string]any{"Name": "pen-stage-hidden", "Profiles": []string{"pen-secret"},
		"Params": map[string]any{"pen/token": "stage-value"}}, admin())
	s.Must(201, "POST", "/workflows", map[string]any{"Name": "pen-wf", "Stages": []string{"pen-stage-open"}}, admin())
	s.Must(201, "POST", "/workflows", map[string]any{"Name": "pen-wf-hidden", "Stages": []string{"pen-stage-open"}}, admin())
	s.Must(201, "POST", "/pools", map[string]any{"Id": "pen-pool"}, admin())
	s.Must(201, "POST", "/pools", map[string]any{"Id": "pen-pool-hidden"}, admin())
	victim := s.AddMachine("pen-victim", map[string]any{"Pool": "pen-pool-hidden", "Params": map[string]any{"pen/token": "victim-value"}})

	s.AddRole("pen-role",
		[3]string{"machines", "*", "*"},
		[3]string{"jobs", "*", "*"},
		[3]string{"profiles,stages,workflows,tasks,bootenvs,params,pools", "*", "*"},
		[3]string{"plugins", "get,list", "*"})
	s.AddUser("pen-u", "pen-u-pw", "pen-role")
	s.Must(201, "POST", "/tenants", map[string]any{"Name": "pen-t", "Users": []string{"pen-u"},
		"Members": map[string][]string{
			"machines":  {},
			"profiles":  {"pen-open"},
			"stages":    {"pen-stage-open"},
			"tasks":     {"pen-task-open"},
			"workflows": {"pen-wf"},
			"bootenvs":  {"pen-benv-open", "local"},
			"pools":     {"pen-pool"},
			"params":    {"pen/token"},
		}}, admin())
	u := basic("pen-u", "pen-u-pw")
	var m struct{ Uuid string }
	s.Must(201, "POST", "/machines", map[string]any{"Name": "pen-mine"}, u).JSON(t, &m)
	s.Must(404, "GET", "/machines/"+victim, nil, u)
	s.Must(404, "GET", "/profiles/pen-secret", nil, u)
	return penFixture{user: u, victim: victim, visible: m.Uuid}
}

// penSameRefusal checks that naming a hidden object (hidden) is answered
// exactly as naming one that does not exist (missing): same status, same
// error Type, same messages once the two names are swapped.
func penSameRefusal(t *testing.T, hidden, missing resp, hiddenName, missingName string) {
	t.Helper()
	if hidden.Status != 422 || missing.Status != 422 {
		t.Fatalf("hidden %s, missing %s: want both 422", hidden, missing)
	}
	h, m := wantDRPError(t, hidden, 422, "ValidationError", ""), wantDRPError(t, missing, 422, "ValidationError", "")
	if h.Type != "ValidationError" || h.Type != m.Type || h.Model != m.Model {
		t.Fatalf("hidden %s and missing %s differ in Type or Model", hidden, missing)
	}
	want := strings.ReplaceAll(strings.Join(m.Messages, "\n"), missingName, hiddenName)
	if got := strings.Join(h.Messages, "\n"); got != want {
		t.Fatalf("hidden reference answered %q, a missing one %q", got, want)
	}
	if !strings.Contains(want, hiddenName) {
		t.Fatalf("the refusal does not name the reference: %q", want)
	}
}

func penHiddenReferences(t *testing.T, s *tserver, p penFixture) {
	mine := "/machines/" + p.visible
	patch := func(path string, v any) resp { return s.Do("PATCH", mine, jsonPatch("replace", path, v), p.user) }
	// Creating a machine names references too: every kind gives the same
	// answer for a hidden object and a missing one. A fixed Uuid keeps the
	// messages' key prefix equal.
	create := func(field string, v any) resp {
		return s.Do("POST", "/machines", map[string]any{"Name": "pen-new", "Uuid": "6f2f1b1e-0000-4000-8000-000000000077", field: v}, p.user)
	}
	refs := []struct {
		field          string
		hidden, absent any
		hName, aName   string
	}{
		{"/Profiles", []string{"pen-open", "pen-secret"}, []string{"pen-open", "pen-nothing"}, "pen-secret", "pen-nothing"},
		{"/Stage", "pen-stage-hidden", "pen-nostage", "pen-stage-hidden", "pen-nostage"},
		{"/BootEnv", "pen-benv-hidden", "pen-nobenv", "pen-benv-hidden", "pen-nobenv"},
		{"/Workflow", "pen-wf-hidden", "pen-nowf", "pen-wf-hidden", "pen-nowf"},
		{"/Tasks", []string{"pen-task-open", "pen-task-hidden"}, []string{"pen-task-open", "pen-notask"}, "pen-task-hidden", "pen-notask"},
		{"/Pool", "pen-pool-hidden", "pen-nopool", "pen-pool-hidden", "pen-nopool"},
	}
	for _, r := range refs {
		t.Run("machine"+strings.ReplaceAll(r.field, "/", "_"), func(t *testing.T) {
			penSameRefusal(t, patch(r.field, r.hidden), patch(r.field, r.absent), r.hName, r.aName)
			f := strings.TrimPrefix(r.field, "/")
			penSameRefusal(t, create(f, r.hidden), create(f, r.absent), r.hName, r.aName)
		})
	}
	t.Run("machine_visible_references_are_fine", func(t *testing.T) {
		s := s.On(t)
		s.Must(200, "PATCH", mine, []map[string]any{
			{"op": "replace", "path": "/Profiles", "value": []string{"pen-open"}},
			{"op": "replace", "path": "/Stage", "value": "pen-stage-open"},
			{"op": "replace", "path": "/BootEnv", "value": "pen-benv-open"},
			{"op": "replace", "path": "/Pool", "value": "pen-pool"},
		}, p.user)
		s.Must(200, "PATCH", mine, jsonPatch("replace", "/Pool", "default"), p.user)
		s.Must(200, "PATCH", mine, jsonPatch("replace", "/Workflow", "pen-wf"), p.user)
		s.Must(200, "PATCH", mine, jsonPatch("replace", "/Workflow", ""), p.user)
	})
	t.Run("pool_operation_body", func(t *testing.T) {
		s := s.On(t)
		// A pool operation on its own machine adds only what the caller
		// may see.
		op := func(v map[string]any) resp {
			b := map[string]any{"pool/machine-list": []string{p.visible}}
			for k, x := range v {
				b[k] = x
			}
			return s.Do("POST", "/pools/pen-pool/addMachines", b, p.user)
		}
		penSameRefusal(t, op(map[string]any{"pool/add-profiles": []string{"pen-secret"}}),
			op(map[string]any{"pool/add-profiles": []string{"pen-noprof"}}), "pen-secret", "pen-noprof")
		penSameRefusal(t, op(map[string]any{"pool/workflow": "pen-wf-hidden"}),
			op(map[string]any{"pool/workflow": "pen-nowf"}), "pen-wf-hidden", "pen-nowf")
		var m struct{ Pool string }
		s.Must(200, "GET", mine, nil, p.user).JSON(t, &m)
		if m.Pool != "default" {
			t.Fatalf("refused operations moved the machine to %s", m.Pool)
		}
	})
	t.Run("aggregate_shows_no_hidden_profile", func(t *testing.T) {
		s := s.On(t)
		for _, q := range []string{"/params?aggregate=true&decode=true", "?aggregate=true&decode=true"} {
			if r := s.Must(200, "GET", mine+q, nil, p.user); strings.Contains(string(r.Body), penSecret) {
				t.Fatalf("GET %s shows the hidden profile's secret: %s", q, r.Body)
			}
		}
	})
	t.Run("stage_workflow_profile_references", func(t *testing.T) {
		s := s.On(t)
		mk := func(prefix string, body map[string]any) resp { return s.Do("POST", "/"+prefix, body, p.user) }
		penSameRefusal(t,
			mk("stages", map[string]any{"Name": "pen-s1", "Profiles": []string{"pen-secret"}}),
			mk("stages", map[string]any{"Name": "pen-s1", "Profiles": []string{"pen-noprof"}}), "pen-secret", "pen-noprof")
		penSameRefusal(t,
			mk("stages", map[string]any{"Name": "pen-s1", "Tasks": []string{"pen-task-hidden"}}),
			mk("stages", map[string]any{"Name": "pen-s1", "Tasks": []string{"pen-notask"}}), "pen-task-hidden", "pen-notask")
		penSameRefusal(t,
			mk("stages", map[string]any{"Name": "pen-s1", "BootEnv": "pen-benv-hidden"}),
			mk("stages", map[string]any{"Name": "pen-s1", "BootEnv": "pen-nobenv"}), "pen-benv-hidden", "pen-nobenv")
		penSameRefusal(t,
			mk("workflows", map[string]any{"Name": "pen-w1", "Stages": []string{"pen-stage-hidden"}}),
			mk("workflows", map[string]any{"Name": "pen-w1", "Stages": []string{"pen-nostage"}}), "pen-stage-hidden", "pen-nostage")
		penSameRefusal(t,
			mk("profiles", map[string]any{"Name": "pen-p1", "Profiles": []string{"pen-secret"}}),
			mk("profiles", map[string]any{"Name": "pen-p1", "Profiles": []string{"pen-noprof"}}), "pen-secret", "pen-noprof")
		// And on update: the tenant user's own profile cannot nest a hidden one.
		s.Must(201, "POST", "/profiles", map[string]any{"Name": "pen-p2"}, p.user)
		penSameRefusal(t,
			s.Do("PATCH", "/profiles/pen-p2", jsonPatch("replace", "/Profiles", []string{"pen-secret"}), p.user),
			s.Do("PATCH", "/profiles/pen-p2", jsonPatch("replace", "/Profiles", []string{"pen-noprof"}), p.user), "pen-secret", "pen-noprof")
		s.Must(200, "PATCH", "/profiles/pen-p2", jsonPatch("replace", "/Profiles", []string{"pen-open"}), p.user)
	})
	t.Run("hidden_param_definition_is_absent", func(t *testing.T) {
		s := s.On(t)
		// pen/hidden-int is a secure integer param the tenant hides: its
		// value is neither checked nor sealed, exactly like a param with no
		// definition, so the reply reveals nothing about it.
		hidden := s.Must(200, "POST", mine+"/params/pen/hidden-int", `"not-an-int"`, p.user)
		absent := s.Must(200, "POST", mine+"/params/pen/no-definition", `"not-an-int"`, p.user)
		if string(hidden.Body) != `"not-an-int"` || string(hidden.Body) != string(absent.Body) {
			t.Fatalf("hidden definition %s, absent one %s", hidden.Body, absent.Body)
		}
		// A visible secure definition still seals.
		r := s.Must(200, "POST", mine+"/params/pen/token", `"mine"`, p.user)
		if strings.Contains(string(r.Body), "mine") {
			t.Fatalf("visible secure param stored in the clear: %s", r.Body)
		}
	})
	t.Run("admin_reference_does_not_block_the_owner", func(t *testing.T) {
		s := s.On(t)
		s.Must(200, "PATCH", mine, jsonPatch("replace", "/Profiles", []string{"pen-open", "pen-secret"}), admin())
		s.Must(200, "PATCH", mine, jsonPatch("replace", "/Description", "still mine"), p.user)
		// Removing it is a change the owner may make; adding it back is not.
		s.Must(200, "PATCH", mine, jsonPatch("replace", "/Profiles", []string{"pen-open"}), p.user)
		s.Must(422, "PATCH", mine, jsonPatch("replace", "/Profiles", []string{"pen-open", "pen-secret"}), p.user)
	})
}

// penEnvelope returns the stored (sealed) value of a param, as GET shows it.
func penEnvelope(t *testing.T, s *tserver, path, param string) map[string]any {
	t.Helper()
	var params map[string]any
	s.Must(200, "GET", path+"/params", nil, admin()).JSON(t, &params)
	env, ok := params[param].(map[string]any)
	if !ok || env["Payload"] == nil {
		t.Fatalf("%s %s is not sealed: %v", path, param, params[param])
	}
	return env
}

func penSealedValues(t *testing.T, s *tserver, p penFixture) {
	mine := "/machines/" + p.visible
	mkPlugin(t, s, "pen-cb", map[string]any{"a": map[string]any{"Url": "http://127.0.0.1:9/x", "Auth": "basic-a"}},
		map[string]any{"basic-a": map[string]any{"AuthType": "basic", "Username": "svc", "Password": "plugin-password"}})
	sources := []struct{ name, path, param, clear string }{
		{"machine", "/machines/" + p.victim, "pen/token", "victim-value"},
		{"profile", "/profiles/pen-open", "pen/token", "open-value"},
		{"stage", "/stages/pen-stage-hidden", "pen/token", "stage-value"},
		{"plugin", "/plugins/pen-cb", "callback/auths", "plugin-password"},
	}
	for _, src := range sources {
		t.Run("copied_from_"+src.name, func(t *testing.T) {
			s := s.On(t)
			env := penEnvelope(t, s, src.path, src.param)
			for _, who := range []struct{ name, authz string }{{"tenant_user", p.user}, {"admin", admin()}} {
				r := s.Do("POST", mine+"/params/"+src.param, env, who.authz)
				if r.Status != 422 {
					t.Fatalf("%s wrote a %s envelope onto its machine: %s", who.name, src.name, r)
				}
				e := wantDRPError(t, r, r.Status, "", "")
				all := strings.Join(e.Messages, " ")
				for _, leak := range []string{p.victim, "pen-victim", "pen-open", "pen-stage-hidden", "pen-cb", src.clear} {
					if strings.Contains(all, leak) {
						t.Fatalf("refusal names where the envelope came from (%s): %s", leak, r)
					}
				}
				// Whole-object writes are held to the same rule.
				var m map[string]any
				s.Must(200, "GET", mine, nil, admin()).JSON(t, &m)
				m["Params"].(map[string]any)[src.param] = env
				if r := s.Do("PUT", mine, m, who.authz); r.Status != 422 {
					t.Fatalf("PUT with a %s envelope: %s", src.name, r)
				}
			}
			if r := s.Must(200, "GET", mine+"?decode=true&aggregate=true", nil, admin()); strings.Contains(string(r.Body), src.clear) {
				t.Fatalf("the %s secret opened on another machine: %s", src.name, r.Body)
			}
		})
	}
	t.Run("round_trip_and_aggregate_still_decode", func(t *testing.T) {
		s := s.On(t)
		s.Must(200, "POST", mine+"/params/pen/token", `"mine-again"`, p.user)
		var m map[string]any
		s.Must(200, "GET", mine, nil, p.user).JSON(t, &m)
		s.Must(200, "PUT", mine, m, p.user)
		if r := s.Must(200, "GET", mine+"/params/pen/token?decode=true", nil, p.user); string(r.Body) != `"mine-again"` {
			t.Fatalf("own value after a round trip: %s", r.Body)
		}
		// Each aggregated value opens with its own object's binding.
		s.Must(200, "DELETE", mine+"/params/pen/token", nil, p.user)
		s.Must(200, "PATCH", mine, jsonPatch("replace", "/Profiles", []string{"pen-open"}), p.user)
		if r := s.Must(200, "GET", mine+"/params/pen/token?aggregate=true&decode=true", nil, p.user); string(r.Body) != `"open-value"` {
			t.Fatalf("aggregated profile value: %s", r.Body)
		}
		s.Must(200, "PATCH", mine, jsonPatch("replace", "/Profiles", []string{}), p.user)
	})
}

func penJobs(t *testing.T, s *tserver, p penFixture) {
	rc := newReceiver(t)
	mkPlugin(t, s, "pen-jobfail", map[string]any{"jobfail": map[string]any{"Url": rc.URL + "/jobfail", "Decode": true}}, nil)
	mkWorkflow(t, s, "pen-jwf", "pen-jtask")
	s.Must(200, "PATCH", "/tenants/pen-t", jsonPatch("add", "/Members/workflows/-", "pen-jwf"), admin())
	var own struct{ Uuid string }
	s.Must(201, "POST", "/machines", map[string]any{"Name": "pen-jobs-mine", "Workflow": "pen-jwf"}, p.user).JSON(t, &own)
	other := s.AddMachine("pen-jobs-other", map[string]any{"Workflow": "pen-jwf"})
	ownJob := ""
	for i := 0; i < 5 && ownJob == ""; i++ {
		if r := s.Do("POST", "/jobs", map[string]any{"Machine": own.Uuid}, p.user); r.Status == 201 {
			ownJob = r.Map(t)["Uuid"].(string)
		}
	}
	if ownJob == "" {
		t.Fatal("no job for the tenant user's machine")
	}
	job := "/jobs/" + ownJob
	t.Run("machine_is_immutable", func(t *testing.T) {
		s := s.On(t)
		for _, who := range []struct{ name, authz string }{{"tenant_user", p.user}, {"admin", admin()}} {
			for _, target := range []string{other, p.victim} {
				r := s.Do("PATCH", job, []map[string]any{
					{"op": "replace", "path": "/Machine", "value": target},
					{"op": "replace", "path": "/State", "value": "failed"},
				}, who.authz)
				wantDRPError(t, r, 422, "ValidationError", "")
				var j map[string]any
				s.Must(200, "GET", job, nil, admin()).JSON(t, &j)
				j["Machine"] = target
				wantDRPError(t, s.Do("PUT", job, j, who.authz), 422, "ValidationError", "")
			}
		}
		var j struct{ Machine, State string }
		s.Must(200, "GET", job, nil, admin()).JSON(t, &j)
		if j.Machine != own.Uuid || j.State != "created" {
			t.Fatalf("job after refused moves: %+v", j)
		}
		for _, u := range []string{other, p.victim} {
			var m struct{ Runnable bool }
			s.Must(200, "GET", "/machines/"+u, nil, admin()).JSON(t, &m)
			if !m.Runnable {
				t.Fatalf("machine %s made unrunnable by a refused job move", u)
			}
		}
		// The Uuid is the job's key: changing it is DRP's key-change refusal.
		if r := s.Do("PATCH", job, jsonPatch("replace", "/Uuid", "0b3a1c7e-1111-4222-8333-444455556666"), admin()); r.Status != 400 {
			t.Fatalf("Uuid change: %s", r)
		}
	})
	t.Run("jobfail_goes_only_to_the_own_machine", func(t *testing.T) {
		s := s.On(t)
		s.Must(200, "PATCH", job, jsonPatch("replace", "/State", "running"), p.user)
		s.Must(200, "PATCH", job, jsonPatch("replace", "/State", "failed"), p.user)
		rc.waitFor(t, "/jobfail", 1, 15*time.Second)
		s.WorkerRounds(t)
		hits := rc.on("/jobfail")
		if len(hits) != 1 {
			t.Fatalf("jobfail sent %d times, want 1", len(hits))
		}
		var m struct{ Uuid string }
		if err := json.Unmarshal(hits[0].Body, &m); err != nil || m.Uuid != own.Uuid {
			t.Fatalf("jobfail sent machine %q (%v), want %s", m.Uuid, err, own.Uuid)
		}
		for _, leak := range []string{"victim-value", penSecret} {
			if strings.Contains(string(hits[0].Body), leak) {
				t.Fatalf("jobfail body carries %s", leak)
			}
		}
	})
	t.Run("writes_are_authorized_by_the_job_machine", func(t *testing.T) {
		s := s.On(t)
		// A user whose job rights name one machine acts on that machine's
		// jobs only, whatever the route.
		mine := s.AddMachine("pen-jobs-a", map[string]any{"Workflow": "pen-jwf"})
		theirs := s.AddMachine("pen-jobs-b", map[string]any{"Workflow": "pen-jwf"})
		s.AddRole("pen-jobs-role", [3]string{"jobs", "*", mine}, [3]string{"machines", "get,list", "*"})
		s.AddUser("pen-j", "pen-j-pw", "pen-jobs-role")
		j := basic("pen-j", "pen-j-pw")
		mineJob := nextTaskJob(t, s, mine)["Uuid"].(string)
		theirJob := nextTaskJob(t, s, theirs)["Uuid"].(string)
		type call struct {
			method, path string
			body         any
			hdrs         []string
		}
		calls := func(id string) []call {
			var cur map[string]any
			s.Must(200, "GET", "/jobs/"+id, nil, admin()).JSON(t, &cur)
			cur["ExitState"] = "stop"
			return []call{
				{"GET", "/jobs/" + id, nil, nil},
				{"PATCH", "/jobs/" + id, jsonPatch("replace", "/ExitState", "complete"), nil},
				{"PUT", "/jobs/" + id, cur, nil},
				{"PUT", "/jobs/" + id + "/log", "log line\n", []string{"Content-Type", "application/octet-stream"}},
				{"GET", "/jobs/" + id + "/log", nil, nil},
				{"GET", "/jobs/" + id + "/actions", nil, nil},
				{"PATCH", "/meta/jobs/" + id, jsonPatch("add", "/color", "red"), nil},
			}
		}
		for _, c := range calls(theirJob) {
			if r := s.Do(c.method, c.path, c.body, j, c.hdrs...); r.Status != 403 {
				t.Fatalf("%s %s on another machine's job: %s, want 403", c.method, c.path, r)
			}
		}
		if r := s.Do("DELETE", "/jobs/"+theirJob, nil, j); r.Status != 403 {
			t.Fatalf("DELETE another machine's job: %s", r)
		}
		for _, c := range calls(mineJob) {
			if r := s.Do(c.method, c.path, c.body, j, c.hdrs...); r.Status >= 300 {
				t.Fatalf("%s %s on its own machine's job: %s", c.method, c.path, r)
			}
		}
		// Moving its own job to the other machine is refused as for anyone.
		if r := s.Do("PATCH", "/jobs/"+mineJob, jsonPatch("replace", "/Machine", theirs), j); r.Status != 422 {
			t.Fatalf("move to another machine: %s", r)
		}
	})
}

func penMessages(t *testing.T, s *tserver, p penFixture) {
	t.Run("name_in_use", func(t *testing.T) {
		s := s.On(t)
		r := s.Do("POST", "/machines", map[string]any{"Name": "pen-victim"}, p.user)
		if r.Status != 422 {
			t.Fatalf("duplicate name: %s", r)
		}
		if strings.Contains(string(r.Body), p.victim) {
			t.Fatalf("the refusal names a hidden machine: %s", r)
		}
		wantDRPError(t, r, r.Status, "", "Name pen-victim is already in use")
		// The admin sees the machine and is told which one it is.
		wantDRPError(t, s.Do("POST", "/machines", map[string]any{"Name": "pen-victim"}, admin()), 422, "", p.victim)
		// A rename onto a hidden machine's name is answered the same way.
		r = s.Do("PATCH", "/machines/"+p.visible, jsonPatch("replace", "/Name", "pen-victim"), p.user)
		if r.Status != 422 || strings.Contains(string(r.Body), p.victim) {
			t.Fatalf("rename: %s", r)
		}
	})
	t.Run("in_use", func(t *testing.T) {
		s := s.On(t)
		s.Must(201, "POST", "/profiles", map[string]any{"Name": "pen-shared"}, p.user)
		s.Must(200, "PATCH", "/machines/"+p.victim, jsonPatch("replace", "/Profiles", []string{"pen-shared"}), admin())
		s.Must(200, "PATCH", "/machines/"+p.visible, jsonPatch("replace", "/Profiles", []string{"pen-shared"}), p.user)
		r := s.Do("DELETE", "/profiles/pen-shared", nil, p.user)
		wantDRPError(t, r, 409, "StillInUseError", "")
		for _, leak := range []string{"pen-victim", p.victim} {
			if strings.Contains(string(r.Body), leak) {
				t.Fatalf("the refusal names a hidden machine: %s", r)
			}
		}
		wantDRPError(t, r, r.Status, "", "In use by Machine pen-mine")
		wantDRPError(t, r, r.Status, "", "In use by 1 other object")
		// The admin sees both.
		r = s.Do("DELETE", "/profiles/pen-shared", nil, admin())
		wantDRPError(t, r, 409, "", "In use by Machine pen-victim")
		wantDRPError(t, r, 409, "", "In use by Machine pen-mine")
		s.Must(200, "PATCH", "/machines/"+p.victim, jsonPatch("replace", "/Profiles", []string{}), admin())
		s.Must(200, "PATCH", "/machines/"+p.visible, jsonPatch("replace", "/Profiles", []string{}), p.user)
		s.Must(200, "DELETE", "/profiles/pen-shared", nil, p.user)
	})
}
