package backend

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// ETag is the entity tag of a stored object: a hash of its revision and JSON,
// the same on every replica.
func ETag(rev int64, data []byte) string {
	h := sha256.New()
	fmt.Fprintf(h, "%d\n", rev)
	h.Write(data)
	return `"` + hex.EncodeToString(h.Sum(nil)[:16]) + `"`
}

// ModelETag is the ETag of an object as the object service reads it
// (sanitized, unshaped) at revision rev. A long poll compares against this
// value.
func ModelETag(m Model, rev int64) string {
	b, err := json.Marshal(m)
	if err != nil {
		return `""`
	}
	return ETag(rev, b)
}
