package auth

import (
	"context"
	"testing"
	"time"
)

func BenchmarkAuthenticateBearer(b *testing.B) {
	s := newFakeSecrets()
	bob := s.addUser(b, "bob", "bob-secret-00001", "pw", "operator")
	a := New(s, Options{})
	tok, _, err := a.IssueUserToken(context.Background(), bob, basicPrincipal(bob), time.Hour, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	header := "Bearer " + tok
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := a.Authenticate(ctx, header, "192.0.2.1"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAuthenticateBasicCached(b *testing.B) {
	s := newFakeSecrets()
	// Production parameters: only the first login pays for them.
	h, err := HashPassword("pw")
	if err != nil {
		b.Fatal(err)
	}
	s.users["bob"] = UserRecord{Name: "bob", Secret: "bob-secret-00001", PasswordHash: h, Roles: []string{"operator"}}
	a := New(s, Options{})
	header := basicHeader("bob", "pw")
	ctx := context.Background()
	if _, err := a.Authenticate(ctx, header, "192.0.2.1"); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := a.Authenticate(ctx, header, "192.0.2.1"); err != nil {
			b.Fatal(err)
		}
	}
}
