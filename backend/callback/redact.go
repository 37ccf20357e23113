package callback

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

const masked = "[REDACTED]"

// secretClass says which claim lets a caller read a secret itself.
type secretClass int

const (
	// configSecret is part of a plugin's configuration or obtained with it:
	// auth passwords, token-request Data and Query, configured header
	// values, passwords and query values of URLs, tokens and GetAuthString
	// output. Readable with "plugins getSecure <plugin>".
	configSecret secretClass = iota
	// machineSecret is a decoded secure param value of the machine (a
	// callback with Decode). Readable with "machines getSecure <machine>".
	machineSecret
)

type secret struct {
	v     string
	class secretClass
}

// redactor masks known secret strings in any text that leaves the service:
// errors, recorded attempts and debug logs always (String, excerpt), and
// what an action returns to a caller who may not read them (only).
type redactor struct {
	mu      sync.Mutex
	secrets []secret
}

func newRedactor(secrets ...[]string) *redactor {
	r := &redactor{}
	for _, l := range secrets {
		r.add(l...)
	}
	return r
}

// add adds configuration secrets.
func (r *redactor) add(s ...string) { r.addClass(configSecret, s...) }

// addClass adds secrets of class c, each also in the escaped form it takes
// inside a JSON string, so that an echo of a JSON body is masked too.
func (r *redactor) addClass(c secretClass, s ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, v := range s {
		v = strings.TrimSpace(v)
		// Very short values would mask ordinary words; they are not worth
		// treating as secrets anyway.
		if len(v) < 4 {
			continue
		}
		for _, form := range jsonForms(v) {
			if !slices.ContainsFunc(r.secrets, func(x secret) bool { return x.v == form && x.class == c }) {
				r.secrets = append(r.secrets, secret{form, c})
			}
		}
	}
	// Longest first, so that a secret containing another is masked whole.
	sort.SliceStable(r.secrets, func(i, j int) bool { return len(r.secrets[i].v) > len(r.secrets[j].v) })
}

// jsonForms is v and v as escaped inside a JSON string, with and without
// HTML escaping (encoding/json escapes <, > and & by default).
func jsonForms(v string) []string {
	out := []string{v}
	var forms []string
	// Encoding a string cannot fail; a form that did would only be left
	// out, and the plain value is always masked.
	if b, err := json.Marshal(v); err == nil {
		forms = append(forms, string(b))
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err == nil {
		forms = append(forms, strings.TrimSuffix(buf.String(), "\n"))
	}
	for _, f := range forms {
		if f = strings.TrimSuffix(strings.TrimPrefix(f, `"`), `"`); !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out
}

// only returns a redactor of the secrets whose class mask reports true.
func (r *redactor) only(mask func(secretClass) bool) *redactor {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := &redactor{}
	for _, x := range r.secrets {
		if mask(x.class) {
			out.secrets = append(out.secrets, x)
		}
	}
	return out
}

func (r *redactor) has(c secretClass) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.ContainsFunc(r.secrets, func(x secret) bool { return x.class == c })
}

func (r *redactor) empty() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.secrets) == 0
}

func (r *redactor) String(s string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, sec := range r.secrets {
		s = strings.ReplaceAll(s, sec.v, masked)
	}
	return s
}

// json masks the secrets in every string (values and keys) of the JSON
// document b. It returns b itself when nothing was masked, and otherwise
// the document encoded again (numbers kept as written).
func (r *redactor) json(b []byte) ([]byte, error) {
	if r.empty() {
		return b, nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	changed := false
	var walk func(v any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case string:
			if m := r.String(x); m != x {
				changed = true
				return m
			}
		case []any:
			for i := range x {
				x[i] = walk(x[i])
			}
		case map[string]any:
			out := make(map[string]any, len(x))
			for k, e := range x {
				mk := r.String(k)
				if mk != k {
					changed = true
				}
				out[mk] = walk(e)
			}
			return out
		}
		return v
	}
	v = walk(v)
	if !changed {
		return b, nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// secretStrings lists what of a decoded secure value may show up in text:
// the value itself when it is a string, else its JSON encoding and every
// string inside it.
func secretStrings(v any) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case map[string]any, []any:
		var out []string
		// x was decoded from JSON, so it encodes; every string inside it
		// is listed below in any case.
		if b, err := json.Marshal(x); err == nil {
			out = append(out, string(b))
		}
		var walk func(v any)
		walk = func(v any) {
			switch y := v.(type) {
			case string:
				out = append(out, y)
			case []any:
				for _, e := range y {
					walk(e)
				}
			case map[string]any:
				for k, e := range y {
					out = append(out, k)
					walk(e)
				}
			}
		}
		walk(x)
		return out
	}
	return nil
}

// excerpt is a bounded, printable, redacted piece of a response body.
func (r *redactor) excerpt(b []byte, n int) string {
	truncated := false
	if len(b) > n {
		b, truncated = b[:n], true
	}
	for len(b) > 0 && !utf8.Valid(b) {
		b = b[:len(b)-1]
	}
	s := strings.Map(func(c rune) rune {
		if c == '\n' || c == '\t' || unicode.IsPrint(c) {
			return c
		}
		return '.'
	}, string(b))
	s = r.String(s)
	if truncated {
		s += "..."
	}
	return s
}

// safeURL drops the userinfo password and masks the query, which may carry
// API keys or a rendered GetAuthString value.
func safeURL(u *url.URL) string {
	if u == nil {
		return ""
	}
	c := *u
	if c.User != nil {
		c.User = url.User(c.User.Username())
	}
	if c.RawQuery != "" {
		c.RawQuery = "REDACTED"
	}
	return c.String()
}

// urlSecrets are the password and the query values of a configured URL
// (query parameters often carry API keys). Template actions are left out:
// what they render is not configuration.
func urlSecrets(raw string) []string {
	u, err := url.Parse(raw)
	if err != nil {
		return nil
	}
	var out []string
	if u.User != nil {
		if p, ok := u.User.Password(); ok {
			out = append(out, p)
		}
	}
	for _, vs := range u.Query() {
		for _, v := range vs {
			if !strings.Contains(v, "{{") {
				out = append(out, v)
			}
		}
	}
	return out
}

// transportError describes a failed exchange without the request URL that
// net/http puts in its errors.
func transportError(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return err.Error()
}

var sensitiveHeaders = map[string]bool{
	"Authorization": true, "Proxy-Authorization": true, "Authentication": true,
	"Cookie": true, "Set-Cookie": true, "X-Api-Key": true,
}

// headerLog renders headers for a debug log with every sensitive or
// configured header value masked.
func headerLog(h http.Header, configured map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range h {
		val := strings.Join(v, ", ")
		if sensitiveHeaders[http.CanonicalHeaderKey(k)] {
			val = masked
		}
		for ck := range configured {
			if http.CanonicalHeaderKey(ck) == http.CanonicalHeaderKey(k) {
				val = masked
			}
		}
		out[k] = val
	}
	return out
}
