// Command provgate is the policy-engine authorization gateway in front of the
// provisioning API. See README.md for the commands and their configuration.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/provgate/provgate/gateway/auth"
	"github.com/provgate/provgate/policies/opa"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// After the first signal the default handling comes back, so a second
	// Ctrl-C ends a shutdown that hangs.
	go func() { <-ctx.Done(); stop() }()
	// SIGHUP is caught whatever is configured, so that it never ends the
	// server; a server hands it to each of its reloads.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	err := runWith(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr, hooks{reload: hup})
	signal.Stop(hup)
	stop()
	os.Exit(report(err, os.Stderr))
}

// hooks are what the program running a command gives it besides the command
// line, the environment and the output streams. The process's signals and
// clock are given here, never taken by the command itself, so that servers
// run side by side in one process (the tests) each have their own.
type hooks struct {
	// ready receives the server's bound address once it accepts
	// connections; tests use it with --listen 127.0.0.1:0.
	ready chan<- string
	// reload delivers the operator's requests to reload (SIGHUP in main):
	// the policy directory or bundle, the license files, the decision log
	// file; nil delivers none.
	reload <-chan os.Signal
	// now is the clock tokens are checked against and policies see
	// (time.now_ns); nil is the real one.
	now func() time.Time
	// verified, when set, remembers the policies whose suites passed
	// across the servers of the process (opa.Options.Verified).
	verified *opa.Verified
	// compiled, when set, shares compiled policies across the servers of
	// the process (opa.Options.Compiled).
	compiled *opa.Compiled
	// scryptN, when not 0, is the scrypt cost N of the passwords the
	// server and admin reset-password hash (auth.HashPasswordN) and of the
	// server's unknown-user decoy; 0 is the default. Tests lower it: at the
	// default cost the admin password's hash and first check are most of a
	// test server's start under the race detector.
	scryptN int
	// streamWriteTimeout, when not 0, bounds one write to an event stream
	// instead of the default (stream.Options.WriteTimeout). Tests raise
	// it: a test that stops reading a stream on purpose must not see the
	// write time out first on a loaded machine.
	streamWriteTimeout time.Duration
}

// hashPassword is the password hash of the hooks' scrypt cost.
func (h hooks) hashPassword() func(pw string) ([]byte, error) {
	if h.scryptN != 0 {
		return auth.HashPasswordN(h.scryptN)
	}
	return auth.HashPassword
}

// usageError marks mistakes in the command line, which exit with status 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

// errHelp is returned after help was printed on request; it exits 0.
var errHelp = errors.New("help requested")

// report prints err as one line and returns the process exit status.
func report(err error, stderr io.Writer) int {
	if err == nil || errors.Is(err, errHelp) {
		return 0
	}
	msg := strings.Join(strings.Fields(err.Error()), " ")
	fmt.Fprintf(stderr, "provgate: %s\n", msg)
	var ue usageError
	if errors.As(err, &ue) {
		return 2
	}
	return 1
}

const usageText = `usage: provgate [command] [flags]

commands:
  serve      run the API server (the default command)
  version    print the version
  license    keygen | sign | verify: manage signed license documents
  policy     test DIR | eval --input FILE: check a policy directory, decide one input
  import     create the users or roles of a JSON file through a running server
  access     explain | who | what | diff | escalation: ask a running server's access explorer
  admin      reset-password USER: set a user's password in a stopped server's store

Run "provgate <command> -h" for a command's flags.
`

// run executes one command line. getenv, stdout and stderr are injected so
// that tests drive the whole program in-process.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return runWith(ctx, args, getenv, stdout, stderr, hooks{})
}

// runWith is run with the hooks of the program running it.
func runWith(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer, h hooks) error {
	cmd, rest := "serve", args
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, rest = args[0], args[1:]
	}
	switch cmd {
	case "serve":
		return serveCommand(ctx, rest, getenv, stdout, stderr, h)
	case "version":
		if len(rest) > 0 {
			return usagef("version takes no arguments")
		}
		_, err := fmt.Fprintf(stdout, "provgate %s (%s)\n", versionString(), runtime.Version())
		return err
	case "license":
		return licenseCommand(rest, stdout, stderr)
	case "policy":
		return policyCommand(ctx, rest, stdout, stderr)
	case "import":
		return importCommand(ctx, rest, getenv, stdout, stderr)
	case "access":
		return accessCommand(ctx, rest, getenv, stdout, stderr)
	case "admin":
		return adminCommand(ctx, rest, getenv, stdout, stderr, h)
	case "help":
		fmt.Fprint(stderr, usageText)
		return errHelp
	}
	return usagef("unknown command %q (commands: serve, version, license, policy, import, access, admin; see provgate help)", cmd)
}

// versionString prefers the link-time version, then the module version that
// "go install ...@vX" records.
func versionString() string {
	if version != "dev" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return version
}

// parseFlags parses args with fs, turning the flag package's errors into one
// usage line and -h into printed help.
func parseFlags(fs *flag.FlagSet, args []string, stderr io.Writer) error {
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprintf(stderr, "usage of provgate %s:\n", fs.Name())
		fs.SetOutput(stderr)
		fs.PrintDefaults()
		return errHelp
	}
	if err != nil {
		return usagef("%s: %v (see provgate %s -h)", fs.Name(), err, fs.Name())
	}
	if fs.NArg() > 0 {
		return usagef("%s: unexpected argument %q (see provgate %s -h)", fs.Name(), fs.Arg(0), fs.Name())
	}
	return nil
}

// serveCommand loads the configuration, builds the application and serves it
// until ctx is cancelled.
func serveCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer, h hooks) error {
	cfg, err := loadConfig(args, getenv, stderr)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: cfg.SlogLevel()}))
	// buildApp may open the SQLite file and write the initial admin password
	// into the data dir, so the dir must exist first.
	if err := prepareDataDir(cfg.DataDir); err != nil {
		return err
	}
	logger.Info("starting provgate", "version", versionString(), "config", cfg)
	if cfg.MemoryLimit > 0 {
		// Process-wide, before anything is loaded (docs/design.md §15.8).
		debug.SetMemoryLimit(cfg.MemoryLimit)
	}
	ln, err := bind(cfg)
	if err != nil {
		return err
	}
	srv, cleanup, err := buildApp(ctx, cfg, h, logger, stdout)
	if err != nil {
		ln.Close()
		return err
	}
	defer cleanup()
	return serveOn(ctx, cfg, ln, srv.App(), srv.Drain, logger, h.ready)
}

// loadConfig applies defaults, then the --config file, then PROVGATE_*
// variables, then flags, and validates the result. Every failure is a usage
// error: the operator fixes it in the command line, the file or the
// environment.
func loadConfig(args []string, getenv func(string) string, stderr io.Writer) (Config, error) {
	return loadConfigAs("serve", args, getenv, stderr, nil)
}

// loadConfigAs is loadConfig for a command named name that takes the
// server's flags; extra, when not nil, adds the command's own flags.
func loadConfigAs(name string, args []string, getenv func(string) string, stderr io.Writer, extra func(*flag.FlagSet)) (Config, error) {
	flags := func(c *Config) *flag.FlagSet {
		fs := c.flagSet(name)
		if extra != nil {
			extra(fs)
		}
		return fs
	}
	// The file ranks below the environment and the flags, so it is applied
	// first; the flags are read once beforehand only to find it.
	probe := defaultConfig()
	if err := parseFlags(flags(&probe), args, stderr); err != nil {
		return Config{}, err
	}
	file := probe.ConfigFile
	if file == "" {
		file = getenv(envName(configFlag))
	}
	cfg := defaultConfig()
	fs := flags(&cfg)
	if file != "" {
		if err := applyFile(fs, file); err != nil {
			return Config{}, usageError{err}
		}
	}
	if err := applyEnv(fs, getenv); err != nil {
		return Config{}, usageError{err}
	}
	if err := parseFlags(fs, args, stderr); err != nil {
		return Config{}, err
	}
	cfg.ConfigFile = file
	if err := cfg.Validate(); err != nil {
		return Config{}, usageError{err}
	}
	return cfg, nil
}
