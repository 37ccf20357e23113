package backend

import "strings"

var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

// EscapePointer escapes one reference token of an RFC 6901 JSON pointer
// ("a/b" is "a~1b"), as claims name param names: update:/Params/a~1b.
func EscapePointer(tok string) string { return pointerEscaper.Replace(tok) }
