package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/provgate/provgate/gateway/access"
)

// accessCommand runs `provgate access explain|who|what|diff|escalation`: the access
// explorer's questions (docs/design.md §9.8) asked of a running server
// with the caller's credentials, as `provgate import` reads them.
func accessCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	ask := func(sub string) subcommand {
		return subcommand{sub, func(rest []string) error { return accessAsk(ctx, sub, rest, getenv, stdout, stderr) }}
	}
	return runSubcommand("access", args, ask("explain"), ask("who"), ask("what"), ask("diff"), ask("escalation"))
}

// accessAsk runs `provgate access SUB`.
func accessAsk(ctx context.Context, sub string, rest []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("access "+sub, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	conn := addConnFlags(fs, getenv)
	asJSON := fs.Bool("json", false, "print the server's JSON answer")
	var (
		user, policy       *string
		scope, action, key *string
		replay             *int
		usage              string
	)
	switch sub {
	case "explain":
		user = fs.String("user", "", "whose request (default: the caller's own)")
		usage = "METHOD PATH [BODY | @FILE]"
	case "who":
		scope = fs.String("scope", "", "scope, e.g. machines")
		action = fs.String("action", "", "action, e.g. get or update:/Params")
		key = fs.String("object", "", "object key (empty: the scope as a whole)")
	case "what":
		usage = "USER"
	case "escalation":
	case "diff":
		policy = fs.String("policy", "", "a candidate policy (a directory, a .tar.gz of one, or an OPA bundle .tar.gz) to compare with the served one")
		replay = fs.Int("replay", 100, "with --policy: how many of the newest logged decisions to replay")
		usage = "ROLE_A ROLE_B | --policy DIR|FILE"
	}
	if err := fs.Parse(rest); err != nil {
		if err == flag.ErrHelp {
			fmt.Fprintf(stderr, "usage: provgate access %s [flags] %s\n", sub, usage)
			fs.SetOutput(stderr)
			fs.PrintDefaults()
			return errHelp
		}
		return usagef("access %s: %v (see provgate access %s -h)", sub, err, sub)
	}
	authz, client, err := conn.connect("access "+sub, getenv, time.Minute)
	if err != nil {
		return err
	}
	c := apiCaller{ctx: ctx, client: client, base: strings.TrimSuffix(*conn.endpoint, "/") + "/api/v3", authz: authz}
	var raw []byte
	switch sub {
	case "explain":
		if fs.NArg() < 2 || fs.NArg() > 3 {
			return usagef("access explain: want METHOD PATH [BODY | @FILE]")
		}
		q := access.ExplainRequest{User: *user, Method: strings.ToUpper(fs.Arg(0)), Path: fs.Arg(1)}
		if fs.NArg() == 3 {
			body := fs.Arg(2)
			if strings.HasPrefix(body, "@") {
				b, err := os.ReadFile(body[1:])
				if err != nil {
					return fmt.Errorf("access explain: %w", err)
				}
				body = string(b)
			}
			if !json.Valid([]byte(body)) {
				return usagef("access explain: BODY is not JSON")
			}
			q.Body = json.RawMessage(body)
		}
		raw, err = c.do(http.MethodPost, "/access/explain", q)
	case "who":
		if *scope == "" || *action == "" || fs.NArg() != 0 {
			return usagef("access who: want --scope and --action (and --object KEY for one object)")
		}
		v := url.Values{"scope": {*scope}, "action": {*action}, "key": {*key}}
		raw, err = c.do(http.MethodGet, "/access/who?"+v.Encode(), nil)
	case "what":
		if fs.NArg() != 1 {
			return usagef("access what: want one USER")
		}
		raw, err = c.do(http.MethodGet, "/access/users/"+url.PathEscape(fs.Arg(0)), nil)
	case "escalation":
		if fs.NArg() != 0 {
			return usagef("access escalation: takes no arguments")
		}
		raw, err = c.do(http.MethodGet, "/access/escalation", nil)
	case "diff":
		if *policy != "" {
			archive, aerr := policyArchive(*policy)
			if aerr != nil {
				return fmt.Errorf("access diff: %w", aerr)
			}
			sub = "policy diff"
			raw, err = c.do(http.MethodPost, "/access/policy/diff", access.PolicyDiffRequest{Archive: archive, Replay: *replay})
			break
		}
		if fs.NArg() != 2 {
			return usagef("access diff: want ROLE_A ROLE_B, or --policy")
		}
		v := url.Values{"a": {fs.Arg(0)}, "b": {fs.Arg(1)}}
		raw, err = c.do(http.MethodGet, "/access/roles/diff?"+v.Encode(), nil)
	}
	if err != nil {
		return fmt.Errorf("access %s: %w", sub, err)
	}
	if *asJSON {
		var buf bytes.Buffer
		if json.Indent(&buf, raw, "", "  ") == nil {
			raw = buf.Bytes()
		}
		_, err := fmt.Fprintln(stdout, string(raw))
		return err
	}
	return printAccess(sub, raw, stdout)
}

type apiCaller struct {
	ctx    context.Context
	client *http.Client
	base   string
	authz  string
}

// do sends one request; a reply other than 200 is an error naming the
// server's messages.
func (c apiCaller) do(method, path string, body any) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(c.ctx, method, c.base+path, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", c.authz)
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := c.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, 64<<20))
	if err != nil {
		return nil, err
	}
	if res.StatusCode != http.StatusOK {
		var e struct{ Messages []string }
		if json.Unmarshal(raw, &e) == nil && len(e.Messages) > 0 {
			return nil, fmt.Errorf("%d: %s", res.StatusCode, strings.Join(e.Messages, "; "))
		}
		return nil, fmt.Errorf("%d: %s", res.StatusCode, strings.TrimSpace(string(raw)))
	}
	return raw, nil
}

// printAccess prints an answer for a person.
func printAccess(sub string, raw []byte, w io.Writer) error {
	answer, ok := answerPrinters[sub]
	if !ok {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	defer tw.Flush()
	return answer(raw, tw)
}

// answerPrinters print each question's answer, by subcommand.
var answerPrinters = map[string]func(raw []byte, w io.Writer) error{
	"explain":     printAs(printExplanation),
	"who":         printAs(printWho),
	"what":        printAs(printMatrix),
	"escalation":  printAs(printEscalation),
	"policy diff": printAs(printPolicyDiff),
	"diff":        printAs(printRoleDiff),
}

// printAs decodes the server's answer and prints it with print.
func printAs[T any](print func(io.Writer, T)) func(raw []byte, w io.Writer) error {
	return func(raw []byte, w io.Writer) error {
		var x T
		if err := json.Unmarshal(raw, &x); err != nil {
			return err
		}
		print(w, x)
		return nil
	}
}

func printExplanation(tw io.Writer, x access.Explanation) {
	verdict := "ALLOWED"
	if !x.Allowed || x.Status >= 300 {
		verdict = "REFUSED"
	}
	fmt.Fprintf(tw, "%s %s as %s: %s (%d)\n", x.Method, x.Path, x.User, verdict, x.Status)
	for _, st := range x.Steps {
		what := st.Step
		if st.Claim != nil {
			what += " " + st.Claim.Scope + " " + st.Claim.Action + " " + st.Claim.Specific
		}
		detail := st.Detail
		if len(st.GrantedBy) > 0 {
			detail += "; granted by roles " + strings.Join(st.GrantedBy, ", ")
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", what, st.Outcome, detail)
	}
	fmt.Fprintf(tw, "decision %s, policy revision %s\n", x.DecisionID, x.Revision)
}

func printWho(tw io.Writer, x access.Who) {
	fmt.Fprintf(tw, "who may %s %s %s:\n", x.Scope, x.Action, x.Key)
	for _, u := range x.Users {
		fmt.Fprintf(tw, "  user\t%s\n", u)
	}
	for _, t := range x.Tokens {
		yes := "no"
		if t.Allowed {
			yes = "yes"
		}
		fmt.Fprintf(tw, "  %s token\t%s\t%s\n", t.Kind, yes, t.Detail)
	}
}

func printMatrix(tw io.Writer, x access.Matrix) {
	fmt.Fprintf(tw, "what %s can do:\n", x.User)
	for _, sc := range x.Scopes {
		for _, a := range sc.Actions {
			if a.Access == access.None {
				continue
			}
			detail := strings.Join(a.Specifics, ", ")
			for _, p := range a.Pointers {
				detail += " " + p.Action + "(" + p.Access + ")"
			}
			if sc.Restricted {
				detail += fmt.Sprintf(" [tenant shows %d]", sc.Visible)
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", sc.Scope, a.Action, a.Access, strings.TrimSpace(detail))
		}
	}
}

func printEscalation(tw io.Writer, x access.Escalation) {
	fmt.Fprintf(tw, "who can hand out authority:\n")
	for _, u := range x.Users {
		for _, r := range u.Routes {
			through := r.Role
			if r.Held != "" {
				through += " (" + r.Held + ")"
			}
			kind := r.Path
			if r.Delegation {
				kind += " [delegation]"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", u.User, kind, r.Claim, through)
		}
	}
}

func printPolicyDiff(tw io.Writer, x access.PolicyDiff) {
	fmt.Fprintf(tw, "served %s, candidate %s\n", x.Revision, x.Candidate)
	for _, u := range x.Users {
		for _, c := range u.Changes {
			fmt.Fprintf(tw, "  %s\t%s %s\t%s -> %s\n", u.User, c.Scope, c.Action, c.Before, c.After)
		}
	}
	fmt.Fprintf(tw, "replayed %d logged decisions, %d would change:\n", x.Replayed, len(x.Changed))
	for _, c := range x.Changed {
		fmt.Fprintf(tw, "  %s\t%s %s\t%s -> %s\t%s\n", c.Principal, c.Method, c.Path, c.Logged, c.Candidate, strings.Join(c.Reasons, "; "))
	}
}

func printRoleDiff(tw io.Writer, x access.RoleDiff) {
	fmt.Fprintf(tw, "only in %s:\n", x.A)
	for _, c := range x.OnlyA {
		fmt.Fprintf(tw, "  %s\n", c)
	}
	fmt.Fprintf(tw, "only in %s:\n", x.B)
	for _, c := range x.OnlyB {
		fmt.Fprintf(tw, "  %s\n", c)
	}
}

// policyArchive reads a candidate policy: a .tar.gz as it is, or a
// directory packed into one.
func policyArchive(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return os.ReadFile(path)
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	err = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(path, p)
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: filepath.ToSlash(rel), Mode: 0o600, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err = tw.Write(b)
		return err
	})
	if err == nil {
		err = tw.Close()
	}
	if err == nil {
		err = zw.Close()
	}
	return buf.Bytes(), err
}
