// Package render renders the templates of the callback plugin (callback Url,
// string data-override) and of tasks rendered for a machine's job, with the
// template functions of docs/design.md §12.3. Templates may come from callers who only hold an action claim, so
// every render is bounded in time and output, and the function set depends on
// who wrote the template (Mode).
package render

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"text/template"
	"time"

	"github.com/provgate/provgate/backend"
)

// Mode says who wrote a template, which decides the functions it may call.
type Mode int

const (
	// Caller templates come from whoever invokes an action
	// (callback/data-override) or sets a param (every value ParamExpand
	// renders, in any mode): no GetAuthString, no token generation, and
	// params only as the callback's Decode setting exposes them.
	Caller Mode = iota
	// Config templates come from the plugin configuration (callback Url):
	// GetAuthString is available, token generation is not.
	Config
	// Task templates are rendered by the server for a machine's job; they
	// may mint machine tokens (.GenerateToken, .GenerateInfiniteToken).
	Task
)

func (m Mode) String() string {
	switch m {
	case Caller:
		return "caller"
	case Config:
		return "config"
	case Task:
		return "task"
	}
	return fmt.Sprintf("mode(%d)", int(m))
}

// Defaults of Limits.
const (
	DefaultMaxOutput = 1 << 20
	DefaultTimeout   = 5 * time.Second
	DefaultMaxItems  = 10000
	DefaultMaxSource = 64 << 10
	maxExpandDepth   = 8
)

// Limits bound one render. Zero fields take the defaults.
type Limits struct {
	MaxOutput int           // bytes written, and the largest string any function may return
	Timeout   time.Duration // wall-clock budget of one render
	MaxItems  int           // largest list a function may build, largest int a range may count to
	MaxSource int           // largest template text accepted
}

func (l Limits) withDefaults() Limits {
	l.MaxOutput = orDefault(l.MaxOutput, DefaultMaxOutput)
	l.Timeout = orDefault(l.Timeout, DefaultTimeout)
	l.MaxItems = orDefault(l.MaxItems, DefaultMaxItems)
	l.MaxSource = orDefault(l.MaxSource, DefaultMaxSource)
	return l
}

// orDefault is v, or def when v is not positive.
func orDefault[T int | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// ParamFunc looks a parameter up for the machine being rendered, through the
// full aggregated hierarchy (machine, profiles, stage, global). ok is false
// when the parameter is set nowhere.
type ParamFunc func(ctx context.Context, name string) (value any, ok bool, err error)

// TokenMinter issues machine tokens for task templates (machine
// tokens are generated only during template expansion, docs/design.md §8.6).
type TokenMinter interface {
	GenerateToken(ctx context.Context, m *backend.Machine) (string, error)
	GenerateInfiniteToken(ctx context.Context, m *backend.Machine) (string, error)
}

// Info is the endpoint information templates see (.Info, .ApiURL, ...).
type Info struct {
	Address  string `json:"Address"`  // the provisioner's IP address
	ApiPort  int    `json:"ApiPort"`  // HTTPS API port
	FilePort int    `json:"FilePort"` // static file server port
	Id       string `json:"Id"`
	Version  string `json:"Version"`
	// ApiURL and FileURL, when set, replace the URLs built from Address and
	// the ports (a server behind a proxy or with a DNS name).
	ApiURL  string `json:"ApiURL,omitempty"`
	FileURL string `json:"FileURL,omitempty"`
}

// Env is what a template is rendered against.
type Env struct {
	Machine *backend.Machine // Params already shaped by the caller; Secret is never shown
	Params  ParamFunc        // nil: only Machine.Params is consulted
	Info    Info
	// AuthString runs the named exec auth (GetAuthString); Config and Task
	// modes only.
	AuthString func(ctx context.Context, name string) (string, error)
	Tokens     TokenMinter // Task mode only
}

// Errors a render can end with, for callers that want to tell them apart.
var (
	ErrTimeout        = errors.New("template execution exceeded its time budget")
	ErrOutputTooLarge = errors.New("template output exceeds the size limit")
	ErrSourceTooLarge = errors.New("template text exceeds the size limit")
)

// Check parses text with the functions of mode, so that configuration can be
// validated before any machine is rendered.
func Check(name, text string, mode Mode) error {
	lim := Limits{}.withDefaults()
	if len(text) > lim.MaxSource {
		return ErrSourceTooLarge
	}
	g := &guard{ctx: context.Background(), lim: lim}
	_, err := compile(name, text, funcMap(g, mode))
	return err
}

// Render renders text for env. The render runs in its own goroutine under a
// deadline: text/template cannot be interrupted, so every function call,
// range entry and write checks the deadline and aborts the execution, and
// Render returns as soon as the budget is spent even if the goroutine needs
// a moment longer to notice.
func Render(ctx context.Context, mode Mode, name, text string, env Env, lim Limits) (string, error) {
	return renderDepth(ctx, mode, name, text, env, lim.withDefaults(), 0)
}

func renderDepth(ctx context.Context, mode Mode, name, text string, env Env, lim Limits, depth int) (string, error) {
	if len(text) > lim.MaxSource {
		return "", ErrSourceTooLarge
	}
	if !strings.Contains(text, "{{") && len(text) <= lim.MaxOutput && ctx.Err() == nil {
		// Text without an action renders as itself: no function map to
		// build and nothing to parse (a callback's fixed Url, say).
		return text, nil
	}
	ctx, cancel := context.WithTimeout(ctx, lim.Timeout)
	defer cancel()
	g := &guard{ctx: ctx, lim: lim}
	t, err := compile(name, text, funcMap(g, mode))
	if err != nil {
		return "", err
	}
	data := newData(ctx, mode, env, lim, depth)

	type result struct {
		out string
		err error
	}
	done := make(chan result, 1)
	go func() {
		var buf bytes.Buffer
		w := &limitedWriter{g: g, buf: &buf}
		err := t.Execute(w, data)
		done <- result{buf.String(), err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			return "", cleanError(mode, r.err)
		}
		return r.out, nil
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return "", ErrTimeout
		}
		return "", ctx.Err()
	}
}

func compile(name, text string, funcs template.FuncMap) (*template.Template, error) {
	t, err := template.New(name).Option("missingkey=default").Funcs(funcs).Parse(text)
	if err != nil {
		return nil, err
	}
	for _, tt := range t.Templates() {
		if tt.Tree != nil && tt.Tree.Root != nil {
			guardRanges(tt.Tree, tt.Tree.Root)
		}
	}
	return t, nil
}

// execDetail matches the location part of a text/template execution error;
// what follows it may quote data (a decoded param passed to fail, a missing
// map key), so caller-mode errors keep only the location.
var execDetail = regexp.MustCompile(`^(template: [^\n]*?:\d+:\d+: executing "[^"]*" at <[^>]*>)`)

func cleanError(mode Mode, err error) error {
	for _, sentinel := range []error{ErrTimeout, ErrOutputTooLarge, errTooMany} {
		if errors.Is(err, sentinel) {
			return sentinel
		}
	}
	if mode != Caller {
		return err
	}
	if m := execDetail.FindString(err.Error()); m != "" {
		return errors.New(m + ": execution failed")
	}
	return errors.New("template execution failed")
}

// limitedWriter caps the output and notices the deadline between writes.
type limitedWriter struct {
	g   *guard
	buf *bytes.Buffer
}

func (w *limitedWriter) Write(p []byte) (int, error) {
	if err := w.g.check(); err != nil {
		return 0, err
	}
	if w.buf.Len()+len(p) > w.g.lim.MaxOutput {
		return 0, ErrOutputTooLarge
	}
	return w.buf.Write(p)
}
