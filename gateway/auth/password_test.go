package auth

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/provgate/provgate/backend"
)

func TestHashPasswordDefaults(t *testing.T) {
	h, err := HashPassword("r0cketsk8ts")
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(string(h), "$")
	if len(parts) != 5 || parts[0] != "32768" || parts[1] != "8" || parts[2] != "1" {
		t.Fatalf("got hash %q, want 32768$8$1$salt$key", h)
	}
	if got, want := len(parts[3]), 32; got != want {
		t.Errorf("got salt hex length %d, want %d", got, want)
	}
	if got, want := len(parts[4]), 64; got != want {
		t.Errorf("got key hex length %d, want %d", got, want)
	}
	if !CheckPassword(h, "r0cketsk8ts") {
		t.Error("default hash does not check")
	}
	h2, err := HashPassword("r0cketsk8ts")
	if err != nil {
		t.Fatal(err)
	}
	if string(h2) == string(h) {
		t.Error("two hashes of one password are equal: salt is not random")
	}
}

// TestHashPasswordN: the lowered cost changes N alone, and the input
// rules are HashPassword's.
func TestHashPasswordN(t *testing.T) {
	hash := HashPasswordN(minN)
	h, err := hash("r0cketsk8ts")
	if err != nil {
		t.Fatal(err)
	}
	if parts := strings.Split(string(h), "$"); len(parts) != 5 || parts[0] != "1024" || parts[1] != "8" || parts[2] != "1" ||
		len(parts[3]) != 32 || len(parts[4]) != 64 {
		t.Fatalf("got hash %q, want 1024$8$1$<16-byte salt>$<32-byte key>", h)
	}
	if !CheckPassword(h, "r0cketsk8ts") || CheckPassword(h, "r0cketsk8tz") {
		t.Error("the lowered hash does not check as it should")
	}
	if _, err := hash(""); !backend.IsCode(err, backend.EBADREQUEST) {
		t.Errorf("empty password: %v, want EBADREQUEST", err)
	}
	if got := paramsN(0); got != defaultParams {
		t.Errorf("paramsN(0) = %+v, want the defaults", got)
	}
	for _, n := range []int{minN / 2, maxN * 2, 3000} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("HashPasswordN(%d) did not panic", n)
				}
			}()
			HashPasswordN(n)
		}()
	}
}

func TestCheckPassword(t *testing.T) {
	cheap, err := hashPassword("s3cret", testParams)
	if err != nil {
		t.Fatal(err)
	}
	const (
		// RFC 7914 §12 test vector, in simple-scrypt form.
		rfc = "16384$8$1$536f6469756d43686c6f72696465$" +
			"7023bdcb3afd7348461c06cd81fd38ebfda8fbba904f8e3ea9b543f6545da1f2" +
			"d5432955613f0fcf62d49705242a9af9e61e85dc0d651e40dfcf017b45575887"
		// What drpcli users passwordhash prints (DRP defaults N=16384, 16-byte
		// salt, 32-byte key), computed with OpenSSL's scrypt.
		drp = "16384$8$1$000102030405060708090a0b0c0d0e0f$" +
			"f0aec9179db7b604da6c948ca27734a766758fdadd968f5736f44ab9c0423a7b"
		salt16 = "000102030405060708090a0b0c0d0e0f"
		key32  = "f0aec9179db7b604da6c948ca27734a766758fdadd968f5736f44ab9c0423a7b"
	)
	tests := []struct {
		name string
		hash string
		pw   string
		want bool
	}{
		{"own hash, right password", string(cheap), "s3cret", true},
		{"own hash, wrong password", string(cheap), "s3cret!", false},
		{"own hash, empty password", string(cheap), "", false},
		{"rfc 7914 vector", rfc, "pleaseletmein", true},
		{"rfc 7914 vector, wrong password", rfc, "pleaseletmeout", false},
		{"drpcli hash", drp, "r0cketsk8ts", true},
		{"drpcli hash, wrong password", drp, "r0cketsk8tz", false},
		{"password over the cap", string(cheap), strings.Repeat("x", MaxPasswordLen+1), false},
		{"N absurd (1 GiB)", "1048576$8$1$" + salt16 + "$" + key32, "r0cketsk8ts", false},
		{"N too large", "2097152$1$1$" + salt16 + "$" + key32, "r0cketsk8ts", false},
		{"N too small", "2$8$1$" + salt16 + "$" + key32, "r0cketsk8ts", false},
		{"N not a power of two", "16000$8$1$" + salt16 + "$" + key32, "r0cketsk8ts", false},
		{"r zero", "16384$0$1$" + salt16 + "$" + key32, "r0cketsk8ts", false},
		{"p absurd", "16384$8$1000$" + salt16 + "$" + key32, "r0cketsk8ts", false},
		{"work too high", "65536$8$16$" + salt16 + "$" + key32, "r0cketsk8ts", false},
		{"signed number", "+16384$8$1$" + salt16 + "$" + key32, "r0cketsk8ts", false},
		{"salt too short", "16384$8$1$0001$" + key32, "r0cketsk8ts", false},
		{"salt not hex", "16384$8$1$zz0102030405060708090a0b0c0d0e0f$" + key32, "r0cketsk8ts", false},
		{"key too short", "16384$8$1$" + salt16 + "$f0ae", "r0cketsk8ts", false},
		{"four fields", "16384$8$1$" + salt16, "r0cketsk8ts", false},
		{"empty", "", "r0cketsk8ts", false},
		{"bcrypt", "$2a$10$N9qo8uLOickgx2ZMRZoMyeIjZAgcfl7p92ldGxad68LJZdL17lhWy", "r0cketsk8ts", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			if got := CheckPassword([]byte(tt.hash), tt.pw); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
			// Refused parameters must be refused before scrypt runs.
			if !tt.want && strings.HasPrefix(tt.hash, "1048576") && time.Since(start) > time.Second {
				t.Errorf("absurd parameters took %s", time.Since(start))
			}
		})
	}
}

func TestHashPasswordInput(t *testing.T) {
	tests := []struct {
		name string
		pw   string
		code string
	}{
		{"empty", "", backend.EBADREQUEST},
		{"over the cap", strings.Repeat("p", MaxPasswordLen+1), backend.EBADREQUEST},
		{"at the cap", strings.Repeat("p", MaxPasswordLen), ""},
		{"NUL byte", "pw\x00", backend.EBADREQUEST},
		{"unicode", "pässwörd ✓", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := hashPassword(tt.pw, testParams)
			if got := backend.ErrorCode(err); got != tt.code {
				t.Fatalf("got code %q (%v), want %q", got, err, tt.code)
			}
			if err == nil && !CheckPassword(h, tt.pw) {
				t.Error("hash does not check")
			}
		})
	}
}

func TestValidatePasswordHash(t *testing.T) {
	good, err := hashPassword("x", testParams)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		hash string
		code string
	}{
		{"own", string(good), ""},
		{"drpcli", "16384$8$1$000102030405060708090a0b0c0d0e0f$f0aec9179db7b604da6c948ca27734a766758fdadd968f5736f44ab9c0423a7b", ""},
		{"garbage", "not a hash", backend.EINVALID},
		{"absurd N", "1073741824$8$1$000102030405060708090a0b0c0d0e0f$f0aec9179db7b604da6c948ca27734a766758fdadd968f5736f44ab9c0423a7b", backend.EINVALID},
		{"too long", strings.Repeat("1", maxHashBytes+1), backend.EINVALID},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := backend.ErrorCode(ValidatePasswordHash([]byte(tt.hash))); got != tt.code {
				t.Errorf("got code %q, want %q", got, tt.code)
			}
		})
	}
}

func TestNewSecret(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		s := NewSecret()
		if len(s) < 16 {
			t.Fatalf("got secret %q of %d chars, want at least 16", s, len(s))
		}
		if seen[s] {
			t.Fatalf("secret %q repeated", s)
		}
		seen[s] = true
	}
}

// TestDefaultScryptConcurrency: one slot of ScryptMemory (32 MiB of a
// default hash) by default, however many cores the runtime sees; an
// explicit ScryptConcurrency wins.
func TestDefaultScryptConcurrency(t *testing.T) {
	if got := defaultScryptConcurrency(); got != 1 {
		t.Errorf("defaultScryptConcurrency() = %d, want 1", got)
	}
	prev := runtime.GOMAXPROCS(16)
	defer runtime.GOMAXPROCS(prev)
	if got := cap(New(newFakeSecrets(), Options{}).scrypt); got != 1 {
		t.Errorf("GOMAXPROCS=16: %d scrypt slots, want 1", got)
	}
	if got := cap(New(newFakeSecrets(), Options{ScryptConcurrency: 3}).scrypt); got != 3 {
		t.Errorf("ScryptConcurrency 3: %d scrypt slots, want 3", got)
	}
}
