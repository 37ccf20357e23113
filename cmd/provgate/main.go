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

	"github.com/provgate/provgate/policies/opa"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// After the first signal the default handling comes back, so a second
	// Ctrl-C ends a shutdown that hangs.
	go func() { <-ctx.Done(); stop() }()
	// SIGHUP asks a server with a policy directory or bundle to reload it.
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
	// reload delivers requests to reload the policy directory or bundle
	// (SIGHUP in main); nil delivers none.
	reload <-chan os.Signal
	// now is the clock tokens are checked against and policies see
	// (time.now_ns); nil is the real one.
	now func() time.Time
	// verified, when set, remembers the policies whose suites passed
	// across the servers of the process (opa.Options.Verified).
	verified *opa.Verified
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
  access     explain | who | what | diff: ask a running server's access explorer

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
	case "help":
		fmt.Fprint(stderr, usageText)
		return errHelp
	}
	return usagef("unknown command %q (commands: serve, version, license, policy, import, access; see provgate help)", cmd)
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
	ln, err := bind(cfg)
	if err != nil {
		return err
	}
	app, cleanup, err := buildApp(ctx, cfg, h, logger, stdout)
	if err != nil {
		ln.Close()
		return err
	}
	defer cleanup()
	return serveOn(ctx, cfg, ln, app, logger, h.ready)
}

// loadConfig applies defaults, then PROVGATE_* variables, then flags, and
// validates the result. Every failure is a usage error: the operator fixes it
// in the command line or the environment.
func loadConfig(args []string, getenv func(string) string, stderr io.Writer) (Config, error) {
	cfg := defaultConfig()
	fs := cfg.flagSet("serve")
	if err := applyEnv(fs, getenv); err != nil {
		return Config{}, usageError{err}
	}
	if err := parseFlags(fs, args, stderr); err != nil {
		return Config{}, err
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, usageError{err}
	}
	return cfg, nil
}
