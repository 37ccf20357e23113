// Command provgate-bench measures provgate against its own baseline: it
// starts the server binary on loopback, loads a data set through the API,
// runs interleaved load legs (A B A B ...) and the policy decision
// micro-benchmarks, and writes every figure, the command and the machine to
// a Markdown file. Every headline figure is a ratio of two measurements of
// the same run, so that a small, shared, noisy machine still gives
// repeatable numbers. `make bench` runs it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"
)

type config struct {
	Server          string
	Out             string
	Command         string
	Rounds          int
	DecideRounds    int
	Leg             time.Duration
	Warmup          time.Duration
	Clients         int
	Attackers       int
	Machines        int
	PoolMachines    int
	AllocCallers    int
	DecideBenchtime time.Duration
	Postgres        string
	SkipDecide      bool
	OnlyDecide      bool
	// ScaleOnly runs figures 9 alone; Scale* size their large fleet.
	ScaleOnly     bool
	ScaleMachines int
	ScaleUsers    int
	ScaleRoles    int
	ScaleTenants  int
	// PGScaleOnly runs figures 14 alone; StartupMachines sizes the fleet
	// of 14c-14d (0 skips them).
	PGScaleOnly bool
	// ListOnly runs the list figures (4, 13) alone.
	ListOnly bool
	// GatewayOnly runs the SQLite server's figures (1, 2, 4, 6, 7, 13)
	// alone.
	GatewayOnly     bool
	StartupMachines int
	// MemProcs is the GOMAXPROCS of the second SQLite server of figure
	// 7k (0 leaves it out).
	MemProcs int
	// GrantsOnly runs figures 10 alone; Baseline is the build figures
	// 10c and 10d compare with.
	GrantsOnly bool
	Baseline   string
	// ExplorerOnly runs the access explorer's figures (12) alone: the
	// explain micro-benchmark and the explorer legs of the large fleet.
	ExplorerOnly bool
	// Only, when not empty, names the figure numbers to run ("6", "8"):
	// every part measuring none of them is left out.
	Only map[string]bool
}

// onlyParts are the figure numbers -only accepts.
var onlyParts = []string{"1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "12", "13", "14"}

// wants reports whether a part measuring any of figs runs under -only.
func (c config) wants(figs ...string) bool {
	if len(c.Only) == 0 {
		return true
	}
	for _, f := range figs {
		if c.Only[f] {
			return true
		}
	}
	return false
}

func parseConfig(args []string, getenv func(string) string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("provgate-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.Server, "server", "bin/provgate", "provgate binary to measure")
	fs.StringVar(&c.Out, "out", "docs/benchmarks.md", "Markdown file to (re)write with the results; empty: print only")
	fs.StringVar(&c.Command, "command", "make bench", "the command recorded in the results as the way to repeat them")
	// Many short legs rather than a few long ones: on a shared machine other
	// work comes in bursts of seconds, and the shorter the legs the more
	// often both sides of a ratio run under the same conditions.
	fs.IntVar(&c.Rounds, "rounds", 9, "interleaved rounds per HTTP comparison (at least 3); figures are medians over rounds")
	fs.DurationVar(&c.Leg, "leg", time.Second, "duration of one timed leg")
	fs.IntVar(&c.DecideRounds, "decide-rounds", 5, "rounds of the decision micro-benchmarks (at least 3)")
	fs.DurationVar(&c.Warmup, "warmup", 500*time.Millisecond, "untimed run of each leg before the first round")
	fs.IntVar(&c.Clients, "clients", 8, "concurrent keep-alive clients per HTTP leg")
	fs.IntVar(&c.Attackers, "attackers", 16, "clients sending wrong Basic passwords in figure 2b")
	fs.IntVar(&c.Machines, "machines", 10000, "machines loaded for the list figure (the tenant sees 1%)")
	fs.IntVar(&c.PoolMachines, "pool-machines", 3000, "machines in the allocation pool of figure 5")
	fs.IntVar(&c.AllocCallers, "alloc-callers", 8, "concurrent allocateMachines callers of figure 5")
	fs.DurationVar(&c.DecideBenchtime, "decide-benchtime", time.Second, "-test.benchtime of the decision micro-benchmarks")
	fs.BoolVar(&c.SkipDecide, "skip-decide", false, "skip the decision micro-benchmarks (figure 3)")
	fs.BoolVar(&c.OnlyDecide, "only-decide", false, "run only the decision micro-benchmarks (figure 3); with -out '' to leave docs/benchmarks.md as it is")
	fs.BoolVar(&c.ScaleOnly, "scale-only", false, "run only the scale figures (9), e.g. with smaller -scale-* sizes and -rounds 3 for a quick check")
	fs.IntVar(&c.ScaleMachines, "scale-machines", 100000, "machines of the large fleet (figures 9)")
	fs.IntVar(&c.ScaleUsers, "scale-users", 10000, "users of the large fleet (figures 9)")
	fs.IntVar(&c.ScaleRoles, "scale-roles", 1000, "roles of the large fleet (figures 9)")
	fs.IntVar(&c.ScaleTenants, "scale-tenants", 500, "tenants of the large fleet (figures 9); tenant i lists users 10i.. and machines 100i..")
	fs.BoolVar(&c.GatewayOnly, "gateway-only", false, "run only the SQLite server's figures (1, 2, 4, 6, 7, 13), its peak memory (7i, and 7k unless -mem-procs 0) included")
	fs.IntVar(&c.MemProcs, "mem-procs", 16, "GOMAXPROCS of a second SQLite server run through figure 7i's data set and legs for its peak memory (figure 7k), a core count simulated on this machine's CPUs; 0 leaves it out")
	fs.BoolVar(&c.ListOnly, "list-only", false, "run only the list figures (4, 13) on the SQLite server")
	fs.BoolVar(&c.PGScaleOnly, "pg-scale-only", false, "run only the PostgreSQL large-fleet figures (14), with PROVGATE_TEST_DATABASE set")
	fs.IntVar(&c.StartupMachines, "startup-machines", 1000000, "machines of the PostgreSQL start-up fleet (figures 14c-14d); 0 skips them")
	fs.BoolVar(&c.GrantsOnly, "grants-only", false, "run only the grant-check figures (10), e.g. with -baseline-server")
	fs.BoolVar(&c.ExplorerOnly, "explorer-only", false, "run only the access explorer's figures (12): the explain micro-benchmark and, on the large and small fleets, who can, a user's matrix and AuthZEN (with -out '' to leave docs/benchmarks.md as it is)")
	fs.StringVar(&c.Baseline, "baseline-server", "", "another provgate binary (a build of main, say) that figures 10c and 10d compare this one with")
	only := fs.String("only", "", "comma-separated figure numbers ("+strings.Join(onlyParts, ",")+") to run alone, e.g. 6,8 with -out '' for a quick check of those figures")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if c.Rounds < 3 || c.DecideRounds < 3 {
		return c, errors.New("-rounds and -decide-rounds must be at least 3: a median of fewer is not robust to one disturbed round")
	}
	if c.ScaleMachines < 100 || c.ScaleUsers < 10 || c.ScaleRoles < 10 || c.ScaleTenants < 1 || c.ScaleTenants*10 > c.ScaleUsers || c.ScaleTenants*100 > c.ScaleMachines {
		return c, errors.New("the large fleet must hold at least the small one (100 machines, 10 users, 10 roles, 1 tenant), with 10 users and 100 machines per tenant")
	}
	if c.StartupMachines != 0 && c.StartupMachines < c.ScaleTenants*100+bigTenantMachines {
		return c, fmt.Errorf("-startup-machines must be 0 or at least %d (the tenants' machines and t-big's)", c.ScaleTenants*100+bigTenantMachines)
	}
	if c.MemProcs < 0 {
		return c, errors.New("-mem-procs must be 0 (left out) or a GOMAXPROCS")
	}
	if c.Leg <= 0 || c.Clients < 1 || c.Attackers < 0 || c.Machines < 100 || c.PoolMachines < 1 || c.AllocCallers < 1 {
		return c, errors.New("-leg, -clients, -alloc-callers and -pool-machines must be positive and -machines at least 100")
	}
	if *only != "" {
		c.Only = map[string]bool{}
		for _, f := range strings.Split(*only, ",") {
			f = strings.TrimSpace(f)
			if !slices.Contains(onlyParts, f) {
				return c, fmt.Errorf("-only: unknown figure %q (one of %s)", f, strings.Join(onlyParts, ","))
			}
			c.Only[f] = true
		}
		if c.SkipDecide || c.OnlyDecide || c.ScaleOnly || c.GrantsOnly || c.ExplorerOnly {
			return c, errors.New("-only excludes -skip-decide, -only-decide, -scale-only, -grants-only and -explorer-only")
		}
	}
	c.Postgres = getenv("PROVGATE_TEST_DATABASE")
	return c, nil
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg, err := parseConfig(os.Args[1:], os.Getenv, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "provgate-bench:", err)
		os.Exit(2)
	}
	if err := run(ctx, cfg, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "provgate-bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, cfg config, stdout, stderr io.Writer) error {
	start := time.Now()
	logf := func(format string, args ...any) {
		fmt.Fprintf(stderr, "[%6.1fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}
	if _, err := os.Stat(cfg.Server); err != nil {
		return fmt.Errorf("server binary: %w (build it first: go build -o bin/provgate ./cmd/provgate)", err)
	}
	rep := &report{Config: cfg, Machine: describeMachine(), Started: start, Args: os.Args[1:]}
	if out, err := exec.CommandContext(ctx, cfg.Server, "version").Output(); err == nil {
		rep.Version = strings.TrimSpace(string(out))
	}
	tmp, err := os.MkdirTemp("", "provgate-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	pub, lic, err := licenseFiles(ctx, cfg.Server, tmp)
	if err != nil {
		return err
	}

	if cfg.SkipDecide && cfg.OnlyDecide {
		return errors.New("-skip-decide and -only-decide exclude each other")
	}
	if n := btoi(cfg.ScaleOnly) + btoi(cfg.OnlyDecide) + btoi(cfg.GrantsOnly) + btoi(cfg.ExplorerOnly) + btoi(cfg.PGScaleOnly) + btoi(cfg.ListOnly) + btoi(cfg.GatewayOnly); n > 1 {
		return errors.New("-scale-only, -pg-scale-only, -list-only, -gateway-only, -only-decide, -grants-only and -explorer-only exclude each other")
	}
	if cfg.Baseline != "" {
		if _, err := os.Stat(cfg.Baseline); err != nil {
			return fmt.Errorf("baseline server binary: %w", err)
		}
	}
	// only names the -*-only flag given (they exclude each other), or "".
	// The server figures other than 9 are left out by any of them.
	only := ""
	for _, f := range []struct {
		set  bool
		name string
	}{
		{cfg.ExplorerOnly, "-explorer-only"}, {cfg.OnlyDecide, "-only-decide"}, {cfg.ScaleOnly, "-scale-only"},
		{cfg.PGScaleOnly, "-pg-scale-only"}, {cfg.ListOnly, "-list-only"}, {cfg.GatewayOnly, "-gateway-only"},
		{cfg.GrantsOnly, "-grants-only"},
	} {
		if f.set {
			only = f.name
			break
		}
	}
	// Figure 3 first: the test binary compiles before any server runs, so
	// compilation never competes with a timed leg.
	var dec *decideResult
	decSkip := ""
	switch {
	case only != "" && !cfg.ExplorerOnly && !cfg.OnlyDecide:
		decSkip = only
	case cfg.SkipDecide:
		decSkip = "-skip-decide"
	case !cfg.wants("3", "12"):
		decSkip = "-only"
	default:
		if dec, err = runDecide(ctx, cfg, tmp, logf); err != nil {
			decSkip = "failed: " + firstLine(err.Error())
			rep.Failures = append(rep.Failures, "figure 3: "+err.Error())
			logf("figure 3 failed: %v", err)
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	// skip is only, or "-only" for a part -only leaves out.
	skip := func(figs ...string) string {
		if only == "" && !cfg.wants(figs...) {
			return "-only"
		}
		return only
	}

	part := partEnv{ctx: ctx, cfg: cfg, tmp: tmp, pub: pub, lic: lic, logf: logf, rep: rep}
	gwSkip := skip("1", "2", "4", "6", "7", "13")
	if cfg.ListOnly || cfg.GatewayOnly {
		gwSkip = ""
	}
	gw, gwSkip, err := runPart(part, "SQLite server figures", gwSkip, runGateway)
	if err != nil {
		return err
	}

	// Figure 7k: the same load on a server whose runtime sees MemProcs
	// cores, after 7i's server has stopped so that the two never overlap.
	memSkip := gwSkip
	switch {
	case memSkip != "":
	case cfg.ListOnly:
		memSkip = "-list-only"
	case cfg.MemProcs == 0:
		memSkip = "-mem-procs 0"
	case !cfg.wants("7"):
		memSkip = "-only"
	}
	gwProcs, memSkip, err := runPart(part, "figure 7k", memSkip, runGatewayProcs(cfg.MemProcs))
	if err != nil {
		return err
	}

	ev, evSkip, err := runPart(part, "figure 8", skip("8"), runEvents)
	if err != nil {
		return err
	}

	pgSkip := skip("5", "7")
	if pgSkip == "" && cfg.Postgres == "" {
		pgSkip = "PROVGATE_TEST_DATABASE not set"
	}
	pools, pgSkip, err := runPart(part, "figure 5", pgSkip, runPools)
	if err != nil {
		return err
	}

	scSkip := ""
	if cfg.OnlyDecide || cfg.GrantsOnly || cfg.PGScaleOnly || cfg.ListOnly || cfg.GatewayOnly {
		scSkip = only
	} else if !cfg.wants("9", "12") {
		scSkip = "-only"
	}
	sc, scSkip, err := runPart(part, "figures 9", scSkip, runScale)
	if err != nil {
		return err
	}

	pgsSkip := ""
	if only != "" && !cfg.PGScaleOnly {
		pgsSkip = only
	} else if !cfg.wants("14") {
		pgsSkip = "-only"
	} else if cfg.Postgres == "" {
		pgsSkip = "PROVGATE_TEST_DATABASE not set"
	}
	pgs, pgsSkip, err := runPart(part, "figures 14", pgsSkip, runPGScale)
	if err != nil {
		return err
	}

	grSkip := ""
	if cfg.OnlyDecide || cfg.ScaleOnly || cfg.ExplorerOnly || cfg.PGScaleOnly || cfg.ListOnly || cfg.GatewayOnly {
		grSkip = only
	} else if !cfg.wants("10") {
		grSkip = "-only"
	}
	gr, grSkip, err := runPart(part, "figures 10", grSkip, runGrants)
	if err != nil {
		return err
	}

	rep.Gateway, rep.Pools, rep.Decide, rep.Events, rep.Scale, rep.PGScale, rep.Grants = gw, pools, dec, ev, sc, pgs, gr
	gwFigs := gatewayFigures(gw, gwSkip, cfg.ListOnly)
	for i, f := range gwFigs {
		// A leg group -only left out measured nothing.
		if gw != nil && f.Skipped == "" && math.IsNaN(f.Value) && len(cfg.Only) > 0 {
			gwFigs[i].Skipped = "-only"
		}
	}
	rep.Figures = append(rep.Figures, gwFigs...)
	rep.Figures = append(rep.Figures, decideFigures(dec, decSkip)...)
	rep.Figures = append(rep.Figures, poolFigures(pools, pgSkip)...)
	rep.Figures = append(rep.Figures, memFigures(gw, pools, gwSkip, pgSkip)...)
	rep.Figures = append(rep.Figures, procsMemFigure(gwProcs, cfg.MemProcs, memSkip))
	rep.Figures = append(rep.Figures, eventFigures(ev, evSkip)...)
	rep.Figures = append(rep.Figures, scaleFigures(sc, scSkip)...)
	rep.Figures = append(rep.Figures, pgScaleFigures(pgs, pgsSkip)...)
	rep.Figures = append(rep.Figures, grantFigures(gr, grSkip)...)
	sort.SliceStable(rep.Figures, func(i, j int) bool { return figureLess(rep.Figures[i].ID, rep.Figures[j].ID) })
	rep.Wall = time.Since(start)

	fmt.Fprintf(stdout, "\nprovgate benchmarks (%s, %d CPUs, %s), %s\n", rep.Machine.Model, rep.Machine.CPUs, rep.Machine.Go, rep.Wall.Round(time.Second))
	for _, f := range rep.Figures {
		fmt.Fprintln(stdout, f.line())
	}
	if cfg.Out != "" {
		if err := os.WriteFile(cfg.Out, []byte(rep.markdown()), 0o644); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote %s\n", cfg.Out)
	}
	if len(rep.Failures) > 0 {
		return fmt.Errorf("%d part(s) failed; see %s", len(rep.Failures), cfg.Out)
	}
	return nil
}

// figureLess orders figure ids by their number, then their letter: 9n
// before 10a.
func figureLess(a, b string) bool {
	na, ra := splitFigureID(a)
	nb, rb := splitFigureID(b)
	if na != nb {
		return na < nb
	}
	return ra < rb
}

func splitFigureID(id string) (int, string) {
	n, i := 0, 0
	for ; i < len(id) && id[i] >= '0' && id[i] <= '9'; i++ {
		n = 10*n + int(id[i]-'0')
	}
	return n, id[i:]
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// partEnv is what every server part of the bench is run with.
type partEnv struct {
	ctx           context.Context
	cfg           config
	tmp, pub, lic string
	logf          func(string, ...any)
	rep           *report
}

// runPart runs one part of the bench unless skip names why not. A failure is
// recorded in the report under label and becomes the part's skip reason;
// only a cancelled ctx ends the whole run.
func runPart[T any](e partEnv, label, skip string, run func(context.Context, config, string, string, string, func(string, ...any)) (*T, error)) (*T, string, error) {
	if skip != "" {
		return nil, skip, nil
	}
	res, err := run(e.ctx, e.cfg, e.tmp, e.pub, e.lic, e.logf)
	if err == nil {
		return res, "", nil
	}
	if e.ctx.Err() != nil {
		return nil, "", e.ctx.Err()
	}
	e.rep.Failures = append(e.rep.Failures, label+": "+err.Error())
	e.logf("%s failed: %v", label, err)
	return nil, "failed: " + firstLine(err.Error()), nil
}
