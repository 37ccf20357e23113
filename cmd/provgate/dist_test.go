package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"flag"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// TestMakeDist runs `make dist` and checks what it ships: per platform a
// tarball whose binary is static (no interpreter, no shared libraries),
// built for that platform, with the version stamped, next to LICENSE, the
// README and the systemd files; and SHA256SUMS that match the tarballs.
//
// The target runs for the host's platform only: cross-compiling every
// package again for linux/arm64 would double the test's cost. The other
// default platforms are covered by what differs for them: the target's own
// recipe names them (distPlatforms), each goes through the same loop as the
// host's, and the whole program resolves for each with CGO_ENABLED=0
// (TestDistPlatformsResolve: no package lacks Go files for the platform).
// The repository has no architecture-specific source of its own.
func TestMakeDist(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skipf("make dist builds linux binaries; this host is %s", runtime.GOOS)
	}
	out := t.TempDir()
	const version = "v0.0.0-disttest"
	host := "linux/" + runtime.GOARCH
	cmd := exec.Command("make", "-C", "../..", "dist", "DIST="+out, "VERSION="+version, "DIST_PLATFORMS="+host)
	buildMu.Lock()
	b, err := cmd.CombinedOutput()
	buildMu.Unlock()
	if err != nil {
		t.Fatalf("make dist: %v\n%s", err, b)
	}
	sums, err := os.ReadFile(filepath.Join(out, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	machines := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(sums))
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok {
			t.Fatalf("SHA256SUMS line %q", sc.Text())
		}
		tarball, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		if h := sha256.Sum256(tarball); hex.EncodeToString(h[:]) != sum {
			t.Errorf("%s: SHA256SUMS says %s, the file hashes to %x", name, sum, h)
		}
		m := regexp.MustCompile(`^provgate-` + regexp.QuoteMeta(version) + `-linux-(amd64|arm64)\.tar\.gz$`).FindStringSubmatch(name)
		if m == nil {
			t.Fatalf("unexpected tarball %s", name)
		}
		arch := m[1]
		seen[arch] = true
		files := untar(t, tarball)
		dir := strings.TrimSuffix(name, ".tar.gz") + "/"
		for _, f := range []string{"provgate", "LICENSE", "README.md", "provgate.service", "provgate.env", "provgate.yaml"} {
			if _, ok := files[dir+f]; !ok {
				t.Errorf("%s lacks %s (has %v)", name, dir+f, keys(files))
			}
		}
		bin := files[dir+"provgate"]
		ef, err := elf.NewFile(bytes.NewReader(bin))
		if err != nil {
			t.Fatalf("%s: the binary is not ELF: %v", name, err)
		}
		if ef.Machine != machines[arch] {
			t.Errorf("%s: binary for %v, want %v", name, ef.Machine, machines[arch])
		}
		for _, p := range ef.Progs {
			if p.Type == elf.PT_INTERP {
				t.Errorf("%s: the binary needs a dynamic loader: not static", name)
			}
		}
		if libs, _ := ef.ImportedLibraries(); len(libs) > 0 {
			t.Errorf("%s: the binary links %v: not static", name, libs)
		}
		if !bytes.Contains(bin, []byte(version)) {
			t.Errorf("%s: the version %s is not stamped in the binary", name, version)
		}
		if arch == runtime.GOARCH && runtime.GOOS == "linux" {
			p := filepath.Join(t.TempDir(), "provgate")
			if err := os.WriteFile(p, bin, 0o755); err != nil {
				t.Fatal(err)
			}
			b, err := exec.Command(p, "version").CombinedOutput()
			if err != nil || !strings.HasPrefix(string(b), "provgate "+version+" ") {
				t.Errorf("provgate version of the %s binary: %v %s", arch, err, b)
			}
		}
	}
	if len(seen) != 1 || !seen[runtime.GOARCH] {
		t.Fatalf("SHA256SUMS lists %s, want the %s tarball alone", sums, host)
	}
}

// distPlatforms returns the platforms `make dist` builds by default, as its
// recipe lists them.
func distPlatforms(t *testing.T) []string {
	t.Helper()
	b, err := exec.Command("make", "-C", "../..", "-s", "-n", "dist", "DIST="+t.TempDir()).CombinedOutput()
	if err != nil {
		t.Fatalf("make -n dist: %v\n%s", err, b)
	}
	m := regexp.MustCompile(`for p in ([^;]*);`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("make -n dist: no platform loop in\n%s", b)
	}
	return strings.Fields(string(m[1]))
}

// TestDistPlatformsResolve checks that `make dist` builds linux/amd64 and
// linux/arm64 by default and that the program resolves for each: every
// package it imports has Go files for the platform with CGO_ENABLED=0 (what
// a cross-build needs beyond what TestMakeDist builds for the host).
func TestDistPlatformsResolve(t *testing.T) {
	t.Parallel()
	platforms := distPlatforms(t)
	if strings.Join(platforms, " ") != "linux/amd64 linux/arm64" {
		t.Fatalf("make dist builds %v by default, want linux/amd64 and linux/arm64", platforms)
	}
	for _, p := range platforms {
		goos, goarch, _ := strings.Cut(p, "/")
		cmd := exec.Command("go", "list", "-e", "-deps", "-f",
			`{{if .Error}}{{.ImportPath}}: {{.Error}}{{"\n"}}{{end}}`, ".")
		cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH="+goarch, "CGO_ENABLED=0")
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go list for %s: %v\n%s", p, err, b)
		}
		if s := strings.TrimSpace(string(b)); s != "" {
			t.Errorf("the program does not resolve for %s:\n%s", p, s)
		}
	}
}

// untar returns the regular files of a .tar.gz by name, checking that they
// belong to root and that the binary is executable.
func untar(t *testing.T, b []byte) map[string][]byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	out := map[string][]byte{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		if h.Uid != 0 || h.Gid != 0 {
			t.Errorf("%s owned by %d:%d, want 0:0", h.Name, h.Uid, h.Gid)
		}
		if strings.HasSuffix(h.Name, "/provgate") && h.Mode&0o111 == 0 {
			t.Errorf("%s is not executable: %o", h.Name, h.Mode)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[h.Name] = data
	}
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// envNames are the PROVGATE_* variables serve reads, one per flag.
func envNames() map[string]bool {
	c := defaultConfig()
	fs := c.flagSet("serve")
	out := map[string]bool{}
	fs.VisitAll(func(f *flag.Flag) { out[envName(f.Name)] = true })
	return out
}

var envVar = regexp.MustCompile(`\bPROVGATE_[A-Z_]+\b`)

// TestDeployFiles checks the shipped deployment files against the program:
// the Dockerfile is multi-stage, builds a static binary with the version
// stamped on the Go of go.mod, runs as a non-root user with /data as a
// volume; the systemd unit runs a dedicated user with an environment file
// and its hardening; every PROVGATE_ variable they or the sample
// environment file name is one serve reads; LICENSE is Apache-2.0's text.
func TestDeployFiles(t *testing.T) {
	t.Parallel()
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join("../..", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	known := envNames()
	for _, f := range []string{"Dockerfile", "deploy/provgate.service", "deploy/provgate.env"} {
		for _, v := range envVar.FindAllString(read(f), -1) {
			if !known[v] {
				t.Errorf("%s names %s, which no flag reads", f, v)
			}
		}
	}

	df := read("Dockerfile")
	stages := regexp.MustCompile(`(?m)^FROM\s+(\S+)`).FindAllStringSubmatch(df, -1)
	if len(stages) < 2 {
		t.Fatalf("the Dockerfile has %d stages, want a build stage and a runtime stage", len(stages))
	}
	gomod := read("go.mod")
	goVer := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindStringSubmatch(gomod)
	if goVer == nil || !strings.HasPrefix(stages[0][1], "golang:"+goVer[1]) {
		t.Errorf("the build stage %s does not use the Go of go.mod (%v)", stages[0][1], goVer)
	}
	final := df[strings.LastIndex(df, "\nFROM "):]
	for _, want := range []string{"CGO_ENABLED=0", "-X main.version=${VERSION}", "-trimpath"} {
		if !strings.Contains(df, want) {
			t.Errorf("the Dockerfile's build lacks %s", want)
		}
	}
	user := regexp.MustCompile(`(?m)^USER\s+(\S+)`).FindStringSubmatch(final)
	if user == nil || strings.HasPrefix(user[1], "0") || strings.HasPrefix(user[1], "root") {
		t.Errorf("the runtime stage runs as %v, want a non-root user", user)
	}
	for _, want := range []string{`VOLUME ["/data"]`, "PROVGATE_DATA_DIR=/data", "ENTRYPOINT"} {
		if !strings.Contains(final, want) {
			t.Errorf("the runtime stage lacks %s", want)
		}
	}

	unit := read("deploy/provgate.service")
	set := map[string][]string{}
	for _, line := range strings.Split(unit, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok && !strings.HasPrefix(line, "#") {
			set[k] = append(set[k], v)
		}
	}
	for k, v := range map[string]string{
		"User": "provgate", "EnvironmentFile": "-/etc/provgate/provgate.env", "ExecStart": "/usr/local/bin/provgate serve",
		"NoNewPrivileges": "yes", "ProtectSystem": "strict", "ProtectHome": "yes", "PrivateTmp": "yes",
		"PrivateDevices": "yes", "CapabilityBoundingSet": "", "RestrictNamespaces": "yes", "MemoryDenyWriteExecute": "yes",
		"StateDirectory": "provgate", "SystemCallArchitectures": "native", "ExecReload": "/bin/kill -HUP $MAINPID",
	} {
		if len(set[k]) == 0 || set[k][0] != v {
			t.Errorf("provgate.service: %s=%v, want %q", k, set[k], v)
		}
	}

	lic := read("LICENSE")
	for _, want := range []string{"Apache License", "Version 2.0, January 2004", "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION",
		"END OF TERMS AND CONDITIONS"} {
		if !strings.Contains(lic, want) {
			t.Errorf("LICENSE lacks %q", want)
		}
	}
}
