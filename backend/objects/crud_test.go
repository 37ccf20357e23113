package objects

import (
	"strings"
	"testing"

	"github.com/provgate/provgate/backend"
)

func TestCreateDefaults(t *testing.T) {
	each(t, func(t *testing.T, e env) {
		ctx := sys()
		t.Run("machine from drpcli body", func(t *testing.T) {
			m := mustCreate(t, e, "machines", drpcliMachine("m1")).(*backend.Machine)
			if m.Uuid == "" || m.Secret != "" {
				t.Fatalf("got Uuid %q Secret %q, want a Uuid and no Secret", m.Uuid, m.Secret)
			}
			if m.Pool != "default" || m.PoolStatus != "Free" || m.Arch != "amd64" || !m.Runnable {
				t.Fatalf("got Pool %q PoolStatus %q Arch %q Runnable %v", m.Pool, m.PoolStatus, m.Arch, m.Runnable)
			}
			if m.Errors == nil || m.Meta == nil || m.Params == nil || !m.Validated || !m.Available {
				t.Fatalf("got unfilled envelope %+v", m.Envelope)
			}
			raw := rawRecord(t, e, "machines", m.Uuid)
			if s, _ := raw["Secret"].(string); len(s) != 16 {
				t.Fatalf("got stored Secret %q, want 16 chars", s)
			}
		})
		t.Run("user secret and password", func(t *testing.T) {
			u := mustCreate(t, e, "users", `{"Name":"bob","Password":"pw1","Roles":null,"Secret":"","Meta":null,"Errors":null}`).(*backend.User)
			if u.Secret != "" || u.PasswordHash != nil {
				t.Fatalf("got sanitized user %+v, want no secrets", u)
			}
			raw := rawRecord(t, e, "users", "bob")
			if raw["Secret"] == "" || raw["PasswordHash"] == nil {
				t.Fatalf("got stored %v, want Secret and PasswordHash", raw)
			}
			h, _, err := e.svc.Accounts.PasswordHash(ctx, "bob")
			if err != nil || string(h) != "16384$8$1$73616c74$pw1" {
				t.Fatalf("got hash %q %v", h, err)
			}
		})
		t.Run("given PasswordHash kept", func(t *testing.T) {
			// base64 of "16384$8$1$aa$bb"
			mustCreate(t, e, "users", `{"Name":"carol","PasswordHash":"MTYzODQkOCQxJGFhJGJi"}`)
			h, _, _ := e.svc.Accounts.PasswordHash(ctx, "carol")
			if string(h) != "16384$8$1$aa$bb" {
				t.Fatalf("got %q", h)
			}
		})
		tests := []struct {
			name, prefix, body, code, typ, msg string
		}{
			{"empty key", "roles", `{"Name":""}`, backend.EBADREQUEST, "create", "Empty key not allowed"},
			{"malformed json", "roles", `{"Name":`, backend.EBADREQUEST, "action", "unexpected end"},
			{"wrong field type", "roles", `{"Name":5}`, backend.EBADREQUEST, "action", "Name"},
			{"bad password hash", "users", `{"Name":"dave","PasswordHash":"eHl6"}`, backend.EINVALID, "ValidationError", "PasswordHash"},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				_, err := e.svc.Objects.Create(ctx, tc.prefix, []byte(tc.body))
				wantErr(t, err, tc.code, tc.typ, tc.msg)
			})
		}
		t.Run("duplicate", func(t *testing.T) {
			mustCreate(t, e, "profiles", `{"Name":"dup"}`)
			_, err := e.svc.Objects.Create(ctx, "profiles", []byte(`{"Name":"dup"}`))
			wantErr(t, err, backend.ECONFLICT, "create", "already exists")
		})
		t.Run("duplicate machine name", func(t *testing.T) {
			_, err := e.svc.Objects.Create(ctx, "machines", []byte(`{"Name":"m1"}`))
			wantErr(t, err, backend.EINVALID, "ValidationError", "Name m1 is already in use")
		})
	})
}

func TestKeys(t *testing.T) {
	each(t, func(t *testing.T, e env) {
		ctx := sys()
		m := mustCreate(t, e, "machines", `{"Name":"m2"}`).(*backend.Machine)
		for _, key := range []string{m.Uuid, "Name:m2", "Uuid:" + m.Uuid, "Key:" + m.Uuid} {
			t.Run("get "+key, func(t *testing.T) {
				got, rev, err := e.svc.Objects.Get(ctx, "machines", key)
				if err != nil || got.Key() != m.Uuid || rev < 1 {
					t.Fatalf("got %v rev %d err %v", got, rev, err)
				}
			})
		}
		tests := []struct{ name, key, code, msg string }{
			{"missing", "Name:nope", backend.ENOTFOUND, "Not Found"},
			{"missing native", "3e7031fe-3062-45f1-835c-92541bc9cbd3", backend.ENOTFOUND, "Not Found"},
			{"unknown index", "Foo:bar", backend.ENOTFOUND, "no index Foo"},
			{"non-unique index", "Pool:default", backend.EBADREQUEST, "not unique"},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				_, _, err := e.svc.Objects.Get(ctx, "machines", tc.key)
				wantErr(t, err, tc.code, "read", tc.msg)
			})
		}
	})
}

func TestValidation(t *testing.T) {
	each(t, func(t *testing.T, e env) {
		ctx := sys()
		mustCreate(t, e, "users", `{"Name":"u1"}`)
		mustCreate(t, e, "users", `{"Name":"u2"}`)
		mustCreate(t, e, "tenants", `{"Name":"t1","Users":["u1"]}`)
		mustCreate(t, e, "pools", `{"Id":"pa","ParentPool":"pb"}`)
		mustCreate(t, e, "params", `{"Name":"count","Schema":{"type":"integer","minimum":1}}`)
		tests := []struct {
			name, prefix, body, msg string
		}{
			{"role name", "roles", `{"Name":"[bad]"}`, "Invalid Name `[bad]`"},
			{"single letter", "profiles", `{"Name":"a"}`, "Invalid Name `a`"},
			{"user name", "users", `{"Name":"-x"}`, "Invalid Name `-x`"},
			{"unknown scope", "roles", `{"Name":"r1","Claims":[{"scope":"bar","action":"get","specific":"*"}]}`, "No such scope 'bar'"},
			{"empty scope", "roles", `{"Name":"r1","Claims":[{"scope":"","action":"","specific":""}]}`, "No such scope ''"},
			{"scope in list", "roles", `{"Name":"r1","Claims":[{"scope":"machines, nope","action":"get","specific":"*"}]}`, "No such scope 'nope'"},
			{"unknown action", "roles", `{"Name":"r1","Claims":[{"scope":"machines","action":"get,bar","specific":"*"}]}`, "No such action 'bar'"},
			{"action not in scope", "roles", `{"Name":"r1","Claims":[{"scope":"users","action":"getSecure","specific":"*"}]}`, "No such action 'getSecure'"},
			{"pointer without slash", "roles", `{"Name":"r1","Claims":[{"scope":"machines","action":"update:Params","specific":"*"}]}`, "Invalid JSON pointer 'Params'"},
			{"pointer bad escape", "roles", `{"Name":"r1","Claims":[{"scope":"machines","action":"update:/a~2b","specific":"*"}]}`, "Invalid JSON pointer '/a~2b'"},
			{"tenant scope", "tenants", `{"Name":"t2","Members":{"bogus":[]}}`, "No such scope 'bogus'"},
			{"tenant user missing", "tenants", `{"Name":"t2","Users":["ghost"]}`, "User ghost does not exist"},
			{"user in two tenants", "tenants", `{"Name":"t2","Users":["u1"]}`, "User u1 already in tenant t1, and users can only be in one tenant at a time"},
			{"pool id", "pools", `{"Id":"p 1!"}`, "Invalid Name `p 1!`"},
			{"pool parent", "pools", `{"Id":"p1","ParentPool":"x"}`, "Invalid ParentPool `x`"},
			{"pool cycle", "pools", `{"Id":"pb","ParentPool":"pa"}`, "ParentPool pa would create a cycle"},
			{"pool self parent", "pools", `{"Id":"pc","ParentPool":"pc"}`, "would create a cycle"},
			{"pool action workflow", "pools", `{"Id":"p1","EnterActions":{"Workflow":"!"}}`, "Invalid EnterActions Workflow `!`"},
			{"pool action profile", "pools", `{"Id":"p1","AllocateActions":{"AddProfiles":["x"]}}`, "Invalid AllocateActions Add Profile `x`"},
			{"plugin provider empty", "plugins", `{"Name":"cb2","Provider":""}`, "Invalid Provider ``"},
			{"machine address", "machines", `{"Name":"m9","Address":"1.2.3"}`, "Invalid Address `1.2.3`"},
			{"machine name", "machines", `{"Name":"-m"}`, "Invalid Name `-m`"},
			{"machine arch", "machines", `{"Name":"m9","Arch":"vax"}`, "Invalid Arch `vax`"},
			{"machine pool status", "machines", `{"Name":"m9","PoolStatus":"Sleeping"}`, "Invalid PoolStatus `Sleeping`"},
			{"param schema", "params", `{"Name":"p9","Schema":{"type":"nonsense"}}`, "Invalid Schema"},
			{"param value", "profiles", `{"Name":"pr9","Params":{"count":0}}`, "Invalid value for param count"},
			{"param value type", "machines", `{"Name":"m9","Params":{"count":"x"}}`, "Invalid value for param count"},
			{"plugin param key", "plugins", `{"Name":"pl9","Provider":"callback","Params":{"9bad":1}}`, "Invalid Param Name `9bad`"},
			{"reservation addr", "reservations", `{"Addr":"x","Token":"aa:bb:cc:dd:ee:ff"}`, "Invalid Address `x`"},
			{"reservation token", "reservations", `{"Addr":"10.0.0.1"}`, "Token cannot be empty"},
			// DRP refuses these references (they were saved unavailable).
			{"machine missing profile", "machines", `{"Name":"m8","Profiles":["nope"]}`, ": Profile nope (at 0) does not exist"},
			{"machine missing workflow", "machines", `{"Name":"m7","Workflow":"nowf"}`, "Workflow nowf does not exist"},
			{"workflow missing stage", "workflows", `{"Name":"wf9","Stages":["nost"]}`, "wf9: Stage nost does not exist"},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				_, err := e.svc.Objects.Create(ctx, tc.prefix, []byte(tc.body))
				wantErr(t, err, backend.EINVALID, "ValidationError", tc.msg)
			})
		}
		soft := []struct {
			name, prefix, body, msg string
		}{
			{"user unknown role", "users", `{"Name":"u3","Roles":["ghost"]}`, "Role ghost does not exist"},
			{"plugin unknown provider", "plugins", `{"Name":"px","Provider":"ipmi"}`, "Plugin provider ipmi does not exist"},
		}
		for _, tc := range soft {
			t.Run(tc.name, func(t *testing.T) {
				m := mustCreate(t, e, tc.prefix, tc.body)
				env := m.Env()
				if env.Available || !env.Validated || len(env.Errors) != 1 || env.Errors[0] != tc.msg {
					t.Fatalf("got Available %v Errors %q, want unavailable with %q", env.Available, env.Errors, tc.msg)
				}
			})
		}
		t.Run("valid role", func(t *testing.T) {
			r := mustCreate(t, e, "roles", `{"Name":"ops","Claims":[{"scope":"machines,pools","action":"get,list,action:callbackDo,update:/Params/a~1b","specific":"*"},{"scope":"*","action":"*","specific":"*"},{"scope":"*","action":"get","specific":"*"}]}`)
			if !r.Env().Available {
				t.Fatalf("got %v", r.Env().Errors)
			}
		})
	})
}

func TestPluginHook(t *testing.T) {
	each(t, func(t *testing.T, e env) {
		p := mustCreate(t, e, "plugins", `{"Name":"cb","Provider":"callback","Params":{"callback/callbacks":{"a":{}}}}`).(*backend.Plugin)
		if p.Available || len(p.Errors) != 1 || p.Errors[0] != "callback a: Url is required" {
			t.Fatalf("got Available %v Errors %q", p.Available, p.Errors)
		}
		p2 := mustCreate(t, e, "plugins", `{"Name":"ext","Provider":"ipmi2"}`).(*backend.Plugin)
		if !p2.Available {
			t.Fatalf("got %q for a known provider", p2.Errors)
		}
	}, func(o *Options) {
		o.Providers = []string{"ipmi2"}
		o.ValidatePlugin = func(p *backend.Plugin) []string {
			if cbs, ok := p.Params["callback/callbacks"].(map[string]any); ok {
				for name, c := range cbs {
					if c.(map[string]any)["Url"] == nil {
						return []string{"callback " + name + ": Url is required"}
					}
				}
			}
			return nil
		}
	})
}

func TestList(t *testing.T) {
	each(t, func(t *testing.T, e env) {
		ctx := sys()
		mustCreate(t, e, "profiles", `{"Name":"l1","Params":{"a":1,"b":2},"Meta":{"color":"red"}}`)
		mustCreate(t, e, "profiles", `{"Name":"l2"}`)
		tests := []struct {
			name  string
			q     backend.Query
			check func(t *testing.T, p *backend.Profile)
		}{
			{"plain", backend.Query{Limit: -1}, func(t *testing.T, p *backend.Profile) {
				if p.Name == "l1" && (len(p.Params) != 2 || p.Partial) {
					t.Fatalf("got %+v", p)
				}
			}},
			{"slim", backend.Query{Limit: -1, Slim: []string{"params", "Meta"}}, func(t *testing.T, p *backend.Profile) {
				if len(p.Params) != 0 || len(p.Meta) != 0 || !p.Partial {
					t.Fatalf("got %+v", p)
				}
			}},
			{"params", backend.Query{Limit: -1, Params: []string{"b"}}, func(t *testing.T, p *backend.Profile) {
				if p.Name == "l1" && (toJSON(t, p.Params) != `{"b":2}` || !p.Partial) {
					t.Fatalf("got %+v", p)
				}
			}},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				got, total, matched, err := e.svc.Objects.List(ctx, "profiles", tc.q)
				if err != nil || len(got) != 2 || total != 2 || matched != 2 {
					t.Fatalf("got %d %d %d %v", len(got), total, matched, err)
				}
				for _, m := range got {
					tc.check(t, m.(*backend.Profile))
				}
			})
		}
		t.Run("users sanitized", func(t *testing.T) {
			mustCreate(t, e, "users", `{"Name":"lu","Password":"x"}`)
			got, _, _, err := e.svc.Objects.List(ctx, "users", backend.Query{Limit: -1})
			if err != nil || strings.Contains(toJSON(t, got), "Secret") || strings.Contains(toJSON(t, got), "PasswordHash") {
				t.Fatalf("got %s %v", toJSON(t, got), err)
			}
		})
	})
}
