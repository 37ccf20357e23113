package auth

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/crypto/scrypt"

	"github.com/provgate/provgate/backend"
)

// MaxPasswordLen caps passwords in bytes. scrypt hashes the password with
// PBKDF2 first, so length does not change its cost much, but an unbounded
// password still means unbounded request work and memory for nothing.
const MaxPasswordLen = 1024

// scryptParams are the parameters of one scrypt hash.
type scryptParams struct {
	n, r, p int
	saltLen int
	keyLen  int
}

// defaultParams is what HashPassword uses. N=2^15, r=8, p=1 is the x/crypto
// scrypt package's recommendation for interactive logins: 32 MiB and on the
// order of 100 ms per hash on one server core (about 300 ms measured on a
// busy shared 2-core machine). That is twice DRP's own default (N=16384)
// while keeping a cold Basic login under a second; warm Basic logins skip
// scrypt altogether (see basicCache). A 16-byte salt and 32-byte key match
// the simple-scrypt defaults that drpcli produces.
var defaultParams = scryptParams{n: 1 << 15, r: 8, p: 1, saltLen: 16, keyLen: 32}

// Bounds for hashes we are asked to check. Stored hashes may come from a
// client (a PasswordHash given on user create), so their parameters are
// untrusted input: without a cap, one crafted hash would make every login of
// that user burn gigabytes and seconds.
const (
	minN         = 1 << 10
	maxN         = 1 << 20
	maxR         = 32
	maxP         = 16
	maxMemory    = 64 << 20 // 128*N*r bytes: twice our default
	maxWork      = 1 << 21  // N*r*p: eight times our default
	minSaltLen   = 8
	maxSaltLen   = 64
	minKeyLen    = 16
	maxKeyLen    = 64
	maxHashBytes = 512
)

// HashPassword hashes pw with scrypt and a random salt, in the simple-scrypt
// string form "N$r$p$<salt hex>$<key hex>" that DRP stores and that
// `drpcli users passwordhash` prints, so hashes move freely between the two.
func HashPassword(pw string) ([]byte, error) {
	return hashPassword(pw, defaultParams)
}

// HashPasswordN returns HashPassword at scrypt cost N=n instead of the
// default (r and p unchanged); n must be a power of two within the bounds
// CheckPassword accepts, or it panics. Only a server's tests lower it: at
// the default cost, hashing the admin password and checking its first
// login are most of a test server's start under the race detector.
func HashPasswordN(n int) func(pw string) ([]byte, error) {
	sp := paramsN(n)
	return func(pw string) ([]byte, error) { return hashPassword(pw, sp) }
}

// paramsN is defaultParams at N=n (0: the default).
func paramsN(n int) scryptParams {
	sp := defaultParams
	if n == 0 {
		return sp
	}
	if n < minN || n > maxN || n&(n-1) != 0 {
		panic(fmt.Sprintf("auth: scrypt N %d is not a power of two in [%d, %d]", n, minN, maxN))
	}
	sp.n = n
	return sp
}

func hashPassword(pw string, sp scryptParams) ([]byte, error) {
	if err := validatePassword(pw); err != nil {
		return nil, err
	}
	salt := make([]byte, sp.saltLen)
	if _, err := rand.Read(salt); err != nil {
		return nil, &backend.Error{Code: backend.EINTERNAL, Messages: []string{"cannot hash password"}, Err: err}
	}
	dk, err := scrypt.Key([]byte(pw), salt, sp.n, sp.r, sp.p, sp.keyLen)
	if err != nil {
		return nil, &backend.Error{Code: backend.EINTERNAL, Messages: []string{"cannot hash password"}, Err: err}
	}
	return fmt.Appendf(nil, "%d$%d$%d$%x$%x", sp.n, sp.r, sp.p, salt, dk), nil
}

// validatePassword is EBADREQUEST, as DRP answers 400 when it cannot hash a
// password change.
func validatePassword(pw string) error {
	switch {
	case pw == "":
		return backend.Errorf(backend.EBADREQUEST, "password must not be empty")
	case len(pw) > MaxPasswordLen:
		return backend.Errorf(backend.EBADREQUEST, "password longer than %d bytes", MaxPasswordLen)
	case strings.IndexByte(pw, 0) >= 0:
		// scrypt's PBKDF2 pads an HMAC key with zero bytes, so "pw" and
		// "pw\x00" would hash alike: a NUL would silently not count.
		return backend.Errorf(backend.EBADREQUEST, "password must not contain NUL bytes")
	}
	return nil
}

// CheckPassword reports whether pw matches hash. Hashes whose parameters are
// outside the accepted bounds never match, so a hostile stored hash cannot be
// used to exhaust the server.
func CheckPassword(hash []byte, pw string) bool {
	if validatePassword(pw) != nil {
		return false
	}
	sp, salt, dk, err := parseHash(hash)
	if err != nil {
		return false
	}
	got, err := scrypt.Key([]byte(pw), salt, sp.n, sp.r, sp.p, len(dk))
	if err != nil {
		return false
	}
	return subtle.ConstantTimeCompare(got, dk) == 1
}

// ValidatePasswordHash checks that hash is a simple-scrypt string within the
// accepted bounds. The gateway calls it when a client supplies PasswordHash
// on create, so a bad hash is refused up front instead of locking the user
// out later.
func ValidatePasswordHash(hash []byte) error {
	if _, _, _, err := parseHash(hash); err != nil {
		return backend.Errorf(backend.EINVALID, "PasswordHash: %v", err)
	}
	return nil
}

func parseHash(hash []byte) (sp scryptParams, salt, dk []byte, err error) {
	if len(hash) > maxHashBytes {
		return sp, nil, nil, fmt.Errorf("hash longer than %d bytes", maxHashBytes)
	}
	parts := strings.Split(string(hash), "$")
	if len(parts) != 5 {
		return sp, nil, nil, fmt.Errorf("want N$r$p$salt$key")
	}
	var nums [3]int
	for i, name := range []string{"N", "r", "p"} {
		nums[i], err = parseSmallUint(parts[i])
		if err != nil {
			return sp, nil, nil, fmt.Errorf("bad %s: %v", name, err)
		}
	}
	sp.n, sp.r, sp.p = nums[0], nums[1], nums[2]
	switch {
	case sp.n < minN || sp.n > maxN || sp.n&(sp.n-1) != 0:
		return sp, nil, nil, fmt.Errorf("scrypt N must be a power of two from %d to %d", minN, maxN)
	case sp.r < 1 || sp.r > maxR:
		return sp, nil, nil, fmt.Errorf("r must be from 1 to %d", maxR)
	case sp.p < 1 || sp.p > maxP:
		return sp, nil, nil, fmt.Errorf("p must be from 1 to %d", maxP)
	case 128*sp.n*sp.r > maxMemory:
		return sp, nil, nil, fmt.Errorf("scrypt N and r need more than %d MiB", maxMemory>>20)
	case sp.n*sp.r*sp.p > maxWork:
		return sp, nil, nil, fmt.Errorf("scrypt N, r and p cost too much")
	}
	if salt, err = hex.DecodeString(parts[3]); err != nil {
		return sp, nil, nil, fmt.Errorf("bad salt hex")
	}
	if len(salt) < minSaltLen || len(salt) > maxSaltLen {
		return sp, nil, nil, fmt.Errorf("salt must be %d to %d bytes", minSaltLen, maxSaltLen)
	}
	if dk, err = hex.DecodeString(parts[4]); err != nil {
		return sp, nil, nil, fmt.Errorf("bad key hex")
	}
	if len(dk) < minKeyLen || len(dk) > maxKeyLen {
		return sp, nil, nil, fmt.Errorf("key must be %d to %d bytes", minKeyLen, maxKeyLen)
	}
	sp.saltLen, sp.keyLen = len(salt), len(dk)
	return sp, salt, dk, nil
}

// parseSmallUint accepts plain decimal digits only (no sign, no spaces), so
// one hash has one spelling.
func parseSmallUint(s string) (int, error) {
	if s == "" || len(s) > 9 || strings.TrimLeft(s, "0123456789") != "" {
		return 0, fmt.Errorf("not a small decimal number")
	}
	return strconv.Atoi(s)
}

// NewSecret returns a fresh random Secret for a user, machine or the system:
// 26 base32 characters, 128 bits from crypto/rand (DRP uses 16 characters;
// clients treat the value as opaque).
func NewSecret() string { return rand.Text() }
