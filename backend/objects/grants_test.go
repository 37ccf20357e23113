package objects

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/provgate/provgate/backend"
)

// recorder is a caller that sees all but hidden, holds nothing it is asked
// to hand out unless held names it, and records every grant check.
type recorder struct {
	hidden map[string]bool
	held   map[string]bool // "scope action specific" of claims, or a role name
	asked  [][]backend.Grant
}

func (r *recorder) CanSee(_ context.Context, scope, key string) (bool, error) {
	return !r.hidden[scope+"/"+key], nil
}

func (r *recorder) Can(context.Context, ...backend.Claim) (bool, error) { return true, nil }

func (r *recorder) Ungranted(_ context.Context, gs ...backend.Grant) ([]backend.Claim, error) {
	r.asked = append(r.asked, gs)
	var out []backend.Claim
	for _, g := range gs {
		if g.Via != nil && r.held[g.Via.String()] {
			continue
		}
		if g.Role != "" && !r.held[g.Role] {
			// As the policy answers a role not held, missing or hidden.
			out = append(out, *g.Via)
		}
		for _, c := range g.Claims {
			if !r.held[c.String()] {
				out = append(out, c)
			}
		}
	}
	return out, nil
}

// TestWritesAskWhatTheyHandOut: each grant-bearing write asks once, for
// exactly what it adds (docs/design.md §5.9); a narrowing or an edit that
// adds nothing does not ask; invalid writes are 422 before any grant check;
// a refusal writes nothing.
func TestWritesAskWhatTheyHandOut(t *testing.T) {
	each(t, func(t *testing.T, e env) {
		mustCreate(t, e, "roles", `{"Name":"viewer","Claims":[{"scope":"machines","action":"get","specific":"*"}]}`)
		mustCreate(t, e, "roles", `{"Name":"secret-role"}`)
		mustCreate(t, e, "users", `{"Name":"bob","Roles":["viewer"]}`)
		r := &recorder{held: map[string]bool{"viewer": true}}
		ctx := backend.WithAccess(context.Background(), r)
		o := e.svc.Objects
		last := func() []backend.Grant {
			if len(r.asked) == 0 {
				return nil
			}
			return r.asked[len(r.asked)-1]
		}
		asked := func(t *testing.T, want ...backend.Grant) {
			t.Helper()
			if !reflect.DeepEqual(last(), want) {
				t.Fatalf("asked %+v, want %+v", last(), want)
			}
		}
		bind := func(role string) *backend.Claim { return backend.BindClaim(role) }

		t.Run("user create asks once for every role", func(t *testing.T) {
			r.asked = nil
			_, err := o.Create(ctx, "users", []byte(`{"Name":"amy","Roles":["viewer","secret-role","ghost","viewer"]}`))
			wantErr(t, err, backend.EFORBIDDEN, "AUTH", "cannot grant what you do not hold: roles bind ghost,secret-role")
			if len(r.asked) != 1 {
				t.Fatalf("asked %d times", len(r.asked))
			}
			asked(t, backend.Grant{Role: "viewer", Via: bind("viewer")}, backend.Grant{Role: "secret-role", Via: bind("secret-role")},
				backend.Grant{Role: "ghost", Via: bind("ghost")})
			if _, _, err := o.Get(context.Background(), "users", "amy"); !backend.IsCode(err, backend.ENOTFOUND) {
				t.Fatalf("a refused create was written: %v", err)
			}
		})
		t.Run("patch asks only for added roles", func(t *testing.T) {
			r.asked = nil
			if _, err := o.Patch(ctx, "users", "bob", []byte(`[{"op":"replace","path":"/Description","value":"x"}]`), false); err != nil {
				t.Fatal(err)
			}
			if len(r.asked) != 0 {
				t.Fatalf("an edit adding nothing asked %+v", r.asked)
			}
			_, err := o.Patch(ctx, "users", "bob", []byte(`[{"op":"add","path":"/Roles/-","value":"secret-role"}]`), false)
			wantErr(t, err, backend.EFORBIDDEN, "AUTH", "roles bind secret-role")
			// An existing user is named, for the tenant rule; a created one
			// joins the writer's tenant and is not.
			asked(t, backend.Grant{Role: "secret-role", Via: bind("secret-role"), To: &backend.Subject{Kind: "user", Name: "bob"}})
		})
		t.Run("password of another user is a takeover", func(t *testing.T) {
			r.asked = nil
			if _, err := e.svc.Accounts.SetPassword(ctx, "bob", "new-pw"); err != nil {
				t.Fatal(err)
			}
			asked(t, backend.Grant{Roles: []string{"viewer"}, Via: backend.ImpersonateClaim("bob"), Subject: &backend.Subject{Kind: "user", Name: "bob"}})
			if err := e.svc.Accounts.MayTakeOver(ctx, "bob"); err != nil {
				t.Fatal(err)
			}
		})
		t.Run("role claims: the delta, with what the role had", func(t *testing.T) {
			r.asked = nil
			had := []backend.Claim{{Scope: "machines", Action: "get", Specific: "*"}}
			_, err := o.Patch(ctx, "roles", "viewer", []byte(`[{"op":"add","path":"/Claims/-","value":{"scope":"machines","action":"delete","specific":"m1"}}]`), false)
			wantErr(t, err, backend.EFORBIDDEN, "AUTH", "cannot grant what you do not hold: machines delete m1")
			asked(t, backend.Grant{Claims: []backend.Claim{{Scope: "machines", Action: "delete", Specific: "m1"}}, Had: had, Via: backend.EscalateClaim("viewer")})
			r.asked = nil
			if _, err := o.Patch(ctx, "roles", "viewer", []byte(`[{"op":"replace","path":"/Description","value":"d"}]`), false); err != nil {
				t.Fatal(err)
			}
			if len(r.asked) != 0 {
				t.Fatalf("a Description edit asked %+v", r.asked)
			}
		})
		t.Run("invalid claims are 422 before the grant check", func(t *testing.T) {
			r.asked = nil
			_, err := o.Create(ctx, "roles", []byte(`{"Name":"bad","Claims":[{"scope":"bogus","action":"get","specific":"*"},{"scope":"*","action":"*","specific":"*"}]}`))
			wantErr(t, err, backend.EINVALID, "ValidationError", "No such scope 'bogus'")
			if len(r.asked) != 0 {
				t.Fatalf("an invalid role was checked for grants: %+v", r.asked)
			}
		})
		t.Run("task extras", func(t *testing.T) {
			r.asked = nil
			extra := backend.Claim{Scope: "profiles", Action: "get", Specific: "*"}
			_, err := o.Create(ctx, "tasks", []byte(`{"Name":"t1","ExtraClaims":[{"scope":"profiles","action":"get","specific":"*"}],"ExtraRoles":["viewer"]}`))
			wantErr(t, err, backend.EFORBIDDEN, "AUTH", "profiles get *")
			asked(t, backend.Grant{Claims: []backend.Claim{extra}}, backend.Grant{Role: "viewer", Via: bind("viewer")})
		})
		t.Run("internal writes hand out anything", func(t *testing.T) {
			mustCreate(t, e, "users", `{"Name":"root2","Roles":["ghost","secret-role"]}`)
		})
	})
}

// TestPluginWritesAskForTheirPieces: a plugin write asks for the provider's
// pieces it adds or changes, computed on the params in the clear.
func TestPluginWritesAskForTheirPieces(t *testing.T) {
	need := backend.Claim{Scope: "machines", Action: "get,getSecure", Specific: "*"}
	pieces := func(p *backend.Plugin) map[string][]backend.Claim {
		out := map[string][]backend.Claim{}
		if v, ok := p.Params["secret-piece"]; ok {
			b, _ := json.Marshal(v)
			out["piece "+string(b)] = []backend.Claim{need}
		}
		return out
	}
	each(t, func(t *testing.T, e env) {
		r := &recorder{held: map[string]bool{}}
		ctx := backend.WithAccess(context.Background(), r)
		o := e.svc.Objects
		_, err := o.Create(ctx, "plugins", []byte(`{"Name":"p1","Provider":"callback","Params":{"secret-piece":"a"}}`))
		wantErr(t, err, backend.EFORBIDDEN, "AUTH", "machines get,getSecure *")
		mustCreate(t, e, "plugins", `{"Name":"p1","Provider":"callback","Params":{"secret-piece":"a"}}`)
		if _, err := o.Patch(ctx, "plugins", "p1", []byte(`[{"op":"replace","path":"/Description","value":"d"}]`), false); err != nil {
			t.Fatalf("an edit leaving the piece as it was: %v", err)
		}
		_, err = o.Patch(ctx, "plugins", "p1", []byte(`[{"op":"replace","path":"/Params/secret-piece","value":"b"}]`), false)
		wantErr(t, err, backend.EFORBIDDEN, "AUTH", "machines get,getSecure *")
	}, func(o *Options) { o.PluginGrants = pieces })
}
