package main

import (
	"errors"
	"flag"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

func writeConfig(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "provgate.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestConfigFilePrecedence: flags win over the environment, which wins over
// the file, which wins over the defaults.
func TestConfigFilePrecedence(t *testing.T) {
	file := writeConfig(t, "# comment\nlisten: 127.0.0.1:7001\nlog-level: debug\nbody-limit: 1MiB\nmax-token-ttl: 2h\nno-tls: true\ndata-dir: /srv/from-file\n")
	env := map[string]string{"PROVGATE_LISTEN": "127.0.0.1:7002", "PROVGATE_LOG_LEVEL": "warn"}
	c, err := loadConfig([]string{"--config", file, "--log-level", "error"}, envMap(env), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := defaultConfig()
	want.ConfigFile = file
	want.Listen = "127.0.0.1:7002" // environment over file
	want.LogLevel = "error"        // flag over environment and file
	want.BodyLimit = 1 << 20       // file over default
	want.MaxTokenTTL = 2 * time.Hour
	want.NoTLS = true
	want.DataDir = "/srv/from-file"
	if c != want {
		t.Fatalf("got  %v\nwant %v", c, want)
	}

	// PROVGATE_CONFIG names the file too; --config wins over it.
	c, err = loadConfig(nil, envMap(map[string]string{"PROVGATE_CONFIG": file}), io.Discard)
	if err != nil || c.Listen != "127.0.0.1:7001" || c.ConfigFile != file {
		t.Fatalf("PROVGATE_CONFIG: %v %v", c, err)
	}
	other := writeConfig(t, "listen: 127.0.0.1:7003\n")
	c, err = loadConfig([]string{"--config", other}, envMap(map[string]string{"PROVGATE_CONFIG": file}), io.Discard)
	if err != nil || c.Listen != "127.0.0.1:7003" || c.LogLevel != "info" {
		t.Fatalf("--config over PROVGATE_CONFIG: %v %v", c, err)
	}
	// An empty file, or one of comments only, sets nothing.
	for _, text := range []string{"", "# nothing\n"} {
		c, err = loadConfig([]string{"--config", writeConfig(t, text)}, envMap(nil), io.Discard)
		if err != nil || c.Listen != ":8092" {
			t.Fatalf("file %q: %v %v", text, c, err)
		}
	}
}

// TestConfigFileStrict: every mistake in the file is a usage error naming
// the file, the line and the key; nothing is guessed.
func TestConfigFileStrict(t *testing.T) {
	tests := []struct{ name, text, want string }{
		{"unknown key", "listen: :8092\nlisen: :9000\n", `line 2: unknown key "lisen" (keys are the flag names of provgate serve -h without the dashes; did you mean listen?)`},
		{"env-style key", "data_dir: /x\n", `line 1: unknown key "data_dir" (keys are the flag names of provgate serve -h without the dashes; did you mean data-dir?)`},
		{"config in config", "config: other.yaml\n", `line 1: unknown key "config"`},
		{"repeated key", "listen: :1\nlog-level: info\nlisten: :2\n", "line 3: listen is set again (first on line 1)"},
		{"nested value", "listen:\n  host: 127.0.0.1\n", "line 2: listen: want a single value, not a list or mapping"},
		{"list value", "callback-allow: [127.0.0.1/32]\n", "line 1: callback-allow: want a single value"},
		{"no value", "database:\n", `line 1: database has no value (write "" for an empty one)`},
		{"bad duration", "shutdown-timeout: soon\n", `line 1: shutdown-timeout: parse error`},
		{"yaml 1.1 boolean", "no-tls: yes\n", "line 1: no-tls: parse error"},
		{"bad size", "body-limit: lots\n", `line 1: body-limit: "lots" is not a byte count`},
		{"not a mapping", "- listen\n", "line 1: want a mapping of flag names to values"},
		{"two documents", "listen: :1\n---\nlisten: :2\n", "want one YAML document"},
		{"syntax", "listen: \"unterminated\n", "--config"},
		{"validated like flags", "listen: 8092\n", `--listen "8092": want host:port`},
		{"dsn password never shown", "database: ./file.db password=hunter2\n", "--database: not a database DSN"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := writeConfig(t, tt.text)
			_, err := loadConfig([]string{"--config", file}, envMap(nil), io.Discard)
			var ue usageError
			if err == nil || !errors.As(err, &ue) {
				t.Fatalf("got %v, want a usage error", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %q, want it to contain %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Fatalf("error shows a password: %v", err)
			}
		})
	}
	_, err := loadConfig([]string{"--config", filepath.Join(t.TempDir(), "missing.yaml")}, envMap(nil), io.Discard)
	if err == nil || !strings.Contains(err.Error(), "missing.yaml: no such file or directory") {
		t.Fatalf("missing file: %v", err)
	}
}

// TestConfigSampleFile: deploy/provgate.yaml names every flag, and what it
// sets loads and validates.
func TestConfigSampleFile(t *testing.T) {
	const sample = "../../deploy/provgate.yaml"
	text, err := os.ReadFile(sample)
	if err != nil {
		t.Fatal(err)
	}
	c := defaultConfig()
	c.flagSet("serve").VisitAll(func(f *flag.Flag) {
		if f.Name == configFlag {
			return
		}
		if !regexp.MustCompile(`(?m)^#? ?` + regexp.QuoteMeta(f.Name) + `:`).Match(text) {
			t.Errorf("%s does not document the key %s", sample, f.Name)
		}
	})
	got, err := loadConfig([]string{"--config", sample}, envMap(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if got.DataDir != "/var/lib/provgate" || got.Listen != ":8092" || got.BodyLimit != 4<<20 {
		t.Fatalf("sample loaded as %v", got)
	}
}

// TestE2EConfigFile: a server started with only --config takes its
// listener, data dir and first admin password from the file.
func TestE2EConfigFile(t *testing.T) {
	dir := t.TempDir()
	file := writeConfig(t, "listen: 127.0.0.1:0\ndata-dir: "+dir+"\nadmin-password: from-the-file-1\nshutdown-timeout: 5s\n")
	s := startCLI(t, map[string]string{"PROVGATE_ADMIN_PASSWORD": ""}, "serve", "--config", file)
	req, _ := http.NewRequest(http.MethodGet, "https://"+s.addr+"/api/v3/info", nil)
	req.SetBasicAuth("rocketskates", "from-the-file-1")
	resp, err := skipVerifyClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("info with the admin password from the file: %d", resp.StatusCode)
	}
	if _, err := os.Stat(filepath.Join(dir, "provgate.db")); err != nil {
		t.Fatalf("data dir from the file not used: %v", err)
	}
	if strings.Contains(s.stderr.String(), "from-the-file-1") {
		t.Fatal("the admin password from the file was logged")
	}
	if !strings.Contains(s.stderr.String(), `"config":"`+file+`"`) {
		t.Fatalf("start log does not name the config file:\n%s", s.stderr.String())
	}
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
}
