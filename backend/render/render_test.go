package render

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/provgate/provgate/backend"
)

type fakeTokens struct{}

func (fakeTokens) GenerateToken(_ context.Context, m *backend.Machine) (string, error) {
	return "tok-" + m.Uuid, nil
}
func (fakeTokens) GenerateInfiniteToken(_ context.Context, m *backend.Machine) (string, error) {
	return "inf-" + m.Uuid, nil
}

func testEnv() Env {
	params := map[string]any{
		"plain":   "v1",
		"num":     float64(3),
		"obj":     map[string]any{"a": []any{float64(1), "x"}},
		"tmpl":    "name={{.Machine.Name}}",
		"nested":  map[string]any{"k": "{{.ShortName}}"},
		"self":    `{{.ParamExpand "self"}}`,
		"profile": "from-profile",
	}
	return Env{
		Machine: &backend.Machine{
			Name: "node1.example.com", Uuid: "3f1b9a3e-0000-4000-8000-000000000001",
			Address: "192.168.1.10", Profiles: []string{"p1"}, Secret: "machine-secret",
			HardwareAddrs: []string{"AA:BB:CC:DD:EE:0F", "11:22:33:44:55:66"},
			Params:        map[string]any{"plain": "v1"},
		},
		Params: func(_ context.Context, name string) (any, bool, error) {
			v, ok := params[name]
			return v, ok, nil
		},
		Info: Info{Address: "10.0.0.1", ApiPort: 8092, FilePort: 8091, Id: "ep1", Version: "v4"},
		AuthString: func(_ context.Context, name string) (string, error) {
			return "auth-" + name, nil
		},
		Tokens: fakeTokens{},
	}
}

func TestFunctions(t *testing.T) {
	tests := []struct {
		name string
		mode Mode
		text string
		want string
	}{
		{"machine field", Caller, "{{.Machine.Name}}", "node1.example.com"},
		{"machine Uuid", Caller, "{{.Machine.Uuid}}", "3f1b9a3e-0000-4000-8000-000000000001"},
		{"machine UUID alias", Caller, "{{.Machine.UUID}}", "3f1b9a3e-0000-4000-8000-000000000001"},
		{"machine Secret hidden", Caller, "[{{.Machine.Secret}}]", "[]"},
		{"Param string", Caller, `{{.Param "plain"}}`, "v1"},
		{"Param from hierarchy", Caller, `{{.Param "profile"}}`, "from-profile"},
		{"Param missing with default", Caller, `{{.Param "nope" | default "d"}}`, "d"},
		{"ParamExpand", Caller, `{{.ParamExpand "tmpl"}}`, "name=node1.example.com"},
		{"ParamExpand nested", Caller, `{{index (.ParamExpand "nested") "k"}}`, "node1"},
		{"ParamAsJSON", Caller, `{{.ParamAsJSON "obj"}}|`, `{"a":[1,"x"]}|`},
		{"ParamAsJSON missing", Caller, `{{.ParamAsJSON "nope"}}`, `null`},
		{"ParamAsYAML", Caller, `{{.ParamAsYAML "obj"}}`, "a:\n- 1\n- x\n"},
		{"ParamExists yes", Caller, `{{.ParamExists "plain"}}`, "true"},
		{"ParamExists no", Caller, `{{.ParamExists "nope"}}`, "false"},
		{"HexAddress", Caller, "{{.HexAddress}}", "C0A8010A"},
		{"HexAddress on Machine", Caller, "{{.Machine.HexAddress}}", "C0A8010A"},
		{"ShortName", Caller, "{{.ShortName}}", "node1"},
		{"Path", Caller, "{{.Path}}", "machines/3f1b9a3e-0000-4000-8000-000000000001"},
		{"Url", Caller, "{{.Url}}", "http://10.0.0.1:8091/machines/3f1b9a3e-0000-4000-8000-000000000001"},
		{"HasProfile yes", Caller, `{{.HasProfile "p1"}}`, "true"},
		{"HasProfile no", Caller, `{{.Machine.HasProfile "p2"}}`, "false"},
		{"MacAddr raw", Caller, "{{.MacAddr}}", "aa:bb:cc:dd:ee:0f"},
		{"MacAddr pxe", Caller, `{{.MacAddr "pxe"}}`, "01-aa-bb-cc-dd-ee-0f"},
		{"MacAddr pxelinux", Caller, `{{.Machine.MacAddr "pxelinux"}}`, "01-aa-bb-cc-dd-ee-0f"},
		{"MacAddr rpi4", Caller, `{{.MacAddr "rpi4"}}`, "aa-bb-cc-dd-ee-0f"},
		{"ProvisionerAddress", Caller, "{{.ProvisionerAddress}}", "10.0.0.1"},
		{"ProvisionURL", Caller, "{{.ProvisionURL}}", "http://10.0.0.1:8091"},
		{"ProvisionerURL alias", Caller, "{{.ProvisionerURL}}", "http://10.0.0.1:8091"},
		{"ApiURL https", Caller, "{{.ApiURL}}", "https://10.0.0.1:8092"},
		{"Info", Caller, "{{.Info.Id}} {{.Info.ApiPort}}", "ep1 8092"},
		{"ParseURL host", Caller, `{{.ParseURL "host" "https://a.example:8443/x/y?q=1"}}`, "a.example:8443"},
		{"ParseURL scheme", Caller, `{{.ParseURL "scheme" "https://a.example/x"}}`, "https"},
		{"ParseURL path", Caller, `{{.ParseURL "path" "https://a.example/x/y"}}`, "/x/y"},
		{"ParseURL port", Caller, `{{.ParseURL "port" "https://a.example:8443/"}}`, "8443"},
		{"ParseURL query", Caller, `{{.ParseURL "query" "https://a.example/?q=1&r=2"}}`, "q=1&r=2"},
		{"ParseUrl alias", Caller, `{{.ParseUrl "hostname" "https://a.example:1/"}}`, "a.example"},
		{"GetAuthString config", Config, `{{.GetAuthString "ex"}}`, "auth-ex"},
		{"GetAuthString task", Task, `{{.GetAuthString "ex"}}`, "auth-ex"},
		{"GenerateToken task", Task, `{{.GenerateToken}}`, "tok-3f1b9a3e-0000-4000-8000-000000000001"},
		{"GenerateInfiniteToken task", Task, `{{.GenerateInfiniteToken}}`, "inf-3f1b9a3e-0000-4000-8000-000000000001"},
		{"sprig works", Caller, `{{"abc" | upper}} {{list 1 2 | len}}`, "ABC 2"},
		{"shellQuote", Caller, `{{shellQuote "it's; rm -rf /"}}`, `'it'\''s; rm -rf /'`},
		{"range small int", Caller, `{{range 3}}x{{end}}`, "xxx"},
		{"until small", Caller, `{{range until 3}}{{.}}{{end}}`, "012"},
		{"seq small", Caller, `{{seq 3}}`, "1 2 3"},
		{"indent", Caller, `{{indent 2 "a\nb"}}`, "  a\n  b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Render(context.Background(), tt.mode, "t", tt.text, testEnv(), Limits{})
			if err != nil {
				t.Fatalf("Render: %v", err)
			}
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestIPv6Bracketed(t *testing.T) {
	env := testEnv()
	env.Info.Address = "fd00::1"
	got, err := Render(context.Background(), Caller, "t", "{{.ApiURL}} {{.ProvisionURL}}", env, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if want := "https://[fd00::1]:8092 http://[fd00::1]:8091"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestRestrictedFunctions(t *testing.T) {
	tests := []struct {
		name string
		mode Mode
		text string
	}{
		{"caller GetAuthString", Caller, `{{.GetAuthString "ex"}}`},
		{"caller GenerateToken", Caller, `{{.GenerateToken}}`},
		{"caller GenerateInfiniteToken", Caller, `{{.GenerateInfiniteToken}}`},
		{"config GenerateToken", Config, `{{.GenerateToken}}`},
		{"env removed", Caller, `{{env "HOME"}}`},
		{"expandenv removed", Task, `{{expandenv "$HOME"}}`},
		{"getHostByName removed", Task, `{{getHostByName "localhost"}}`},
		{"now removed", Caller, `{{now}}`},
		{"randAlpha removed", Caller, `{{randAlpha 5}}`},
		{"genPrivateKey removed", Task, `{{genPrivateKey "rsa"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Render(context.Background(), tt.mode, "t", tt.text, testEnv(), Limits{})
			if err == nil {
				t.Fatalf("Render = %q, want an error", got)
			}
			if strings.Contains(err.Error(), "auth-") || strings.Contains(err.Error(), "tok-") {
				t.Errorf("error leaks a value: %v", err)
			}
		})
	}
}

func TestCallerErrorsHideData(t *testing.T) {
	env := testEnv()
	env.Params = func(context.Context, string) (any, bool, error) { return "s3cr3t-value", true, nil }
	_, err := Render(context.Background(), Caller, "data-override", `{{fail (.Param "x")}}`, env, Limits{})
	if err == nil {
		t.Fatal("want an error")
	}
	if strings.Contains(err.Error(), "s3cr3t") {
		t.Errorf("caller-mode error leaks data: %v", err)
	}
	// Operator templates keep the detail, which helps fixing configuration.
	_, err = Render(context.Background(), Config, "url", `{{fail "boom"}}`, env, Limits{})
	if err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("config-mode error = %v, want detail", err)
	}
}

func TestHostileTemplatesBounded(t *testing.T) {
	tests := []struct {
		name string
		text string
		want error // nil: any error
	}{
		{"range huge int", `{{range 100000000000}}{{end}}`, errTooMany},
		{"range computed int", `{{range (mul 1000000 1000000)}}{{end}}`, errTooMany},
		{"until huge", `{{range until 1000000000}}{{end}}`, errTooMany},
		{"untilStep huge", `{{untilStep 0 1000000000 1}}`, errTooMany},
		{"seq huge", `{{seq 1000000000}}`, errTooMany},
		{"repeat huge", `{{repeat 1000000000 "a"}}`, ErrOutputTooLarge},
		{"indent huge", `{{indent 1000000000 "a"}}`, ErrOutputTooLarge},
		{"doubling string", `{{$s := "aaaaaaaa"}}{{range until 40}}{{$s = cat $s $s}}{{end}}`, ErrOutputTooLarge},
		{"doubling list", `{{$l := until 100}}{{range until 40}}{{$l = concat $l $l}}{{end}}`, errTooMany},
		{"output cap", `{{range until 10000}}{{printf "%0100000d" 1}}{{end}}`, ErrOutputTooLarge},
		{"nested ranges time out", `{{$l := until 10000}}{{range $l}}{{range $l}}{{range $l}}{{end}}{{end}}{{end}}`, ErrTimeout},
		{"recursion", `{{define "a"}}{{template "a" .}}{{end}}{{template "a" .}}`, nil},
		{"self expansion", `{{.ParamExpand "self"}}`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A case that a size or count limit must stop gets a clock budget
			// it cannot reach on a loaded machine, so that the limit, not the
			// clock, ends it; the others must be ended by the 300ms budget.
			budget := 300 * time.Millisecond
			if errors.Is(tt.want, ErrOutputTooLarge) || errors.Is(tt.want, errTooMany) {
				budget = time.Minute
			}
			start := time.Now()
			_, err := Render(context.Background(), Caller, "t", tt.text, testEnv(), Limits{Timeout: budget})
			if err == nil {
				t.Fatal("want an error")
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("err = %v, want %v", err, tt.want)
			}
			if d := time.Since(start); budget < time.Minute && d > 2*time.Second {
				t.Errorf("took %v", d)
			}
		})
	}
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name, text string
		mode       Mode
		ok         bool
	}{
		{"valid", "https://x/{{.Machine.Uuid}}", Config, true},
		{"unclosed", "https://x/{{.Machine.Uuid", Config, false},
		{"unknown function", "{{nosuch 1}}", Config, false},
		{"removed function", "{{env \"X\"}}", Config, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Check("url", tt.text, tt.mode)
			if (err == nil) != tt.ok {
				t.Errorf("Check = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

// TestParamExpandIsCallerMode: param values come from whoever may set a
// param, so ParamExpand renders them with the caller functions even inside
// configuration and task templates: they cannot run exec auths or mint
// machine tokens, directly or through further expansion.
func TestParamExpandIsCallerMode(t *testing.T) {
	params := map[string]any{
		"auth":     `{{.GetAuthString "ex"}}`,
		"authFunc": `{{GetAuthString "ex"}}`,
		"token":    `{{.GenerateToken}}`,
		"infinite": `{{.GenerateInfiniteToken}}`,
		"nested":   map[string]any{"k": []any{`{{.GetAuthString "ex"}}`}},
		"indirect": `{{.ParamExpand "auth"}}`,
		"plain":    `name={{.Machine.Name}}`,
	}
	for _, mode := range []Mode{Config, Task} {
		for _, name := range []string{"auth", "authFunc", "token", "infinite", "nested", "indirect"} {
			t.Run(mode.String()+"/"+name, func(t *testing.T) {
				var calls int
				env := testEnv()
				env.Params = func(_ context.Context, n string) (any, bool, error) { v, ok := params[n]; return v, ok, nil }
				env.AuthString = func(context.Context, string) (string, error) { calls++; return "auth-output", nil }
				env.Tokens = countingTokens{&calls}
				got, err := Render(context.Background(), mode, "url", `x/{{.ParamExpand "`+name+`"}}`, env, Limits{})
				if err == nil {
					t.Fatalf("Render = %q, want an error", got)
				}
				if calls != 0 {
					t.Errorf("a param template reached %d privileged functions", calls)
				}
				if strings.Contains(err.Error(), "auth-output") || strings.Contains(err.Error(), "tok-") {
					t.Errorf("error leaks a value: %v", err)
				}
			})
		}
		t.Run(mode.String()+"/outer template keeps its functions", func(t *testing.T) {
			env := testEnv()
			env.Params = func(_ context.Context, n string) (any, bool, error) { v, ok := params[n]; return v, ok, nil }
			got, err := Render(context.Background(), mode, "url", `{{.GetAuthString "ex"}} {{.ParamExpand "plain"}}`, env, Limits{})
			if err != nil || got != "auth-ex name=node1.example.com" {
				t.Errorf("Render = %q, %v", got, err)
			}
		})
	}
}

type countingTokens struct{ n *int }

func (c countingTokens) GenerateToken(context.Context, *backend.Machine) (string, error) {
	*c.n++
	return "tok-x", nil
}
func (c countingTokens) GenerateInfiniteToken(context.Context, *backend.Machine) (string, error) {
	*c.n++
	return "tok-inf", nil
}

// TestPlainText: text without an action renders as itself, within the
// output limit like any other.
func TestPlainText(t *testing.T) {
	for _, text := range []string{"", "https://hooks.example.com/x?a=1&b=%7B", "a { b } c"} {
		got, err := Render(context.Background(), Config, "t", text, testEnv(), Limits{})
		if err != nil || got != text {
			t.Errorf("Render(%q) = %q, %v", text, got, err)
		}
	}
	if _, err := Render(context.Background(), Config, "t", "0123456789", testEnv(), Limits{MaxOutput: 5}); !errors.Is(err, ErrOutputTooLarge) {
		t.Errorf("over the output limit: err = %v", err)
	}
}
