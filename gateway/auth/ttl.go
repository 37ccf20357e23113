package auth

import (
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/provgate/provgate/backend"
)

// ttlUnits are DRP's duration units (models.ParseDuration), longest first so
// "mo" wins over "m". Months and years are fixed lengths: a token lifetime
// does not need calendar arithmetic.
var ttlUnits = []struct {
	name string
	d    time.Duration
}{
	{"mo", 30 * 24 * time.Hour},
	{"y", 365 * 24 * time.Hour},
	{"w", 7 * 24 * time.Hour},
	{"d", 24 * time.Hour},
	{"h", time.Hour},
	{"m", time.Minute},
	{"s", time.Second},
}

// ParseTTL reads a token lifetime: "" gives def; whole seconds ("3600", what
// drpcli sends); a Go duration ("1h30m"); or DRP units s m h d w mo y, also
// combined ("1d12h", "1mo"). A lifetime above max (when max > 0) is an error
// rather than silently clamped, so a client never believes it holds a token
// longer-lived than it does. Zero, negative, "never" and anything
// unreadable are EBADREQUEST with a message saying what is accepted.
func ParseTTL(s string, def, max time.Duration) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return def, nil
	}
	d, ok := parseTTL(s)
	switch {
	case !ok:
		return 0, backend.Errorf(backend.EBADREQUEST,
			"invalid ttl %q: use seconds (3600), a Go duration (1h30m) or a number with unit s, m, h, d, w, mo or y (7d)", s)
	case d <= 0:
		return 0, backend.Errorf(backend.EBADREQUEST, "ttl %q must be positive", s)
	case max > 0 && d > max:
		return 0, backend.Errorf(backend.EBADREQUEST, "ttl %q exceeds the maximum of %s", s, max)
	}
	return d, nil
}

// ParseTTL reads a user token lifetime with this authenticator's DefaultTTL
// and MaxTTL, for the ttl parameter of the token endpoint.
func (a *Authenticator) ParseTTL(s string) (time.Duration, error) {
	return ParseTTL(s, a.defTTL, a.maxTTL)
}

// parseTTL returns ok=false for unreadable input; out-of-range values come
// back as math.MaxInt64 so the caller reports them as above the maximum.
func parseTTL(s string) (time.Duration, bool) {
	if isDigits(s) {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n > math.MaxInt64/int64(time.Second) {
			return math.MaxInt64, true
		}
		return time.Duration(n) * time.Second, true
	}
	if d, err := time.ParseDuration(s); err == nil {
		return d, true
	}
	var total time.Duration
	for s != "" {
		i := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == 0 {
			return 0, false
		}
		num, rest := s[:i], s[i:]
		var unit time.Duration
		for _, u := range ttlUnits {
			if strings.HasPrefix(rest, u.name) {
				unit, rest = u.d, rest[len(u.name):]
				break
			}
		}
		if unit == 0 {
			return 0, false
		}
		n, err := strconv.ParseInt(num, 10, 64)
		if err != nil || n > int64(math.MaxInt64-total)/int64(unit) {
			return math.MaxInt64, true
		}
		total += time.Duration(n) * unit
		s = rest
	}
	return total, true
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}
