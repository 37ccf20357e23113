package auth

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/provgate/provgate/backend"
)

// FuzzAuthenticate feeds arbitrary Authorization headers to Authenticate:
// no panic, every refusal a 401, 403 or 429 *backend.Error, and success
// only for a real credential: the right password of a stored user, or a
// token minted for a stored user or machine.
func FuzzAuthenticate(f *testing.F) {
	s := newFakeSecrets()
	bob := s.addUser(f, "bob", "bob-secret-00001", "bobpw", "operator")
	s.machines[machine1] = "machine1-secret-1"
	clk := newClock()
	a, _ := newTestAuth(s, Options{Now: clk.Now, FailLimitUser: -1, FailLimitIP: -1, BasicCacheSize: -1})
	ctx := context.Background()
	userTok, _, err := a.IssueUserToken(ctx, bob, basicPrincipal(bob), time.Hour, nil, nil)
	if err != nil {
		f.Fatal(err)
	}
	machTok, _, err := a.IssueMachineToken(ctx, machine1, MachineOperations, time.Hour)
	if err != nil {
		f.Fatal(err)
	}
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	for _, h := range []string{
		"", "Bearer", "Bearer ", "Bearer " + userTok, "bearer  " + machTok, "Bearer " + userTok + "x",
		"Bearer " + strings.Replace(userTok, ".", "..", 1), "Basic " + b64("bob:bobpw"), "Basic " + b64("bob:wrong"),
		"Basic " + b64("bob"), "Basic " + b64(":x"), "Basic !!!", "Basic " + b64("nobody:x"), "Digest x",
		"Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiJib2IifQ.", "Bearer a.b.c", "Basic " + b64("bob:bobpw\x00"),
		"Bearer " + strings.Repeat("A", MaxHeaderLen), "Basic " + b64("bob:bobpw") + "\r\nX: y",
	} {
		f.Add(h)
	}
	f.Fuzz(func(t *testing.T, header string) {
		p, err := a.Authenticate(ctx, header, "")
		if err != nil {
			var be *backend.Error
			if !errors.As(err, &be) {
				t.Fatalf("error is %T: %v", err, err)
			}
			switch be.Code {
			case backend.EUNAUTHORIZED, backend.EFORBIDDEN, backend.ETOOMANY:
			default:
				t.Fatalf("code %s for %q: %v", be.Code, header, err)
			}
			return
		}
		scheme, cred, _ := strings.Cut(header, " ")
		switch {
		case strings.EqualFold(scheme, "Basic"):
			raw, _ := base64.StdEncoding.DecodeString(strings.TrimSpace(cred))
			if string(raw) != "bob:bobpw" || p.Name != "bob" {
				t.Fatalf("basic login accepted %q as %s", raw, p.Name)
			}
		case strings.EqualFold(scheme, "Bearer"):
			// Tokens carry a random id, so each fuzz worker mints its own;
			// any of them verifies everywhere (same keys, same clock). What
			// must hold is that only the subjects we minted for come out.
			if !(p.Kind == KindUser && p.Name == "bob") && !(p.Kind == KindMachine && p.Name == machine1) {
				t.Fatalf("bearer %q accepted as %s %s", cred, p.Kind, p.Name)
			}
		default:
			t.Fatalf("scheme %q accepted", scheme)
		}
	})
}
