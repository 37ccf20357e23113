package backend

import "strings"

// JSON pointers (RFC 6901): claims name fields and params by pointer
// (update:/Params/a~1b), patches address fields by pointer, and replies
// reveal values by pointer. These are the one implementation of the
// pointer rules the gateway and the object service share.

var (
	pointerEscaper   = strings.NewReplacer("~", "~0", "/", "~1")
	pointerUnescaper = strings.NewReplacer("~1", "/", "~0", "~")
)

// EscapePointer escapes one reference token of a JSON pointer ("a/b" is
// "a~1b").
func EscapePointer(tok string) string {
	if !strings.ContainsAny(tok, "~/") {
		return tok
	}
	return pointerEscaper.Replace(tok)
}

// UnescapePointer undoes EscapePointer on one reference token.
func UnescapePointer(tok string) string {
	if strings.IndexByte(tok, '~') < 0 {
		return tok
	}
	return pointerUnescaper.Replace(tok)
}

// ValidPointer reports whether p is a JSON pointer as written in a patch or
// a claim: "" (the whole document) or '/'-led, with '~' only in "~0" and
// "~1".
func ValidPointer(p string) bool {
	if p != "" && p[0] != '/' {
		return false
	}
	for i := 0; i < len(p); i++ {
		if p[i] == '~' && (i+1 == len(p) || (p[i+1] != '0' && p[i+1] != '1')) {
			return false
		}
	}
	return true
}

// LookupPointer returns the value at pointer p of a decoded JSON document,
// through objects only: a value inside an array is never addressed.
func LookupPointer(doc any, p string) (any, bool) {
	if p == "" {
		return doc, true
	}
	cur := doc
	for _, tok := range strings.Split(p, "/")[1:] {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[UnescapePointer(tok)]; !ok {
			return nil, false
		}
	}
	return cur, true
}
