package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"time"

	"github.com/provgate/provgate/backend"
	"github.com/provgate/provgate/gateway/access"
	"github.com/provgate/provgate/policies"
	"github.com/provgate/provgate/policies/opa"
)

// policyCommand runs "provgate policy test|eval": the checks a reload runs
// and a single decision, with the engine the server uses
// (docs/policies.md).
func policyCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return runSubcommand("policy", args,
		subcommand{"test", func(args []string) error { return policyTest(ctx, args, stdout, stderr) }},
		subcommand{"eval", func(args []string) error { return policyEval(ctx, args, stdout, stderr) }})
}

func newPolicyFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("policy "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// policyTest loads DIR exactly as --policy-dir does at start: compile,
// check the entry points and the extensions' shape, run the directory's
// tests (and, for extensions, the embedded suites with them). It prints
// the outcome and the revision the server would report.
func policyTest(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return usagef("policy test: want a policy directory or bundle (provgate policy test DIR|BUNDLE)")
	}
	dir := args[0]
	fs := newPolicyFlags("test")
	pubPath := fs.String("public-key", "", "PEM public key the bundle must be signed with (as --policy-bundle-public-key)")
	asBundle := fs.Bool("bundle", false, "read DIR as an OPA bundle (a .tar.gz file or URL always is)")
	allowHTTP := fs.Bool("allow-http", false, "let the bundle be a plain http:// URL (as --policy-bundle-allow-http)")
	if err := parseFlags(fs, args[1:], stderr); err != nil {
		return err
	}
	opts := opa.Options{PolicyDir: dir, CacheSize: -1}
	if *asBundle || *pubPath != "" || isBundle(dir) {
		opts.PolicyDir, opts.Bundle.Location, opts.Bundle.AllowHTTP = "", dir, *allowHTTP
		if *pubPath != "" {
			pem, err := os.ReadFile(*pubPath)
			if err != nil {
				return fmt.Errorf("policy test: %w", err)
			}
			opts.Bundle.PublicKey = string(pem)
		}
	}
	logger := slog.New(slog.NewTextHandler(stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		}}))
	opts.Logger = logger
	e, err := opa.New(ctx, opts)
	if err != nil {
		return fmt.Errorf("policy test %s: %s", dir, err)
	}
	defer e.Close()
	fmt.Fprintf(stdout, "PASS %s (revision %s)\n", dir, e.Revision())
	return nil
}

// policyEval decides one input, as the server would: the embedded policy,
// --policy-dir or --policy-bundle, with the policy data of --data (the shape of
// testdata/policy/data.json: roles, tenants, license).
func policyEval(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newPolicyFlags("eval")
	inputPath := fs.String("input", "", "JSON file with the input (or an example file holding it under \"input\")")
	dir := fs.String("policy-dir", "", "policy directory (extensions or a replacement), as the server's --policy-dir")
	bundleLoc := fs.String("policy-bundle", "", "OPA bundle (directory, .tar.gz or URL), as the server's --policy-bundle")
	pubPath := fs.String("policy-bundle-public-key", "", "PEM public key the bundle must be signed with")
	allowHTTP := fs.Bool("policy-bundle-allow-http", false, "let --policy-bundle be a plain http:// URL")
	dataPath := fs.String("data", "", "JSON file with data.provgate (roles, tenants, license); empty data when not given")
	explain := fs.Bool("explain", false, "print the decision's trail too: the steps of the access explorer's explain")
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	if err := required(fs, "input"); err != nil {
		return err
	}
	in, logged, err := readInput(*inputPath)
	if err != nil {
		return err
	}
	var data policies.Data
	if *dataPath != "" {
		raw, err := os.ReadFile(*dataPath)
		if err != nil {
			return fmt.Errorf("policy eval: %w", err)
		}
		if err := json.Unmarshal(raw, &data); err != nil {
			return fmt.Errorf("policy eval: %s: %w", *dataPath, err)
		}
	}
	opts := opa.Options{PolicyDir: *dir, CacheSize: -1, Bundle: opa.BundleOptions{Location: *bundleLoc, AllowHTTP: *allowHTTP}}
	if *pubPath != "" {
		pem, err := os.ReadFile(*pubPath)
		if err != nil {
			return fmt.Errorf("policy eval: %w", err)
		}
		opts.Bundle.PublicKey = string(pem)
	}
	e, err := opa.New(ctx, opts)
	if err != nil {
		return fmt.Errorf("policy eval: %s", err)
	}
	defer e.Close()
	if err := e.SetData(ctx, data); err != nil {
		return fmt.Errorf("policy eval: %s", err)
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if in.Grants != nil {
		// A grant check's input (docs/policies.md §6): what the write
		// would hand out that its writer does not hold.
		missing, err := e.Ungranted(ctx, in)
		if err != nil {
			return fmt.Errorf("policy eval: %s", err)
		}
		return enc.Encode(struct {
			Revision  string          `json:"revision"`
			Ungranted []backend.Claim `json:"ungranted"`
		}{e.Revision(), missing})
	}
	// A decision-log line is evaluated as it was decided: at its time and
	// with its non-deterministic built-ins' answers.
	x, err := e.ExplainReplay(ctx, in, logged.replay())
	if err != nil {
		return fmt.Errorf("policy eval: %s", err)
	}
	out := struct {
		Revision string            `json:"revision"`
		Decision policies.Decision `json:"decision"`
		// Logged and MatchesLog compare with the logged result of a
		// decision-log line.
		Logged     *policies.Decision `json:"logged,omitempty"`
		MatchesLog *bool              `json:"matches_log,omitempty"`
		Steps      []access.Step      `json:"steps,omitempty"`
	}{Revision: e.Revision(), Decision: x.Decision}
	if logged.Result != nil {
		same := reflect.DeepEqual(normalized(*logged.Result), normalized(x.Decision))
		out.Logged, out.MatchesLog = logged.Result, &same
		if len(logged.Truncated) > 0 {
			fmt.Fprintln(stderr, "policy eval: the logged line was truncated; the replayed input may differ from the decided one")
		}
	}
	if *explain {
		out.Steps = access.TrailSteps(x, nil)
	}
	return enc.Encode(out)
}

// normalized gives nil and empty lists one form, for comparing decisions.
func normalized(d policies.Decision) policies.Decision {
	if len(d.Reasons) == 0 {
		d.Reasons = nil
	}
	if d.Visible != nil && len(d.Visible.Keys) == 0 {
		v := *d.Visible
		v.Keys = nil
		d.Visible = &v
	}
	return d
}

// loggedLine is what a decision-log line adds around its input.
type loggedLine struct {
	Timestamp  time.Time          `json:"timestamp"`
	Result     *policies.Decision `json:"result"`
	NDBuiltins json.RawMessage    `json:"nd_builtin_cache"`
	Truncated  map[string]int     `json:"truncated"`
}

func (l loggedLine) replay() policies.Replay {
	var r policies.Replay
	if !l.Timestamp.IsZero() {
		r.At = l.Timestamp.UnixNano()
	}
	if len(l.NDBuiltins) > 0 && string(l.NDBuiltins) != "null" {
		r.NDBuiltins = l.NDBuiltins
	}
	return r
}

// readInput reads a policies.Input from path: a bare input, an example
// file ({"description", "input", "decision"}) or a decision-log line
// (whose time, nd_builtin_cache and result come back in logged). Unknown
// fields of the input are refused, so a misspelt field is not silently
// absent.
func readInput(path string) (policies.Input, loggedLine, error) {
	var logged loggedLine
	raw, err := os.ReadFile(path)
	if err != nil {
		return policies.Input{}, logged, fmt.Errorf("policy eval: %w", err)
	}
	var wrapper struct {
		Input      json.RawMessage `json:"input"`
		DecisionID string          `json:"decision_id"`
	}
	if json.Unmarshal(raw, &wrapper) == nil && len(wrapper.Input) > 0 {
		if wrapper.DecisionID != "" {
			if err := json.Unmarshal(raw, &logged); err != nil {
				return policies.Input{}, logged, fmt.Errorf("policy eval: %s: not a decision-log line: %w", path, err)
			}
		}
		raw = wrapper.Input
	}
	var in policies.Input
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(&in); err != nil {
		return policies.Input{}, logged, fmt.Errorf("policy eval: %s: not a policy input: %w", path, err)
	}
	return in, logged, nil
}

// isBundle tells a bundle from a policy directory: a URL, a file (a
// .tar.gz as opa build writes it), or a directory with a .manifest.
func isBundle(loc string) bool {
	if strings.HasPrefix(loc, "http://") || strings.HasPrefix(loc, "https://") {
		return true
	}
	fi, err := os.Stat(loc)
	if err != nil {
		return false
	}
	if !fi.IsDir() {
		return true
	}
	_, err = os.Stat(filepath.Join(loc, ".manifest"))
	return err == nil
}
