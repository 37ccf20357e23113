// Package callback is the callback plugin provider: the machine action
// callbackDo, which sends a web request built from a named callback of the
// plugin's configuration, its auth methods, and the jobfail trigger fed by
// the event bus through a durable delivery queue (docs/design.md
// §12, §12.9).
package callback

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"github.com/provgate/provgate/backend/render"
)

// Param names.
const (
	ParamCallbacks    = "callback/callbacks"
	ParamAuths        = "callback/auths"
	ParamAction       = "callback/action"
	ParamDataOverride = "callback/data-override"
	ParamPlugin       = "callback/plugin"
	ParamSkip         = "callback/skip"

	// JobFail is the reserved callback name sent when a machine's job fails.
	JobFail = "jobfail"
)

// Defaults (docs/design.md §12.1).
const (
	DefaultTimeout = 7200 // seconds, callbacks and json-token auths
	DefaultMethod  = "POST"
	// MaxRetry bounds Retry of a callback or json-token auth: with Delay 0
	// and a target that fails at once, every retry is an outbound request
	// and an attempt record, so one callbackDo must not be able to ask for
	// millions of them within its Timeout (docs/design.md §12.1).
	MaxRetry = 100
)

// Callback is one entry of callback/callbacks (docs/design.md §12.1).
type Callback struct {
	Url            string            `json:"Url"`
	Method         string            `json:"Method"`
	Headers        map[string]string `json:"Headers"`
	Retry          int               `json:"Retry"`
	Timeout        int               `json:"Timeout"`
	Delay          int               `json:"Delay"`
	NoBody         bool              `json:"NoBody"`
	JsonResponse   bool              `json:"JsonResponse"`
	StringResponse bool              `json:"StringResponse"`
	Debug          bool              `json:"Debug"`
	Auth           string            `json:"Auth"`
	Auths          []string          `json:"Auths"`
	Aggregate      bool              `json:"Aggregate"`
	Decode         bool              `json:"Decode"`
	ExcludeParams  []string          `json:"ExcludeParams"`
	// InsecureSkipVerify turns TLS certificate verification off for this
	// callback only (docs/design.md §12.6: verification is on unless a callback opts out).
	InsecureSkipVerify bool `json:"InsecureSkipVerify"`
	// RawBody is accepted so that DRP v4.7 configurations load; a string
	// data-override is always sent as rendered, so it changes nothing.
	RawBody bool `json:"RawBody"`
}

// Auth is one entry of callback/auths (docs/design.md §12.5).
type Auth struct {
	AuthType      string `json:"AuthType"`
	Debug         bool   `json:"Debug"`
	Path          string `json:"Path"`
	Username      string `json:"Username"`
	Password      string `json:"Password"`
	Url           string `json:"Url"`
	Method        string `json:"Method"`
	Data          string `json:"Data"`
	Query         string `json:"Query"`
	TokenField    string `json:"TokenField"`
	DurationField string `json:"DurationField"`
	Retry         int    `json:"Retry"`
	Timeout       int    `json:"Timeout"`
	Delay         int    `json:"Delay"`
	// InsecureSkipVerify, as for Callback, for the token request.
	InsecureSkipVerify bool `json:"InsecureSkipVerify"`
}

// Auth types.
const (
	AuthBasic     = "basic"
	AuthJSONToken = "json-token"
	AuthExec      = "exec"
)

// ValidateOptions are the operator settings validation depends on.
type ValidateOptions struct {
	// ExecDir is --callback-exec-dir: exec auths may only run programs under
	// it. Empty disables exec auths.
	ExecDir string
}

// Config is a plugin's parsed callback configuration.
type Config struct {
	Callbacks map[string]*Callback
	Auths     map[string]*Auth
}

// Parse decodes and validates a plugin's params. It returns whatever could
// be decoded together with every problem found; messages name the callback,
// auth and field, never a value that may be secret.
func Parse(params map[string]any, opts ValidateOptions) (*Config, []string) {
	var p problems
	cfg := &Config{Callbacks: map[string]*Callback{}, Auths: map[string]*Auth{}}
	if _, ok := params[ParamDataOverride]; ok {
		p.add("%s is only valid as a parameter of the action call, not in the plugin configuration", ParamDataOverride)
	}
	if raw, ok := params[ParamAuths]; ok && raw != nil {
		m, ok := raw.(map[string]any)
		if !ok {
			p.add("%s must be an object of named auths", ParamAuths)
		}
		for _, name := range slices.Sorted(maps.Keys(m)) {
			a := &Auth{}
			if decodeStrict(&p, fmt.Sprintf("%s %q", ParamAuths, name), m[name], a) {
				cfg.Auths[name] = a
				validateAuth(&p, name, a, opts)
			}
		}
	}
	raw, ok := params[ParamCallbacks]
	if !ok || raw == nil {
		p.add("Missing Parameter %s", ParamCallbacks)
		return cfg, p.list
	}
	m, ok := raw.(map[string]any)
	if !ok {
		p.add("%s must be an object of named callbacks", ParamCallbacks)
		return cfg, p.list
	}
	for _, name := range slices.Sorted(maps.Keys(m)) {
		c := &Callback{}
		if decodeStrict(&p, fmt.Sprintf("%s %q", ParamCallbacks, name), m[name], c) {
			cfg.Callbacks[name] = c
			validateCallback(&p, name, c, cfg.Auths)
		}
	}
	return cfg, p.list
}

// Validate returns every problem of a plugin's callback configuration.
func Validate(params map[string]any, opts ValidateOptions) []string {
	_, errs := Parse(params, opts)
	return errs
}

type problems struct{ list []string }

func (p *problems) add(format string, args ...any) {
	p.list = append(p.list, fmt.Sprintf(format, args...))
}

// decodeStrict decodes v into the struct dst with field names matched
// exactly as the documented configuration spells them (encoding/json alone matches keys
// case-insensitively and drops unknown ones, which is how DRP lost
// "Retries"). Each field is decoded on its own so that every bad field is
// reported.
func decodeStrict(p *problems, where string, v any, dst any) bool {
	obj, ok := v.(map[string]any)
	if !ok {
		p.add("%s must be an object", where)
		return false
	}
	rv := reflect.ValueOf(dst).Elem()
	rt := rv.Type()
	fields := map[string]int{}
	var names []string
	for i := range rt.NumField() {
		name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
		fields[name] = i
		names = append(names, name)
	}
	for _, key := range slices.Sorted(maps.Keys(obj)) {
		i, ok := fields[key]
		if !ok {
			if s := suggest(key, names); s != "" {
				p.add("%s: unknown field %q (did you mean %q?)", where, key, s)
			} else {
				p.add("%s: unknown field %q", where, key)
			}
			continue
		}
		b, err := json.Marshal(obj[key])
		if err == nil {
			err = json.Unmarshal(b, rv.Field(i).Addr().Interface())
		}
		if err != nil {
			p.add("%s: field %s must be %s", where, key, typeName(rt.Field(i).Type))
		}
	}
	return true
}

func typeName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int:
		return "an integer"
	case reflect.Slice:
		return "a list of strings"
	case reflect.Map:
		return "an object of strings"
	}
	return t.String()
}

// suggest names the known field closest to an unknown key: same letters in
// another case, a known field the key starts with (Retries → Retry), or an
// edit distance of at most two.
func suggest(key string, names []string) string {
	best, bestD := "", 3
	// Plurals are the commonest slip: Retries → Retry, Urls → Url.
	forms := []string{key, strings.TrimSuffix(key, "s")}
	if strings.HasSuffix(key, "ies") {
		forms = append(forms, strings.TrimSuffix(key, "ies")+"y")
	}
	for _, f := range forms {
		for _, n := range names {
			if strings.EqualFold(n, f) {
				return n
			}
		}
	}
	for _, n := range names {
		if len(n) >= 4 && strings.HasPrefix(strings.ToLower(key), strings.ToLower(n)) {
			return n
		}
	}
	for _, n := range names {
		if d := distance(strings.ToLower(key), strings.ToLower(n)); d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

var methods = map[string]bool{"GET": true, "POST": true, "PUT": true, "PATCH": true, "DELETE": true, "HEAD": true, "OPTIONS": true}

func validateCallback(p *problems, name string, c *Callback, auths map[string]*Auth) {
	where := fmt.Sprintf("callback %q", name)
	switch {
	case c.Url == "":
		p.add("%s: Url is required", where)
	case strings.Contains(c.Url, "{{"):
		if err := render.Check("url", c.Url, render.Config); err != nil {
			p.add("%s: Url template: %v", where, err)
		}
		// The literal part before the first action must still be a
		// plausible http(s) URL prefix.
		prefix, _, _ := strings.Cut(c.Url, "{{")
		if scheme, _, ok := strings.Cut(prefix, "://"); ok && scheme != "http" && scheme != "https" {
			p.add("%s: Url scheme must be http or https", where)
		}
	default:
		if msg := checkURL(c.Url); msg != "" {
			p.add("%s: Url %s", where, msg)
		}
	}
	if c.Method != "" && !methods[c.Method] {
		p.add("%s: invalid Method (one of GET, POST, PUT, PATCH, DELETE, HEAD, OPTIONS, upper case)", where)
	}
	for h := range c.Headers {
		if !validHeaderName(h) {
			p.add("%s: invalid header name %q", where, h)
		}
	}
	for h, v := range c.Headers {
		if strings.ContainsAny(v, "\r\n\x00") {
			p.add("%s: header %s has an invalid value", where, h)
		}
	}
	nonNegative(p, where, "Retry", c.Retry)
	atMost(p, where, "Retry", c.Retry, MaxRetry)
	nonNegative(p, where, "Delay", c.Delay)
	nonNegative(p, where, "Timeout", c.Timeout)
	for _, a := range authList(c) {
		if _, ok := auths[a]; !ok {
			p.add("%s: auth %q is not defined in %s", where, a, ParamAuths)
		}
	}
	for _, e := range c.ExcludeParams {
		if e == "" {
			p.add("%s: ExcludeParams holds an empty name", where)
		}
	}
}

func validateAuth(p *problems, name string, a *Auth, opts ValidateOptions) {
	where := fmt.Sprintf("auth %q", name)
	switch a.AuthType {
	case AuthBasic:
		if a.Username == "" {
			p.add("%s: basic auth needs Username", where)
		}
	case AuthJSONToken:
		if a.Url == "" {
			p.add("%s: json-token auth needs Url", where)
		} else if msg := checkURL(a.Url); msg != "" {
			p.add("%s: Url %s", where, msg)
		}
		if a.TokenField == "" {
			p.add("%s: json-token auth needs TokenField", where)
		}
		if a.Method != "" && !methods[a.Method] {
			p.add("%s: invalid Method (one of GET, POST, PUT, PATCH, DELETE, HEAD, OPTIONS, upper case)", where)
		}
	case AuthExec:
		if a.Path == "" {
			p.add("%s: exec auth needs Path", where)
		} else if _, err := execPath(opts.ExecDir, a.Path); err != nil {
			p.add("%s: %v", where, err)
		}
	case "":
		p.add("%s: AuthType is required (basic, json-token or exec)", where)
	default:
		p.add("%s: unknown AuthType %q (basic, json-token or exec)", where, a.AuthType)
	}
	nonNegative(p, where, "Retry", a.Retry)
	atMost(p, where, "Retry", a.Retry, MaxRetry)
	nonNegative(p, where, "Delay", a.Delay)
	nonNegative(p, where, "Timeout", a.Timeout)
}

func nonNegative(p *problems, where, field string, v int) {
	if v < 0 {
		p.add("%s: %s must not be negative", where, field)
	}
}

func atMost(p *problems, where, field string, v, max int) {
	if v > max {
		p.add("%s: %s %d is more than %d", where, field, v, max)
	}
}

// checkURL returns what is wrong with an absolute http(s) URL, without
// quoting it (it may carry credentials).
func checkURL(raw string) string {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return "is not a valid URL"
	case u.Scheme != "http" && u.Scheme != "https":
		return "scheme must be http or https"
	case u.Host == "":
		return "has no host"
	}
	return ""
}

func validHeaderName(h string) bool {
	if h == "" {
		return false
	}
	for _, r := range h {
		if r > 0x7e || r <= ' ' || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, r) {
			return false
		}
	}
	return true
}

// authList is the effective auth list: Auth, then Auths (docs/design.md
// §12.5).
func authList(c *Callback) []string {
	var l []string
	if c.Auth != "" {
		l = append(l, c.Auth)
	}
	for _, a := range c.Auths {
		if a != "" {
			l = append(l, a)
		}
	}
	return l
}

// errExecPath is the one answer for every exec Path that cannot be used:
// relative, missing, outside the directory (directly, through "..", or
// through a symbolic link), a directory, not executable. Telling those
// apart would let whoever may write a plugin probe which files exist on
// the server, so plugin Errors, action errors and GetAuthString all say
// only this.
var errExecPath = errors.New("exec Path is not an executable file inside the allowed exec directory")

// execPath resolves path (symlinks and ..) and accepts it only if it is a
// regular executable file under dir, itself resolved. A path that is not
// lexically under dir is refused before the file system is consulted.
func execPath(dir, path string) (string, error) {
	if dir == "" {
		return "", fmt.Errorf("exec auths are disabled (no --callback-exec-dir configured)")
	}
	if !filepath.IsAbs(path) {
		return "", errExecPath
	}
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", errExecPath
	}
	clean := filepath.Clean(path)
	if !inside(filepath.Clean(dir), clean) && !inside(root, clean) {
		return "", errExecPath
	}
	resolved, err := filepath.EvalSymlinks(clean)
	if err != nil || !inside(root, resolved) {
		return "", errExecPath
	}
	fi, err := os.Stat(resolved)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return "", errExecPath
	}
	return resolved, nil
}

// inside reports whether path is strictly below dir (both clean).
func inside(dir, path string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != "." && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}
