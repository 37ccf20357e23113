package auth

import "testing"

// TestSubject: a principal has one spelling wherever it is named, DRP's
// "runner:<uuid>" for a machine.
func TestSubject(t *testing.T) {
	if got := (&Principal{Kind: KindUser, Name: "bob"}).Subject(); got != "user:bob" {
		t.Errorf("user: %q", got)
	}
	if got := (&Principal{Kind: KindMachine, Name: "3b1c"}).Subject(); got != "runner:3b1c" {
		t.Errorf("machine: %q", got)
	}
}
