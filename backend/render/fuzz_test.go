package render

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/provgate/provgate/backend"
)

// canaryTokens mints tokens that must never appear in a Caller render.
type canaryTokens struct{}

func (canaryTokens) GenerateToken(context.Context, *backend.Machine) (string, error) {
	return "canary-token-1", nil
}
func (canaryTokens) GenerateInfiniteToken(context.Context, *backend.Machine) (string, error) {
	return "canary-token-2", nil
}

// FuzzRenderCaller renders arbitrary template text in Caller mode (what a
// callback/data-override from anyone holding an action claim is): it must
// not panic, must return within a bounded time (its budget stretched by a
// busy machine) with no more output
// than allowed, and must never reveal the machine Secret, exec auth output
// or machine tokens, which Caller mode does not have.
func FuzzRenderCaller(f *testing.F) {
	for _, s := range []string{
		"", "{{.Machine.Name}}", `{{range $i := until 100000000}}x{{end}}`, `{{repeat 100000000 "x"}}`,
		`{{range $i := until 10000}}{{range $j := until 10000}}x{{end}}{{end}}`,
		`{{define "a"}}{{template "a" .}}{{end}}{{template "a" .}}`, `{{.Machine.Secret}}`,
		`{{GetAuthString "x"}}`, `{{.GenerateToken}}`, `{{.GenerateInfiniteToken}}`, `{{.Param "secure"}}`,
		`{{.ParamExpand "self"}}`, `{{ .ParamExpand "loop" }}`, `{{printf "%v" .}}`, `{{toJson .}}`,
		`{{ $x := list }}{{range until 10000}}{{ $x = append $x . }}{{end}}{{len $x}}`,
		`{{ $s := "x" }}{{range until 40}}{{ $s = cat $s $s }}{{end}}`, `{{ $s := "xx" }}{{range until 30}}{{ $s = print $s $s }}{{end}}{{len $s}}`,
		strings.Repeat("{{if true}}", 500) + strings.Repeat("{{end}}", 500), `{{ .Info }}{{ .ApiURL }}{{ .MacAddr "pxe" }}`,
		`{{ parseURL "host" "http://a/b" }}`, `{{ .ParseURL "scheme" "::" }}`, `{{ indent 1000000 "x" }}`, `{{ 1 | toString | b64dec }}`,
		`{{ regexReplaceAll "(a+)+$" (repeat 30 "a") "b" }}`, `{{ trunc -1 "abc" }}`, `{{ substr 5 1 "abc" }}`,
		`{{ seq 1 100000000 }}`, `{{ untilStep 0 100000000 1 }}`, `{{ dict }}{{ set (dict) "a" 1 }}`,
	} {
		f.Add(s)
	}
	lim := Limits{MaxOutput: 64 << 10, Timeout: 250 * time.Millisecond, MaxItems: 1000, MaxSource: 16 << 10}
	params := map[string]any{
		"plain":  "v1",
		"secure": map[string]any{"Key": "k", "Nonce": "n", "Payload": "p"},
		"self":   `{{.ParamExpand "self"}}`,
		"loop":   `{{.ParamExpand "loop"}}{{.ParamExpand "loop"}}`,
	}
	env := Env{
		Machine: &backend.Machine{
			Name: "node1.example.com", Uuid: "3f1b9a3e-0000-4000-8000-000000000001",
			Address: "192.168.1.10", Secret: "canary-machine-secret",
			HardwareAddrs: []string{"AA:BB:CC:DD:EE:0F"}, Params: map[string]any{"plain": "v1"},
		},
		Params: func(_ context.Context, name string) (any, bool, error) {
			v, ok := params[name]
			return v, ok, nil
		},
		Info:       Info{Address: "10.0.0.1", ApiPort: 8092, FilePort: 8091, Id: "ep1", Version: "v4"},
		AuthString: func(context.Context, string) (string, error) { return "canary-exec-auth", nil },
		Tokens:     canaryTokens{},
	}
	f.Fuzz(func(t *testing.T, text string) {
		start := time.Now()
		out, err := Render(context.Background(), Caller, "fuzz", text, env, lim)
		// What is guarded is that a render is bounded at all: the seeds
		// above run for minutes without their limits. The allowance is
		// wide because the budget is wall time, and the race detector on a
		// busy machine stretches a bounded render several times over.
		if d := time.Since(start); d > 16*lim.Timeout {
			t.Fatalf("render took %v, budget %v: %q", d, lim.Timeout, text)
		}
		if err != nil {
			return
		}
		if len(out) > lim.MaxOutput {
			t.Fatalf("output %d bytes, limit %d", len(out), lim.MaxOutput)
		}
		for _, c := range []string{"canary-machine-secret", "canary-exec-auth", "canary-token-1", "canary-token-2"} {
			if strings.Contains(out, c) {
				t.Fatalf("caller render revealed %q: %q", c, text)
			}
		}
	})
}
