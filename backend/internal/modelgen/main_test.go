package main

import (
	"os"
	"testing"
)

// TestGeneratedUpToDate: models_gen.go is what modelgen makes of
// models.go now; run go generate ./backend after changing a kind.
func TestGeneratedUpToDate(t *testing.T) {
	got, err := generate("../../models.go")
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("../../models_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Error("backend/models_gen.go is out of date: run go generate ./backend")
	}
}
