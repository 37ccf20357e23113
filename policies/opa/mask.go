package opa

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/provgate/provgate/policies"
)

// mask replaces the secrets a logged input could hold by what they are,
// never by words in field names (docs/design.md §9.5): a field named
// token_roles or machine_token names roles and a token kind, and erasing
// it would make the line replay to another decision. Replaced values
// become policies.MaskedValue(), the form the policy already sees for
// secure values, and their JSON pointers are listed in masked.
//
// What is a secret: the credential fields of the addressed object as
// stored or proposed (a user's Password, PasswordHash and Secret, a
// machine's Secret), sealed secure values ({Key, Nonce, Payload}), and
// strings shaped like credentials: a JWT, an Authorization header value,
// an scrypt hash, a PEM private key. The gateway masks the first two
// before the policy sees them; this is the log's own guard.
func mask(v any, path string, masked *[]string) any {
	switch x := v.(type) {
	case map[string]any:
		for k, val := range x {
			p := path + "/" + strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
			if objectCredential(path, k) && !isMasked(val) {
				x[k] = policies.MaskedValue()
				*masked = append(*masked, p)
				continue
			}
			x[k] = mask(val, p, masked)
		}
		if sealedValue(x) {
			*masked = append(*masked, path)
			return policies.MaskedValue()
		}
	case []any:
		for i, val := range x {
			x[i] = mask(val, fmt.Sprintf("%s/%d", path, i), masked)
		}
	case string:
		if credentialString(x) {
			*masked = append(*masked, path)
			return policies.MaskedValue()
		}
	}
	return v
}

// objectCredential: field k of the object at path is a credential of the
// addressed object (input.stored or input.proposed).
func objectCredential(path, k string) bool {
	if path != "/input/stored" && path != "/input/proposed" {
		return false
	}
	switch k {
	case "Password", "PasswordHash", "Secret":
		return true
	}
	return false
}

func isMasked(v any) bool {
	m, ok := v.(map[string]any)
	return ok && len(m) == 1 && m["masked"] == true
}

// sealedValue is a secure param value as stored: {Key, Nonce, Payload}.
func sealedValue(m map[string]any) bool {
	if len(m) != 3 {
		return false
	}
	for _, k := range []string{"Key", "Nonce", "Payload"} {
		if _, ok := m[k]; !ok {
			return false
		}
	}
	return true
}

var (
	scryptHash = regexp.MustCompile(`^[0-9]+\$[0-9]+\$[0-9]+\$[0-9a-fA-F]+\$[0-9a-fA-F]+$`)
	jwtShape   = regexp.MustCompile(`^[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]+$`)
)

// credentialString: s has the shape of a credential.
func credentialString(s string) bool {
	switch {
	case len(s) < 8:
		return false
	case strings.HasPrefix(s, "Basic ") || strings.HasPrefix(s, "Bearer "):
		return true
	case strings.Contains(s, "PRIVATE KEY-----"):
		return true
	case scryptHash.MatchString(s):
		return true
	case jwtShape.MatchString(s):
		head, _, _ := strings.Cut(s, ".")
		raw, err := base64.RawURLEncoding.DecodeString(head)
		if err != nil {
			return false
		}
		var h map[string]any
		return json.Unmarshal(raw, &h) == nil && h["alg"] != nil
	}
	return false
}
