package main

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/provgate/provgate/backend"
	"github.com/provgate/provgate/backend/prefs"
	"github.com/provgate/provgate/backend/store"
	"github.com/provgate/provgate/gateway/auth"
)

// End-to-end proof of authentication and tokens (docs/design.md §8): token
// requests and restrictions, the accepted credential forms, failed-login
// limits, machine and discovery tokens, and Secret rotation, through the
// real HTTP API on every database.

func accessTokens(t *testing.T, s *tserver) {
	s.AddRole("t-mach-read", [3]string{"machines", "get,list", "*"})
	s.AddRole("t-mach-all", [3]string{"machines", "*", "*"})
	s.AddRole("t-pools", [3]string{"pools", "get,list", "*"})
	s.AddRole("t-combo", [3]string{"machines", "get", "*"}, [3]string{"pools", "get", "*"})
	s.AddUser("t-user", "t-user-pw", "t-mach-all")
	s.AddUser("t-split", "t-split-pw", "t-mach-read", "t-pools")
	u1 := s.AddMachine("t-m1", nil)
	u2 := s.AddMachine("t-m2", nil)
	s.Must(201, "POST", "/pools", map[string]any{"Id": "t-p1"}, admin())

	t.Run("ttl", func(t *testing.T) {
		s := s.On(t)
		cases := []struct {
			name, ttl string
			want      int
			msg       string
		}{
			{"default", "", 200, ""},
			{"seconds", "600", 200, ""},
			{"go duration", "1h30m", 200, ""},
			{"drp duration", "7d", 200, ""},
			{"garbage", "cow", 400, "invalid ttl"},
			{"zero", "0", 400, "must be positive"},
			{"negative", "-5", 400, ""},
			{"over max seconds", "999999999999", 400, "exceeds the maximum"},
			{"over max duration", "100y", 400, "exceeds the maximum"},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				s := s.On(t)
				q := ""
				if c.ttl != "" {
					q = "?ttl=" + c.ttl
				}
				r := s.Do("GET", "/users/t-user/token"+q, nil, basic("t-user", "t-user-pw"))
				if r.Status != c.want {
					t.Fatalf("got %s, want %d", r, c.want)
				}
				if c.want != 200 {
					wantDRPError(t, r, c.want, "", c.msg)
					return
				}
				var out struct {
					Token string
					Info  json.RawMessage
				}
				r.JSON(t, &out)
				if out.Token == "" || len(out.Info) == 0 {
					t.Fatalf("reply %s", r.Body)
				}
				s.Must(200, "GET", "/machines/"+u1, nil, bearer(out.Token))
			})
		}
	})

	t.Run("reply Info decodes as DRP's", func(t *testing.T) {
		s := s.On(t)
		r := s.Must(200, "GET", "/users/t-user/token", nil, basic("t-user", "t-user-pw"))
		var out struct {
			Token string
			Info  struct {
				Address  string                    `json:"address"`
				APIPort  int                       `json:"api_port"`
				Version  string                    `json:"version"`
				Features []string                  `json:"features"`
				Scopes   map[string]map[string]any `json:"scopes"`
				Stats    []map[string]any          `json:"stats"`
				Errors   []string                  `json:"errors"`
				License  struct {
					Licenses []map[string]any
				} `json:"License"`
			}
		}
		dec := json.NewDecoder(bytes.NewReader(r.Body))
		if err := dec.Decode(&out); err != nil {
			t.Fatalf("decode %s: %v", r.Body, err)
		}
		if a := out.Info.Address; a != "" && net.ParseIP(a) == nil {
			t.Fatalf("Info.address %q is not an IP", a)
		}
		if out.Info.Features == nil || out.Info.Scopes == nil || out.Info.Stats == nil || out.Info.Errors == nil {
			t.Fatalf("Info has null arrays/objects: %s", r.Body)
		}
	})

	t.Run("roles restriction", func(t *testing.T) {
		s := s.On(t)
		cases := []struct {
			name, user, pw, roles string
			method, path          string
			body                  any
			want                  int
		}{
			{"contained role kept: get", "t-user", "t-user-pw", "t-mach-read", "GET", "/machines/" + u1, nil, 200},
			{"contained role kept: cannot patch", "t-user", "t-user-pw", "t-mach-read", "PATCH", "/machines/" + u1,
				jsonPatch("replace", "/Description", "x"), 403},
			{"widening role dropped", "t-user", "t-user-pw", "t-pools", "GET", "/pools/t-p1", nil, 403},
			{"widening role dropped, kept one works", "t-user", "t-user-pw", "t-pools,t-mach-read", "GET", "/machines", nil, 200},
			{"widening role dropped with kept one", "t-user", "t-user-pw", "t-pools,t-mach-read", "GET", "/pools", nil, 403},
			{"unknown role dropped", "t-user", "t-user-pw", "no-such-role", "GET", "/machines", nil, 403},
			{"unknown role: self still allowed", "t-user", "t-user-pw", "no-such-role", "GET", "/users/t-user", nil, 200},
			{"empty list: only self", "t-user", "t-user-pw", "", "GET", "/machines/" + u1, nil, 403},
			{"role spread over two user roles dropped", "t-split", "t-split-pw", "t-combo", "GET", "/machines/" + u1, nil, 403},
			{"own role kept", "t-split", "t-split-pw", "t-pools", "GET", "/pools/t-p1", nil, 200},
			{"own role kept, other not", "t-split", "t-split-pw", "t-pools", "GET", "/machines/" + u1, nil, 403},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				s := s.On(t)
				tok := s.Token(c.user, basic(c.user, c.pw), "?roles="+c.roles)
				r := s.Do(c.method, c.path, c.body, bearer(tok))
				if r.Status != c.want {
					t.Fatalf("%s %s: got %s, want %d", c.method, c.path, r, c.want)
				}
			})
		}
	})

	t.Run("scope action specific", func(t *testing.T) {
		s := s.On(t)
		cases := []struct {
			name, user, pw, query string
			method, path          string
			want                  int
		}{
			{"narrowed: allowed", "rocketskates", e2eAdminPassword, "?scope=machines&action=get&specific=" + u1, "GET", "/machines/" + u1, 200},
			{"narrowed: other specific", "rocketskates", e2eAdminPassword, "?scope=machines&action=get&specific=" + u1, "GET", "/machines/" + u2, 403},
			{"narrowed: other action", "rocketskates", e2eAdminPassword, "?scope=machines&action=get&specific=" + u1, "GET", "/machines", 403},
			{"narrowed: other scope", "rocketskates", e2eAdminPassword, "?scope=machines&action=get&specific=" + u1, "GET", "/pools", 403},
			{"scope only", "rocketskates", e2eAdminPassword, "?scope=pools", "GET", "/pools", 200},
			{"scope only: other scope", "rocketskates", e2eAdminPassword, "?scope=pools", "GET", "/users", 403},
			{"cannot widen", "t-split", "t-split-pw", "?scope=users&action=list", "GET", "/users", 403},
			{"cannot widen to write", "t-split", "t-split-pw", "?scope=machines&action=delete", "DELETE", "/machines/" + u2, 403},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				s := s.On(t)
				tok := s.Token(c.user, basic(c.user, c.pw), c.query)
				r := s.Do(c.method, c.path, nil, bearer(tok))
				if r.Status != c.want {
					t.Fatalf("%s %s: got %s, want %d", c.method, c.path, r, c.want)
				}
			})
		}
	})

	t.Run("token for another user", func(t *testing.T) {
		s := s.On(t)
		s.Must(403, "GET", "/users/t-split/token", nil, basic("t-user", "t-user-pw"))
		s.Must(404, "GET", "/users/nobody/token", nil, admin())
		tok := s.Token("t-split", admin(), "")
		s.Must(200, "GET", "/pools/t-p1", nil, bearer(tok))
	})

	t.Run("expired", func(t *testing.T) {
		s := s.On(t)
		tok := s.Token("t-user", basic("t-user", "t-user-pw"), "?ttl=60")
		s.Must(200, "GET", "/machines/"+u1, nil, bearer(tok))
		// Past its expiry on the server's clock, which also ends the
		// verified token cache's entry: it never outlives the token.
		s.Clock.Advance(61 * time.Second)
		s.Must(403, "GET", "/machines/"+u1, nil, bearer(tok))
	})
}

func accessAuthentication(t *testing.T, s *tserver) {
	s.AddUser("a-user", "a-user-pw", "superuser")
	good := s.Token("a-user", basic("a-user", "a-user-pw"), "")
	parts := strings.Split(good, ".")
	if len(parts) != 3 {
		t.Fatalf("token is not a JWS: %q", good)
	}
	sig := []byte(parts[2])
	i := len(sig) / 2
	if sig[i] == 'A' {
		sig[i] = 'B'
	} else {
		sig[i] = 'A'
	}
	badSig := parts[0] + "." + parts[1] + "." + string(sig)
	none := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + parts[1] + "."
	s.AddUser("a-gone", "a-gone-pw", "superuser")
	gone := s.Token("a-gone", basic("a-gone", "a-gone-pw"), "")
	s.Must(200, "DELETE", "/users/a-gone", nil, admin())

	cases := []struct {
		name, authz string
		want        int
	}{
		{"good token", bearer(good), 200},
		{"good basic", basic("a-user", "a-user-pw"), 200},
		{"basic lower-case scheme", "basic " + base64.StdEncoding.EncodeToString([]byte("a-user:a-user-pw")), 200},
		{"wrong signature", bearer(badSig), 403},
		{"garbage", bearer("garbage"), 403},
		{"three garbage segments", bearer("a.b.c"), 403},
		{"alg none", bearer(none), 403},
		{"deleted user", bearer(gone), 403},
		{"wrong password", basic("a-user", "wrong"), 403},
		{"unknown user", basic("nobody-here", "x"), 403},
		{"missing header", "", 401},
		{"basic without colon", "Basic " + base64.StdEncoding.EncodeToString([]byte("a-user")), 401},
		{"basic empty user", basic("", "a-user-pw"), 401},
		{"basic bad base64", "Basic !!!", 401},
		{"bearer empty", "Bearer ", 401},
		{"unknown scheme", "Digest abc", 401},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := s.On(t)
			r := s.Do("GET", "/machines", nil, c.authz)
			if r.Status != c.want {
				t.Fatalf("got %s, want %d", r, c.want)
			}
			if c.want == 401 && r.Header.Get("WWW-Authenticate") == "" {
				t.Fatalf("401 without WWW-Authenticate: %v", r.Header)
			}
			if c.want >= 400 {
				wantDRPError(t, r, c.want, "", "")
			}
		})
	}
	t.Run("huge header", func(t *testing.T) {
		for _, n := range []int{8 << 10, 12 << 10, 20 << 10, 64 << 10, 1 << 20} {
			start := time.Now()
			status := accRawStatus(t, s, "Bearer "+strings.Repeat("x", n))
			if status != 431 && status != 401 {
				t.Fatalf("%d bytes: got %d, want 431 or 401", n, status)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("%d bytes: took %s", n, d)
			}
		}
	})
}

// accRawStatus sends GET /machines with authz over its own TLS connection
// and returns the status. The server may answer an oversized header and
// close the connection before reading all of it, which resets the client's
// write: the answer already sent is still read.
func accRawStatus(t *testing.T, s *tserver, authz string) int {
	t.Helper()
	u, err := url.Parse(s.Base)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := tls.Dial("tcp", u.Host, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // self-signed test server
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	req := "GET " + u.Path + "/machines HTTP/1.1\r\nHost: " + u.Host + "\r\nAuthorization: " + authz + "\r\n\r\n"
	_, werr := io.WriteString(conn, req)
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer (write error %v): %v", werr, err)
	}
	defer res.Body.Close()
	return res.StatusCode
}

func accessMachineTokens(t *testing.T, s *tserver) {
	s.Must(201, "POST", "/tasks", map[string]any{"Name": "mt-task", "Templates": []map[string]any{
		{"Name": "tokens", "Path": "", "Contents": "op={{.GenerateToken}}\ninf={{.GenerateInfiniteToken}}\n"}}}, admin())
	s.Must(201, "POST", "/stages", map[string]any{"Name": "mt-stage", "Tasks": []string{"mt-task"}}, admin())
	s.Must(201, "POST", "/workflows", map[string]any{"Name": "mt-wf", "Stages": []string{"mt-stage"}}, admin())
	own := s.AddMachine("mt-own", map[string]any{"Workflow": "mt-wf"})
	other := s.AddMachine("mt-other", map[string]any{"Workflow": "mt-wf"})
	var job struct{ Uuid, Machine, Task string }
	// The first answers roll the machine into its stage (204).
	for i := 0; i < 5 && job.Uuid == ""; i++ {
		if r := s.Do("POST", "/jobs", map[string]any{"Machine": own}, admin()); r.Status == 201 {
			r.JSON(t, &job)
		} else if r.Status != 204 {
			t.Fatalf("POST /jobs: %s", r)
		}
	}
	if job.Task != "mt-task" {
		t.Fatalf("job %+v", job)
	}
	op, inf := renderTokens(t, s, job.Uuid, admin())

	cases := []struct {
		name, method, path string
		body               any
		want               int
	}{
		{"get itself", "GET", "/machines/" + own, nil, 200},
		{"patch itself", "PATCH", "/machines/" + own, jsonPatch("replace", "/Description", "by token"), 200},
		{"patch own params", "PATCH", "/machines/" + own, jsonPatch("add", "/Params/mt-x", 1), 200},
		{"get task", "GET", "/tasks/mt-task", nil, 200},
		{"get stage", "GET", "/stages/mt-stage", nil, 200},
		{"get own job", "GET", "/jobs/" + job.Uuid, nil, 200},
		{"own job actions", "GET", "/jobs/" + job.Uuid + "/actions", nil, 200},
		{"info", "GET", "/info", nil, 200},
		// Another machine is missing to an operations token, as a machine
		// its tenant hides would be.
		{"get another machine", "GET", "/machines/" + other, nil, 404},
		{"patch another machine", "PATCH", "/machines/" + other, jsonPatch("replace", "/Description", "x"), 404},
		{"job for another machine", "POST", "/jobs", map[string]any{"Machine": other}, 422},
		{"list users", "GET", "/users", nil, 403},
		{"list machines", "GET", "/machines", nil, 403},
		{"delete itself", "DELETE", "/machines/" + own, nil, 403},
		{"create machine", "POST", "/machines", map[string]any{"Name": "mt-new"}, 403},
		{"workflow", "GET", "/workflows/mt-wf", nil, 403},
		{"user token", "GET", "/users/rocketskates/token", nil, 403},
	}
	for _, tk := range []struct{ name, tok string }{{"GenerateToken", op}, {"GenerateInfiniteToken", inf}} {
		t.Run(tk.name, func(t *testing.T) {
			s := s.On(t)
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					s := s.On(t)
					r := s.Do(c.method, c.path, c.body, bearer(tk.tok))
					if r.Status != c.want {
						t.Fatalf("got %s, want %d", r, c.want)
					}
				})
			}
			t.Run("create a job for itself", func(t *testing.T) {
				s := s.On(t)
				// The current job is still created: the answer is a conflict
				// or a rerun, never a refusal.
				r := s.Do("POST", "/jobs", map[string]any{"Machine": own}, bearer(tk.tok))
				if r.Status == 401 || r.Status == 403 || r.Status >= 500 {
					t.Fatalf("got %s", r)
				}
			})
		})
	}
	t.Run("dies when the machine Secret changes", func(t *testing.T) {
		s := s.On(t)
		r := s.Must(200, "PATCH", "/machines/"+own, jsonPatch("replace", "/Secret", "chosen-by-client"), admin())
		if bytes.Contains(r.Body, []byte("chosen-by-client")) {
			t.Fatalf("Secret echoed: %s", r.Body)
		}
		s.Must(403, "GET", "/machines/"+own, nil, bearer(op))
		s.Must(403, "GET", "/machines/"+own, nil, bearer(inf))
		op2, inf2 := renderTokens(t, s, job.Uuid, admin())
		s.Must(200, "GET", "/machines/"+own, nil, bearer(op2))
		s.Must(200, "GET", "/machines/"+own, nil, bearer(inf2))
		// Another machine's Secret change leaves these alone.
		s.Must(200, "PATCH", "/machines/"+other, jsonPatch("replace", "/Secret", ""), admin())
		s.Must(200, "GET", "/machines/"+own, nil, bearer(op2))
		s.Must(200, "GET", "/machines/"+own, nil, bearer(inf2))
	})
	t.Run("dies when the system Secret rotates", func(t *testing.T) {
		s := s.On(t)
		op3, inf3 := renderTokens(t, s, job.Uuid, admin())
		s.Must(200, "GET", "/machines/"+own, nil, bearer(op3))
		s.Must(200, "POST", "/system/actions/rotateSecret", nil, admin())
		s.Must(403, "GET", "/machines/"+own, nil, bearer(op3))
		s.Must(403, "GET", "/machines/"+own, nil, bearer(inf3))
	})
}

// TestE2EAccessSecrets rotates user and system Secrets on servers of its
// own: the system rotation ends every token, which would break any test
// sharing the server.
func TestE2EAccessSecrets(t *testing.T) {
	t.Parallel()
	forEachDB(t, accessSecrets, licenseArgs(t)...)
}

func accessSecrets(t *testing.T, s *tserver) {
	s.AddUser("x-bob", "x-bob-pw")
	s.AddUser("x-carol", "x-carol-pw")
	s.AddUser("x-granter", "x-granter-pw", "superuser")
	s.AddUser("x-dave", "x-dave-pw")
	t.Run("user Secret kills only that user's tokens", func(t *testing.T) {
		s := s.On(t)
		bob := s.Token("x-bob", basic("x-bob", "x-bob-pw"), "")
		carol := s.Token("x-carol", basic("x-carol", "x-carol-pw"), "")
		s.Must(200, "POST", "/users/x-bob/secret", nil, admin())
		s.Must(403, "GET", "/users/x-bob", nil, bearer(bob))
		s.Must(200, "GET", "/users/x-carol", nil, bearer(carol))
		s.Must(200, "GET", "/users/x-bob", nil, basic("x-bob", "x-bob-pw"))
		s.Must(404, "POST", "/users/nobody/secret", nil, admin())
		// Rotating needs the right to update the Secret: not one's own.
		s.Must(403, "POST", "/users/x-carol/secret", nil, basic("x-bob", "x-bob-pw"))
	})
	t.Run("PATCH of /Secret rotates it", func(t *testing.T) {
		s := s.On(t)
		carol := s.Token("x-carol", basic("x-carol", "x-carol-pw"), "")
		r := s.Must(200, "PATCH", "/users/x-carol", jsonPatch("replace", "/Secret", "known-value"), admin())
		wantNoSecrets(t, "patch reply", r.Body)
		s.Must(403, "GET", "/users/x-carol", nil, bearer(carol))
	})
	t.Run("granted token carries the user's rights", func(t *testing.T) {
		s := s.On(t)
		tok := s.Token("x-dave", basic("x-granter", "x-granter-pw"), "")
		s.Must(403, "GET", "/users", nil, bearer(tok))
		s.Must(200, "GET", "/users/x-dave", nil, bearer(tok))
	})
	t.Run("deleted user's Basic", func(t *testing.T) {
		s := s.On(t)
		s.AddUser("x-gone", "x-gone-pw", "superuser")
		s.Must(200, "GET", "/users", nil, basic("x-gone", "x-gone-pw"))
		s.Must(200, "DELETE", "/users/x-gone", nil, admin())
		s.Must(403, "GET", "/users", nil, basic("x-gone", "x-gone-pw"))
		// Re-created with another password: the old one must not work.
		s.AddUser("x-gone", "x-gone-pw2", "superuser")
		s.Must(403, "GET", "/users", nil, basic("x-gone", "x-gone-pw"))
	})
	t.Run("grantor Secret", func(t *testing.T) {
		s := s.On(t)
		granted := s.Token("x-dave", basic("x-granter", "x-granter-pw"), "")
		own := s.Token("x-dave", basic("x-dave", "x-dave-pw"), "")
		s.Must(200, "GET", "/users/x-dave", nil, bearer(granted))
		s.Must(200, "POST", "/users/x-granter/secret", nil, admin())
		s.Must(403, "GET", "/users/x-dave", nil, bearer(granted))
		s.Must(200, "GET", "/users/x-dave", nil, bearer(own))
	})
	t.Run("system Secret kills every token", func(t *testing.T) {
		s := s.On(t)
		toks := []string{
			s.Token("rocketskates", admin(), ""),
			s.Token("x-dave", basic("x-dave", "x-dave-pw"), ""),
			s.Token("x-dave", admin(), ""),
		}
		s.Must(403, "POST", "/system/actions/rotateSecret", nil, basic("x-dave", "x-dave-pw"))
		s.Must(200, "POST", "/system/actions/rotateSecret", nil, bearer(toks[0]))
		for i, tok := range toks {
			if r := s.Do("GET", "/users/x-dave", nil, bearer(tok)); r.Status != 403 {
				t.Fatalf("token %d after rotation: %s", i, r)
			}
		}
		s.Must(200, "GET", "/users/x-dave", nil, basic("x-dave", "x-dave-pw"))
		s.Must(200, "GET", "/users", nil, admin())
		tok := s.Token("x-dave", basic("x-dave", "x-dave-pw"), "")
		s.Must(200, "GET", "/users/x-dave", nil, bearer(tok))
	})
}

// TestE2EAccessLoginLimit runs on its own server: the per-IP failure limit
// would otherwise leak into the other tests, which all come from 127.0.0.1.
func TestE2EAccessLoginLimit(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, s *tserver) {
		s.AddUser("l-victim", "l-victim-pw")
		var last resp
		for i := 0; i < 40; i++ {
			last = s.Do("GET", "/users/l-victim", nil, basic("l-victim", "wrong-"+string(rune('a'+i%26))))
			if last.Status == 429 {
				break
			}
			if last.Status != 403 {
				t.Fatalf("attempt %d: got %s, want 403 or 429", i, last)
			}
		}
		if last.Status != 429 {
			t.Fatalf("no 429 after 40 wrong passwords: %s", last)
		}
		wantDRPError(t, last, 429, "AUTH", "too many failed logins")
	})
}

// TestE2EAccessDiscovery checks the discovery token. Nothing over HTTP
// renders a template for a machine the server does not know, so the token
// is minted by the server's own template token source over the server's
// store while the server is stopped, then used against the restarted one.
func TestE2EAccessDiscovery(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, s *tserver) {
		known := s.AddMachine("d-known", nil)
		s.Stop()
		dsn := s.DSN
		if dsn == "" {
			dsn = s.DataDir + "/provgate.db"
		}
		st, err := store.Open(t.Context(), dsn, store.Options{Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		mt := auth.NewMachineTokens(auth.New(auth.NewSecretCache(st), auth.Options{}), prefs.New(st))
		disc, err := mt.GenerateToken(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		disc2, err := mt.GenerateToken(t.Context(), &backend.Machine{})
		if err != nil {
			t.Fatal(err)
		}
		if inf, err := mt.GenerateInfiniteToken(t.Context(), nil); err != nil || inf != "" {
			t.Fatalf("infinite token for an unknown machine: %q, %v", inf, err)
		}
		_ = st.Close()
		s = startE2EIn(t, dbCase{Name: s.Name, DSN: s.DSN}, s.DataDir)

		for _, tok := range []string{disc, disc2} {
			var m struct{ Uuid string }
			s.Must(201, "POST", "/machines", map[string]any{"Name": "d-new-" + tok[len(tok)-6:]}, bearer(tok)).JSON(t, &m)
			cases := []struct {
				name, method, path string
				body               any
				want               int
			}{
				{"get the new machine", "GET", "/machines/" + m.Uuid, nil, 200},
				{"get another machine", "GET", "/machines/" + known, nil, 200},
				{"patch a machine", "PATCH", "/machines/" + m.Uuid, jsonPatch("replace", "/Description", "x"), 403},
				{"delete a machine", "DELETE", "/machines/" + m.Uuid, nil, 403},
				{"list users", "GET", "/users", nil, 403},
				{"get a task", "GET", "/tasks/callback-task", nil, 403},
				{"create a job", "POST", "/jobs", map[string]any{"Machine": m.Uuid}, 403},
				{"create a pool", "POST", "/pools", map[string]any{"Id": "d-p"}, 403},
			}
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					if r := s.On(t).Do(c.method, c.path, c.body, bearer(tok)); r.Status != c.want {
						t.Fatalf("got %s, want %d", r, c.want)
					}
				})
			}
		}
		s.Must(200, "POST", "/system/actions/rotateSecret", nil, admin())
		s.Must(403, "GET", "/machines/"+known, nil, bearer(disc))
	})
}
