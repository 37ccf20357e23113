package callback

import (
	"errors"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

const masked = "[REDACTED]"

// redactor masks known secret strings (passwords, token-request Data and
// Query, configured header values, tokens handed out during this call) in
// any text that leaves the service: errors, recorded attempts, debug logs.
type redactor struct{ secrets []string }

func newRedactor(secrets ...[]string) *redactor {
	r := &redactor{}
	for _, l := range secrets {
		r.add(l...)
	}
	return r
}

func (r *redactor) add(s ...string) {
	for _, v := range s {
		v = strings.TrimSpace(v)
		// Very short values would mask ordinary words; they are not worth
		// treating as secrets anyway.
		if len(v) >= 4 {
			r.secrets = append(r.secrets, v)
		}
	}
	// Longest first, so that a secret containing another is masked whole.
	sort.Slice(r.secrets, func(i, j int) bool { return len(r.secrets[i]) > len(r.secrets[j]) })
}

func (r *redactor) String(s string) string {
	for _, sec := range r.secrets {
		s = strings.ReplaceAll(s, sec, masked)
	}
	return s
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

func urlPassword(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return ""
	}
	p, _ := u.User.Password()
	return p
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
