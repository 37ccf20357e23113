package backend

import "testing"

func TestNames(t *testing.T) {
	rules := []struct {
		name  string
		valid func(string) bool
	}{
		{"name", ValidName},
		{"user", ValidUserName},
		{"machine", ValidMachineName},
		{"param", ValidParamName},
	}
	tests := []struct {
		in   string
		want bool
	}{
		{"alice", true},
		{"alice smith", true},
		{"alice  smith", true},
		{"alice ", false},
		{"alice  ", false},
		{" alice", false},
		{"alice\t", false},
		{"alice\n", false},
		{"alice\u00a0", false},
		{"alice\u2003", false},
		{"a", false},
		{"", false},
	}
	for _, r := range rules {
		for _, tt := range tests {
			if got := r.valid(tt.in); got != tt.want {
				t.Errorf("%s rule on %q: got %v, want %v", r.name, tt.in, got, tt.want)
			}
		}
	}
}
