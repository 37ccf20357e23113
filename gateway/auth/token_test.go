package auth

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/provgate/provgate/backend"
)

const (
	machine1 = "3e7031fe-3062-45f1-835c-92541bc9cbd3"
	machine2 = "a1b2c3d4-0000-4000-8000-000000000002"
)

// tokenWorld is a store with a few users and machines and a clock.
type tokenWorld struct {
	s     *fakeSecrets
	clk   *clock
	a     *Authenticator
	bob   UserRecord
	admin UserRecord
	alice UserRecord
}

func newTokenWorld(t *testing.T) *tokenWorld {
	t.Helper()
	w := &tokenWorld{s: newFakeSecrets(), clk: newClock()}
	w.bob = w.s.addUser(t, "bob", "bob-secret-00001", "bobpw", "operator")
	w.admin = w.s.addUser(t, "admin", "admin-secret-001", "adminpw", "superuser")
	w.alice = w.s.addUser(t, "alice", "alice-secret-001", "alicepw", "readonly")
	w.s.machines[machine1] = "machine1-secret-1"
	w.s.machines[machine2] = "machine2-secret-2"
	w.a, _ = newTestAuth(w.s, Options{Now: w.clk.Now})
	return w
}

func basicGrantor(u UserRecord) *Principal { return basicPrincipal(u) }

func (w *tokenWorld) userToken(t *testing.T, u UserRecord, g *Principal, ttl time.Duration, roles []string, restrict []backend.Claim) string {
	t.Helper()
	tok, _, err := w.a.IssueUserToken(context.Background(), u, g, ttl, roles, restrict)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func (w *tokenWorld) machineToken(t *testing.T, uuid string, kind MachineTokenKind) string {
	t.Helper()
	tok, _, err := w.a.IssueMachineToken(context.Background(), uuid, kind, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func (w *tokenWorld) auth(tok string) (*Principal, error) {
	return w.a.Authenticate(context.Background(), "Bearer "+tok, "192.0.2.1")
}

func TestTokenRoundTrip(t *testing.T) {
	w := newTokenWorld(t)
	restrict := []backend.Claim{{Scope: "machines", Action: "get", Specific: "*"}}
	tests := []struct {
		name string
		tok  func() string
		want Principal
	}{
		{
			name: "user self-granted, all roles",
			tok:  func() string { return w.userToken(t, w.bob, basicGrantor(w.bob), 0, nil, nil) },
			want: Principal{Kind: KindUser, Name: "bob", Grantor: "bob", Roles: []string{"operator"}, Method: MethodBearer},
		},
		{
			name: "user granted by another user",
			tok:  func() string { return w.userToken(t, w.bob, basicGrantor(w.admin), time.Minute, nil, nil) },
			want: Principal{Kind: KindUser, Name: "bob", Grantor: "admin", Roles: []string{"operator"}, Method: MethodBearer},
		},
		{
			name: "restricted roles and claims",
			tok: func() string {
				return w.userToken(t, w.bob, basicGrantor(w.bob), time.Hour, []string{"readonly"}, restrict)
			},
			// Roles are bob's own, as stored now; the token's roles narrow them.
			want: Principal{Kind: KindUser, Name: "bob", Grantor: "bob", Roles: []string{"operator"},
				TokenRoles: []string{"readonly"}, RoleRestricted: true, Restrict: restrict, Method: MethodBearer},
		},
		{
			name: "every requested role dropped",
			tok:  func() string { return w.userToken(t, w.bob, basicGrantor(w.bob), time.Hour, []string{}, nil) },
			want: Principal{Kind: KindUser, Name: "bob", Grantor: "bob", Roles: []string{"operator"}, TokenRoles: []string{}, RoleRestricted: true, Method: MethodBearer},
		},
		{
			name: "machine operations",
			tok:  func() string { return w.machineToken(t, machine1, MachineOperations) },
			want: Principal{Kind: KindMachine, Name: machine1, Grantor: SystemGrantor, MachineToken: MachineOperations, Method: MethodMachine},
		},
		{
			name: "known machine discovery",
			tok:  func() string { return w.machineToken(t, machine1, MachineDiscovery) },
			want: Principal{Kind: KindMachine, Name: machine1, Grantor: SystemGrantor, MachineToken: MachineDiscovery, Method: MethodMachine},
		},
		{
			name: "unknown machine discovery",
			tok:  func() string { return w.machineToken(t, "", MachineDiscovery) },
			want: Principal{Kind: KindMachine, Name: UnknownMachine, Grantor: SystemGrantor, MachineToken: MachineDiscovery, Method: MethodMachine},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := w.auth(tt.tok())
			if err != nil {
				t.Fatal(err)
			}
			if p.ExpiresAt.IsZero() || p.IssuedAt.IsZero() || !p.IssuedAt.Before(p.ExpiresAt) || p.TokenID == "" {
				t.Errorf("got IssuedAt %v, ExpiresAt %v, TokenID %q", p.IssuedAt, p.ExpiresAt, p.TokenID)
			}
			p.IssuedAt, p.ExpiresAt, p.TokenID = time.Time{}, time.Time{}, ""
			if got, want := fmt.Sprintf("%+v", *p), fmt.Sprintf("%+v", tt.want); got != want {
				t.Errorf("got  %s\nwant %s", got, want)
			}
			if (p.Roles == nil) != (tt.want.Roles == nil) {
				t.Errorf("got Roles nil %v, want nil %v", p.Roles == nil, tt.want.Roles == nil)
			}
			if (p.TokenRoles == nil) != (tt.want.TokenRoles == nil) {
				t.Errorf("got TokenRoles nil %v, want nil %v", p.TokenRoles == nil, tt.want.TokenRoles == nil)
			}
		})
	}
}

func TestIssueUserTokenExpiry(t *testing.T) {
	w := newTokenWorld(t)
	tests := []struct {
		name string
		ttl  time.Duration
		want time.Duration
		code string
	}{
		{"default", 0, time.Hour, ""},
		{"given", 10 * time.Minute, 10 * time.Minute, ""},
		{"maximum", 365 * 24 * time.Hour, 365 * 24 * time.Hour, ""},
		{"over maximum", 366 * 24 * time.Hour, 0, backend.EBADREQUEST},
		{"negative", -time.Second, 0, backend.EBADREQUEST},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tok, exp, err := w.a.IssueUserToken(context.Background(), w.bob, basicGrantor(w.bob), tt.ttl, nil, nil)
			if got := backend.ErrorCode(err); got != tt.code {
				t.Fatalf("got code %q (%v), want %q", got, err, tt.code)
			}
			if err != nil {
				return
			}
			if got, want := exp, w.clk.Now().Add(tt.want); !got.Equal(want) {
				t.Errorf("got expiry %v, want %v", got, want)
			}
			p, err := w.auth(tok)
			if err != nil {
				t.Fatal(err)
			}
			if !p.ExpiresAt.Equal(exp) {
				t.Errorf("got principal expiry %v, want %v", p.ExpiresAt, exp)
			}
		})
	}
}

func TestIssueRefused(t *testing.T) {
	w := newTokenWorld(t)
	ctx := context.Background()
	machineP := &Principal{Kind: KindMachine, Name: machine1, Grantor: SystemGrantor, MachineToken: MachineOperations}
	ghost := &Principal{Kind: KindUser, Name: "ghost", Grantor: "ghost"}
	tests := []struct {
		name string
		do   func() error
		code string
	}{
		{"user token granted by a machine", func() error {
			_, _, err := w.a.IssueUserToken(ctx, w.bob, machineP, 0, nil, nil)
			return err
		}, backend.EFORBIDDEN},
		{"user token without grantor", func() error {
			_, _, err := w.a.IssueUserToken(ctx, w.bob, nil, 0, nil, nil)
			return err
		}, backend.EFORBIDDEN},
		{"grantor deleted meanwhile", func() error {
			_, _, err := w.a.IssueUserToken(ctx, w.bob, ghost, 0, nil, nil)
			return err
		}, backend.EFORBIDDEN},
		{"user without secret", func() error {
			_, _, err := w.a.IssueUserToken(ctx, UserRecord{Name: "bob"}, basicGrantor(w.bob), 0, nil, nil)
			return err
		}, backend.EINTERNAL},
		{"machine token, unknown machine", func() error {
			_, _, err := w.a.IssueMachineToken(ctx, "no-such-machine", MachineOperations, time.Hour)
			return err
		}, backend.ENOTFOUND},
		{"operations token without machine", func() error {
			_, _, err := w.a.IssueMachineToken(ctx, "", MachineOperations, time.Hour)
			return err
		}, backend.EBADREQUEST},
		{"machine token, bad kind", func() error {
			_, _, err := w.a.IssueMachineToken(ctx, machine1, "superuser", time.Hour)
			return err
		}, backend.EBADREQUEST},
		{"machine token, reserved uuid", func() error {
			_, _, err := w.a.IssueMachineToken(ctx, UnknownMachine, MachineDiscovery, time.Hour)
			return err
		}, backend.EBADREQUEST},
		{"machine token, no ttl", func() error {
			_, _, err := w.a.IssueMachineToken(ctx, machine1, MachineOperations, 0)
			return err
		}, backend.EBADREQUEST},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { wantCode(t, tt.do(), tt.code) })
	}
}

// simpleContains is a small stand-in for the policy's claim containment:
// "*" or equality per field.
func simpleContains(have, want backend.Claim) bool {
	field := func(h, w string) bool { return h == "*" || h == w }
	return field(have.Scope, want.Scope) && field(have.Action, want.Action) && field(have.Specific, want.Specific)
}

func TestRestrictedGrantorCannotWiden(t *testing.T) {
	machinesGet := []backend.Claim{{Scope: "machines", Action: "get", Specific: "*"}}
	machine1Get := backend.Claim{Scope: "machines", Action: "get", Specific: machine1}
	poolsGet := backend.Claim{Scope: "pools", Action: "get", Specific: "*"}
	superClaim := backend.Claim{Scope: "*", Action: "*", Specific: "*"}
	tests := []struct {
		name         string
		contains     bool
		grantor      func(w *tokenWorld) *Principal
		user         func(w *tokenWorld) UserRecord
		roles        []string
		restrict     []backend.Claim
		wantFree     bool     // the token names no roles
		wantRoles    []string // its TokenRoles
		wantRestrict []backend.Claim
	}{
		{
			name:      "self refresh keeps roles and restrict",
			roles:     nil,
			wantRoles: []string{"readonly"}, wantRestrict: machinesGet,
		},
		{
			name:      "self, wider roles asked: only the grantor's kept",
			roles:     []string{"operator", "readonly"},
			wantRoles: []string{"readonly"}, wantRestrict: machinesGet,
		},
		{
			name:      "self, only other roles asked: none kept",
			roles:     []string{"operator"},
			wantRoles: []string{}, wantRestrict: machinesGet,
		},
		{
			name:      "superuser restrict asked, no containment hook",
			restrict:  []backend.Claim{superClaim},
			wantRoles: []string{"readonly"}, wantRestrict: machinesGet,
		},
		{
			name:      "narrower restrict asked, no containment hook",
			restrict:  []backend.Claim{machine1Get},
			wantRoles: []string{"readonly"}, wantRestrict: machinesGet,
		},
		{
			name:      "superuser restrict asked, with containment",
			contains:  true,
			restrict:  []backend.Claim{superClaim},
			wantRoles: []string{"readonly"}, wantRestrict: machinesGet,
		},
		{
			name:      "narrower restrict asked, with containment",
			contains:  true,
			restrict:  []backend.Claim{machine1Get},
			wantRoles: []string{"readonly"}, wantRestrict: []backend.Claim{machine1Get},
		},
		{
			name:      "mixed restrict asked, with containment",
			contains:  true,
			restrict:  []backend.Claim{poolsGet, machine1Get},
			wantRoles: []string{"readonly"}, wantRestrict: []backend.Claim{machine1Get},
		},
		{
			name: "restricted admin mints for bob: bob's roles, admin's restrict",
			grantor: func(w *tokenWorld) *Principal {
				return &Principal{Kind: KindUser, Name: "admin", Grantor: "admin", Roles: []string{"superuser"}, Restrict: machinesGet}
			},
			wantFree: true, wantRestrict: machinesGet,
		},
		{
			name:     "unrestricted grantor: restrict as asked",
			grantor:  func(w *tokenWorld) *Principal { return basicGrantor(w.bob) },
			restrict: []backend.Claim{poolsGet},
			wantFree: true, wantRestrict: []backend.Claim{poolsGet},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newTokenWorld(t)
			if tt.contains {
				w.a.contains = simpleContains
			}
			grantor := &Principal{Kind: KindUser, Name: "bob", Grantor: "bob", Roles: []string{"operator"},
				TokenRoles: []string{"readonly"}, RoleRestricted: true, Restrict: machinesGet}
			if tt.grantor != nil {
				grantor = tt.grantor(w)
			}
			p, err := w.auth(w.userToken(t, w.bob, grantor, time.Hour, tt.roles, tt.restrict))
			if err != nil {
				t.Fatal(err)
			}
			if p.RoleRestricted == tt.wantFree || !slices.Equal(p.TokenRoles, tt.wantRoles) || (p.TokenRoles == nil) != (tt.wantRoles == nil) {
				t.Errorf("got RoleRestricted %v TokenRoles %#v, want %v %#v", p.RoleRestricted, p.TokenRoles, !tt.wantFree, tt.wantRoles)
			}
			// Whatever the token names, the user's roles are bob's own.
			if !slices.Equal(p.Roles, []string{"operator"}) {
				t.Errorf("got Roles %#v, want bob's [operator]", p.Roles)
			}
			if !slices.Equal(p.Restrict, tt.wantRestrict) {
				t.Errorf("got Restrict %v, want %v", p.Restrict, tt.wantRestrict)
			}
		})
	}
}

// TestTokenRolesFollowUser: a token's principal carries the user's roles as
// stored at each authentication, and the roles the token names separately,
// so the policies can require both: a role taken from the user, or given,
// shows at once, for tokens naming roles and tokens that do not.
func TestTokenRolesFollowUser(t *testing.T) {
	w := newTokenWorld(t)
	restricted := w.userToken(t, w.bob, basicGrantor(w.bob), time.Hour, []string{"readonly"}, nil)
	all := w.userToken(t, w.bob, basicGrantor(w.bob), time.Hour, nil, nil)
	steps := []struct {
		name  string
		roles []string
	}{
		{"as minted", []string{"operator"}},
		{"role taken away", nil},
		{"other role given", []string{"auditor"}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			w.s.mu.Lock()
			u := w.s.users["bob"]
			u.Roles = st.roles
			w.s.users["bob"] = u
			w.s.mu.Unlock()
			p, err := w.auth(restricted)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(p.Roles, st.roles) || !p.RoleRestricted || !slices.Equal(p.TokenRoles, []string{"readonly"}) {
				t.Errorf("restricted token: got Roles %v TokenRoles %v (restricted %v), want Roles %v TokenRoles [readonly]",
					p.Roles, p.TokenRoles, p.RoleRestricted, st.roles)
			}
			p, err = w.auth(all)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(p.Roles, st.roles) || p.RoleRestricted || p.TokenRoles != nil {
				t.Errorf("token naming no roles: got Roles %v TokenRoles %v (restricted %v), want Roles %v",
					p.Roles, p.TokenRoles, p.RoleRestricted, st.roles)
			}
		})
	}
}

// TestSecretRotation mints one token of each kind, rotates one secret, and
// checks that exactly the tokens bound to it die.
func TestSecretRotation(t *testing.T) {
	type tokens = map[string]string
	mint := func(t *testing.T, w *tokenWorld) tokens {
		return tokens{
			"bob self":        w.userToken(t, w.bob, basicGrantor(w.bob), time.Hour, nil, nil),
			"bob by admin":    w.userToken(t, w.bob, basicGrantor(w.admin), time.Hour, nil, nil),
			"alice self":      w.userToken(t, w.alice, basicGrantor(w.alice), time.Hour, nil, nil),
			"machine1 ops":    w.machineToken(t, machine1, MachineOperations),
			"machine2 ops":    w.machineToken(t, machine2, MachineOperations),
			"machine1 disc":   w.machineToken(t, machine1, MachineDiscovery),
			"unknown machine": w.machineToken(t, "", MachineDiscovery),
		}
	}
	all := []string{"bob self", "bob by admin", "alice self", "machine1 ops", "machine2 ops", "machine1 disc", "unknown machine"}
	tests := []struct {
		name   string
		rotate func(s *fakeSecrets)
		dead   []string
	}{
		{"nothing", func(s *fakeSecrets) {}, nil},
		{"system secret", func(s *fakeSecrets) { s.system = "system-secret-0002" }, all},
		{"base key", func(s *fakeSecrets) { s.base = []byte("fedcba9876543210fedcba9876543210") }, all},
		{"user secret", func(s *fakeSecrets) {
			u := s.users["bob"]
			u.Secret = "bob-secret-00002"
			s.users["bob"] = u
		}, []string{"bob self", "bob by admin"}},
		{"grantor secret", func(s *fakeSecrets) {
			u := s.users["admin"]
			u.Secret = "admin-secret-002"
			s.users["admin"] = u
		}, []string{"bob by admin"}},
		{"other user secret", func(s *fakeSecrets) {
			u := s.users["alice"]
			u.Secret = "alice-secret-002"
			s.users["alice"] = u
		}, []string{"alice self"}},
		{"machine secret", func(s *fakeSecrets) { s.machines[machine1] = "machine1-secret-9" }, []string{"machine1 ops", "machine1 disc"}},
		{"grantor deleted", func(s *fakeSecrets) { delete(s.users, "admin") }, []string{"bob by admin"}},
		{"machine deleted", func(s *fakeSecrets) { delete(s.machines, machine2) }, []string{"machine2 ops"}},
		{"role change does not kill tokens", func(s *fakeSecrets) {
			u := s.users["bob"]
			u.Roles = []string{"readonly"}
			s.users["bob"] = u
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newTokenWorld(t)
			toks := mint(t, w)
			w.s.set(tt.rotate)
			for _, name := range all {
				_, err := w.auth(toks[name])
				dead := slices.Contains(tt.dead, name)
				switch {
				case dead && err == nil:
					t.Errorf("%s: still verifies", name)
				case dead:
					e := wantCode(t, err, backend.EFORBIDDEN)
					if got := e.Error(); got != "AUTH: token invalid" {
						t.Errorf("%s: got error %q, want the opaque one", name, got)
					}
				case err != nil:
					t.Errorf("%s: got %v, want it alive", name, err)
				}
			}
		})
	}
}

// forge signs claims with method and key, as an attacker or a foreign
// issuer would.
func forge(t *testing.T, method jwt.SigningMethod, key any, c jwt.Claims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(method, c).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestBearerRefused(t *testing.T) {
	w := newTokenWorld(t)
	good := w.userToken(t, w.bob, basicGrantor(w.bob), time.Hour, nil, nil)
	now := w.clk.Now()
	claims := func() *tokenClaims {
		return &tokenClaims{Kind: KindUser, Grantor: "bob", RegisteredClaims: jwt.RegisteredClaims{
			Issuer: tokenIssuer, Subject: "bob", IssuedAt: jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(now.Add(time.Hour)), ID: "x",
		}}
	}
	// The key this server would derive for bob's self-granted token.
	rightKey, err := deriveKey(w.s.base, keyInputs{kind: KindUser, system: w.s.system, user: w.bob.Secret, grantor: w.bob.Secret})
	if err != nil {
		t.Fatal(err)
	}
	otherBase, err := deriveKey([]byte("another-32-byte-base-key-0123456"), keyInputs{kind: KindUser, system: w.s.system, user: w.bob.Secret, grantor: w.bob.Secret})
	if err != nil {
		t.Fatal(err)
	}
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(good, ".")
	tampered := func(mut func(c map[string]any)) string {
		raw, _ := base64.RawURLEncoding.DecodeString(parts[1])
		var c map[string]any
		if err := json.Unmarshal(raw, &c); err != nil {
			t.Fatal(err)
		}
		mut(c)
		b, _ := json.Marshal(c)
		return parts[0] + "." + base64.RawURLEncoding.EncodeToString(b) + "." + parts[2]
	}
	withClaims := func(mut func(c *tokenClaims)) string {
		c := claims()
		mut(c)
		return forge(t, jwt.SigningMethodHS256, rightKey, c)
	}

	if _, err := w.auth(forge(t, jwt.SigningMethodHS256, rightKey, claims())); err != nil {
		t.Fatalf("control: a correctly keyed token is refused: %v", err)
	}
	tests := []struct {
		name string
		tok  string
	}{
		{"alg none", forge(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, claims())},
		{"HS512 with the right key", forge(t, jwt.SigningMethodHS512, rightKey, claims())},
		{"HS384 with the right key", forge(t, jwt.SigningMethodHS384, rightKey, claims())},
		{"RS256", forge(t, jwt.SigningMethodRS256, rsaKey, claims())},
		{"another base key", forge(t, jwt.SigningMethodHS256, otherBase, claims())},
		{"base key itself as MAC key", forge(t, jwt.SigningMethodHS256, w.s.base, claims())},
		{"payload changed, signature kept", tampered(func(c map[string]any) { c["sub"] = "admin"; c["grantor"] = "admin" })},
		{"roles widened, signature kept", tampered(func(c map[string]any) { c["roles"] = []string{"superuser"} })},
		{"signature flipped", parts[0] + "." + parts[1] + "." + flipFirst(parts[2])},
		{"signature dropped", parts[0] + "." + parts[1] + "."},
		{"two segments", parts[0] + "." + parts[1]},
		{"garbage", "not-a-token"},
		{"too long", strings.Repeat("a", maxTokenLen+1)},
		{"no expiry", withClaims(func(c *tokenClaims) { c.ExpiresAt = nil })},
		{"other issuer", withClaims(func(c *tokenClaims) { c.Issuer = "drp" })},
		{"unknown kind", withClaims(func(c *tokenClaims) { c.Kind = "admin" })},
		{"user token claiming machine kind", withClaims(func(c *tokenClaims) { c.MachineToken = MachineOperations })},
		{"no grantor", withClaims(func(c *tokenClaims) { c.Grantor = "" })},
		{"unknown subject", withClaims(func(c *tokenClaims) { c.Subject = "ghost" })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := w.auth(tt.tok)
			if err == nil {
				t.Fatalf("accepted as %+v", p)
			}
			e := wantCode(t, err, backend.EFORBIDDEN)
			if got := strings.Join(e.Messages, "; "); got != "token invalid" || e.Type != "AUTH" {
				t.Errorf("got %s %q, want AUTH \"token invalid\"", e.Type, got)
			}
		})
	}
}

func TestBearerExpiry(t *testing.T) {
	tests := []struct {
		name    string
		advance time.Duration
		ok      bool
	}{
		{"fresh", 0, true},
		{"just before expiry", 10*time.Minute - time.Second, true},
		{"at expiry", 10 * time.Minute, false},
		{"after expiry", 11 * time.Minute, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newTokenWorld(t)
			user := w.userToken(t, w.bob, basicGrantor(w.bob), 10*time.Minute, nil, nil)
			mtok, _, err := w.a.IssueMachineToken(context.Background(), machine1, MachineOperations, 10*time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			w.clk.Add(tt.advance)
			for _, tok := range []string{user, mtok} {
				_, err := w.auth(tok)
				if tt.ok && err != nil {
					t.Errorf("got %v, want valid", err)
				}
				if !tt.ok {
					wantCode(t, err, backend.EFORBIDDEN)
				}
			}
		})
	}
}

func TestBearerStoreOutage(t *testing.T) {
	w := newTokenWorld(t)
	tok := w.userToken(t, w.bob, basicGrantor(w.bob), time.Hour, nil, nil)
	w.s.set(func(s *fakeSecrets) { s.fail = errOutage })
	_, err := w.auth(tok)
	e := wantCode(t, err, backend.EINTERNAL)
	if strings.Contains(strings.Join(e.Messages, " "), "database") {
		t.Errorf("internal cause leaked into messages: %v", e.Messages)
	}
}

// TestTokenCarriesNoSecret decodes every part of every kind of token and
// looks for the secrets, the base key and the password in any encoding.
func TestTokenCarriesNoSecret(t *testing.T) {
	w := newTokenWorld(t)
	toks := map[string]string{
		"user":      w.userToken(t, w.bob, basicGrantor(w.admin), time.Hour, []string{"operator"}, nil),
		"machine":   w.machineToken(t, machine1, MachineOperations),
		"discovery": w.machineToken(t, "", MachineDiscovery),
	}
	needles := []string{w.s.system, string(w.s.base), w.bob.Secret, w.admin.Secret, "machine1-secret-1", "bobpw", "adminpw", string(w.bob.PasswordHash)}
	for name, tok := range toks {
		t.Run(name, func(t *testing.T) {
			hay := []string{tok}
			for _, part := range strings.Split(tok, ".") {
				raw, err := base64.RawURLEncoding.DecodeString(part)
				if err != nil {
					t.Fatal(err)
				}
				hay = append(hay, string(raw))
			}
			for _, n := range needles {
				encs := []string{n, base64.StdEncoding.EncodeToString([]byte(n)), base64.RawURLEncoding.EncodeToString([]byte(n)), fmt.Sprintf("%x", n)}
				for _, h := range hay {
					for _, e := range encs {
						if strings.Contains(h, e) {
							t.Errorf("token carries %q", n)
						}
					}
				}
			}
			raw, _ := base64.RawURLEncoding.DecodeString(strings.Split(tok, ".")[1])
			var c map[string]any
			if err := json.Unmarshal(raw, &c); err != nil {
				t.Fatal(err)
			}
			for _, k := range []string{"kind", "sub", "grantor", "exp", "iat", "jti"} {
				if _, ok := c[k]; !ok {
					t.Errorf("payload lacks %q: %s", k, raw)
				}
			}
		})
	}
}

func TestDeriveKeySeparatesInputs(t *testing.T) {
	base := []byte("0123456789abcdef0123456789abcdef")
	tests := []struct {
		name string
		a, b keyInputs
	}{
		{"shifted boundary", keyInputs{kind: "user", system: "ab", user: "c"}, keyInputs{kind: "user", system: "a", user: "bc"}},
		{"user vs grantor", keyInputs{kind: "user", user: "x"}, keyInputs{kind: "user", grantor: "x"}},
		{"kind", keyInputs{kind: "user", system: "s"}, keyInputs{kind: "machine", system: "s"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ka, err := deriveKey(base, tt.a)
			if err != nil {
				t.Fatal(err)
			}
			kb, err := deriveKey(base, tt.b)
			if err != nil {
				t.Fatal(err)
			}
			if string(ka) == string(kb) {
				t.Error("different inputs gave the same key")
			}
		})
	}
	if _, err := deriveKey([]byte("short"), keyInputs{}); err == nil {
		t.Error("short base key accepted")
	}
}

// flipFirst changes the first character, whose six bits all count (unlike
// the last one's of a 43-character signature).
func flipFirst(s string) string {
	if s[0] == 'A' {
		return "B" + s[1:]
	}
	return "A" + s[1:]
}
