package auth

import (
	"context"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"slices"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/provgate/provgate/backend"
)

const (
	tokenIssuer = "provgate"
	// hkdfSalt separates our token keys from any other use of the base key.
	hkdfSalt = "provgate token mac v1"
	// minBaseKey is the least base key length we sign with: HS256 keys
	// shorter than the hash output weaken the MAC.
	minBaseKey = 32
)

// tokenClaims is the token payload. It holds names and flags only: no
// Secret, hash or password ever appears in it, because the Secrets enter
// the token only through the MAC key.
type tokenClaims struct {
	Kind    Kind   `json:"kind"`
	Grantor string `json:"grantor"`
	// Roles absent means all of the user's roles, resolved at request time;
	// present (even empty) restricts the token to exactly those.
	Roles        *[]string        `json:"roles,omitempty"`
	Restrict     []backend.Claim  `json:"restrict,omitempty"`
	MachineToken MachineTokenKind `json:"machine_token,omitempty"`
	// Job and Claims make a machine operations token a job token.
	Job    string          `json:"job,omitempty"`
	Claims []backend.Claim `json:"claims,omitempty"`
	jwt.RegisteredClaims
}

// kindJob separates the MAC keys of job tokens from those of machine
// tokens.
const kindJob = "job"

// keyInputs are the secrets a token's MAC key depends on.
type keyInputs struct {
	kind                           Kind
	system, user, grantor, machine string
}

// deriveKey makes the per-token MAC key: HKDF-SHA256 keyed by the base key,
// with the current secrets length-prefixed in the info, so changing any of
// them yields an unrelated key and every token bound to it stops verifying.
// Length prefixes keep ("ab","c") and ("a","bc") apart.
func deriveKey(base []byte, in keyInputs) ([]byte, error) {
	if len(base) < minBaseKey {
		return nil, errors.New("token base key shorter than 32 bytes")
	}
	info := make([]byte, 0, 64+len(in.system)+len(in.user)+len(in.grantor)+len(in.machine))
	for _, s := range []string{string(in.kind), in.system, in.user, in.grantor, in.machine} {
		info = binary.BigEndian.AppendUint32(info, uint32(len(s)))
		info = append(info, s...)
	}
	return hkdf.Key(sha256.New, base, []byte(hkdfSalt), string(info), sha256.Size)
}

// systemKeyInputs loads the base key and system secret every token needs.
func (a *Authenticator) systemKeyInputs(ctx context.Context) ([]byte, string, error) {
	base, err := a.secrets.BaseKey(ctx)
	if err != nil {
		return nil, "", err
	}
	sys, err := a.secrets.SystemSecret(ctx)
	if err != nil {
		return nil, "", err
	}
	if sys == "" {
		return nil, "", errors.New("system secret is empty")
	}
	return base, sys, nil
}

func (a *Authenticator) sign(base []byte, in keyInputs, c *tokenClaims) (string, error) {
	key, err := deriveKey(base, in)
	if err != nil {
		return "", internal(err)
	}
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(key)
	if err != nil {
		return "", internal(err)
	}
	return s, nil
}

func (a *Authenticator) registered(sub string, ttl time.Duration) (jwt.RegisteredClaims, time.Time) {
	now := a.now()
	exp := jwt.NewNumericDate(now.Add(ttl))
	return jwt.RegisteredClaims{
		Issuer:    tokenIssuer,
		Subject:   sub,
		IssuedAt:  jwt.NewNumericDate(now),
		ExpiresAt: exp,
		ID:        rand.Text(),
	}, exp.Time
}

// IssueUserToken mints a token for user on behalf of grantor, the user
// principal that asked (Basic or Bearer). ttl 0 means the default; above
// MaxTTL is EBADREQUEST. roles nil means all the user's roles at request
// time; non-nil restricts the token to those names (the caller applies docs/design.md §5.6
// first). restrict adds narrowing claims.
//
// A token never exceeds a restricted grantor, whatever the caller passes:
//   - restrict: see narrowRestrict;
//   - roles, when the grantor is a role-restricted token of the same user:
//     nil inherits grantor.TokenRoles and a list keeps only names among
//     grantor.TokenRoles, so a narrowed token cannot refresh itself into a
//     wider one. (A different user's token carries that user's rights, as
//     in DRP; the grantor needed the users token claim for it.)
//
// The roles a token names only ever narrow the user's current roles: at
// each request both must hold a claim (see Principal).
//
// The new token is bound to the user's and the grantor's Secrets; its expiry
// is not capped by the grantor's, because DRP clients refresh a token with
// itself (docs/design.md §8.3) and would otherwise be unable to keep a session.
func (a *Authenticator) IssueUserToken(ctx context.Context, user UserRecord, grantor *Principal, ttl time.Duration, roles []string, restrict []backend.Claim) (string, time.Time, error) {
	switch {
	case ttl < 0:
		return "", time.Time{}, backend.Errorf(backend.EBADREQUEST, "ttl must be positive")
	case ttl == 0:
		ttl = a.defTTL
	case ttl > a.maxTTL:
		return "", time.Time{}, backend.Errorf(backend.EBADREQUEST, "ttl %s exceeds the maximum of %s", ttl, a.maxTTL)
	}
	if user.Name == "" || user.Secret == "" {
		return "", time.Time{}, internal(errors.New("user record without name or secret"))
	}
	if grantor == nil || grantor.Kind != KindUser || grantor.Name == "" {
		return "", time.Time{}, &backend.Error{Code: backend.EFORBIDDEN, Type: "AUTH", Messages: []string{"only users can grant user tokens"}}
	}
	grantorSecret := user.Secret
	if grantor.Name != user.Name {
		g, err := a.grantorSecret(ctx, grantor.Name)
		if err != nil {
			return "", time.Time{}, err
		}
		grantorSecret = g
	}
	base, sys, err := a.systemKeyInputs(ctx)
	if err != nil {
		return "", time.Time{}, internal(err)
	}

	restrict = a.narrowRestrict(grantor.Restrict, restrict)
	roles = TokenRolesFrom(grantor, user.Name, roles)
	c := &tokenClaims{Kind: KindUser, Grantor: grantor.Name, Restrict: slices.Clone(restrict)}
	if roles != nil {
		r := slices.Clone(roles)
		c.Roles = &r
	}
	var exp time.Time
	c.RegisteredClaims, exp = a.registered(user.Name, ttl)
	tok, err := a.sign(base, keyInputs{kind: KindUser, system: sys, user: user.Secret, grantor: grantorSecret}, c)
	if err != nil {
		return "", time.Time{}, err
	}
	return tok, exp, nil
}

// TokenRolesFrom is the role list a user token carries when roles (nil: no
// roles= asked, or the policy's answer to it) are asked by grantor: a token
// restricted to roles that refreshes itself passes its restriction on, and
// asks for no role outside it (docs/design.md §5.6). Nil means the token is
// not restricted to roles.
func TokenRolesFrom(grantor *Principal, user string, roles []string) []string {
	if grantor == nil || !grantor.RoleRestricted || grantor.Name != user {
		return roles
	}
	if roles == nil {
		roles = grantor.TokenRoles
	} else {
		roles = slices.DeleteFunc(slices.Clone(roles), func(r string) bool { return !slices.Contains(grantor.TokenRoles, r) })
	}
	if roles == nil {
		roles = []string{}
	}
	return roles
}

// IssueMachineToken mints a machine token of kind MachineDiscovery or
// MachineOperations; callers choose ttl (which must be positive, with no
// MaxTTL: the infinite machine token lives three years). uuid "" mints a
// discovery token for a machine not known yet (subject UnknownMachine),
// which depends on the system Secret alone; a known machine's token also
// dies when the machine's Secret changes. An unknown uuid is ENOTFOUND.
func (a *Authenticator) IssueMachineToken(ctx context.Context, uuid string, kind MachineTokenKind, ttl time.Duration) (string, time.Time, error) {
	if ttl <= 0 {
		return "", time.Time{}, backend.Errorf(backend.EBADREQUEST, "ttl must be positive")
	}
	if kind != MachineDiscovery && kind != MachineOperations {
		return "", time.Time{}, backend.Errorf(backend.EBADREQUEST, "machine token kind must be %s or %s", MachineDiscovery, MachineOperations)
	}
	if uuid == UnknownMachine {
		return "", time.Time{}, backend.Errorf(backend.EBADREQUEST, "machine uuid %q is reserved", UnknownMachine)
	}
	sub, machineSecret := UnknownMachine, ""
	if uuid == "" {
		if kind != MachineDiscovery {
			return "", time.Time{}, backend.Errorf(backend.EBADREQUEST, "only discovery tokens can be minted for unknown machines")
		}
	} else {
		s, err := a.mintingMachineSecret(ctx, uuid)
		if err != nil {
			return "", time.Time{}, err
		}
		sub, machineSecret = uuid, s
	}
	base, sys, err := a.systemKeyInputs(ctx)
	if err != nil {
		return "", time.Time{}, internal(err)
	}
	c := &tokenClaims{Kind: KindMachine, Grantor: SystemGrantor, MachineToken: kind}
	var exp time.Time
	c.RegisteredClaims, exp = a.registered(sub, ttl)
	tok, err := a.sign(base, keyInputs{kind: KindMachine, system: sys, machine: machineSecret}, c)
	if err != nil {
		return "", time.Time{}, err
	}
	return tok, exp, nil
}

// grantorSecret is the Secret of the user granting a token: a grantor
// deleted while its request was in flight makes the token invalid, a
// failed read or a grantor without a Secret is an internal error.
func (a *Authenticator) grantorSecret(ctx context.Context, name string) (string, error) {
	g, err := a.secrets.User(ctx, name)
	switch {
	case backend.IsCode(err, backend.ENOTFOUND):
		return "", tokenInvalid()
	case err != nil:
		return "", internal(err)
	case g.Secret == "":
		return "", internal(errors.New("grantor without secret"))
	}
	return g.Secret, nil
}

// mintingMachineSecret is the Secret a token for machine uuid is keyed
// with: a missing machine is its not-found error, a failed read or a
// machine without a Secret an internal error.
func (a *Authenticator) mintingMachineSecret(ctx context.Context, uuid string) (string, error) {
	s, err := a.secrets.MachineSecret(ctx, uuid)
	switch {
	case backend.IsCode(err, backend.ENOTFOUND):
		return "", err
	case err != nil:
		return "", internal(err)
	case s == "":
		return "", internal(errors.New("machine without secret"))
	}
	return s, nil
}

// narrowRestrict returns the restriction of a token asked for with want by a
// grantor restricted by have. The result never allows more than have: with
// ClaimContains it keeps the wanted claims that some claim of have contains
// (a conservative intersection); when nothing is left, or without
// ClaimContains, it is have itself. An empty result would mean unrestricted,
// so it is never produced from a non-empty have.
func (a *Authenticator) narrowRestrict(have, want []backend.Claim) []backend.Claim {
	if len(have) == 0 {
		return want
	}
	if a.contains == nil || len(want) == 0 {
		return have
	}
	var kept []backend.Claim
	for _, w := range want {
		if slices.ContainsFunc(have, func(h backend.Claim) bool { return a.contains(h, w) }) {
			kept = append(kept, w)
		}
	}
	if len(kept) == 0 {
		return have
	}
	return kept
}

// maxTokenLen: our tokens are far shorter; a longer one is not ours.
const maxTokenLen = 4 << 10

// verifyState carries what the key function learned to the caller.
type verifyState struct {
	user     UserRecord
	internal error
}

// bearer verifies a token. It reads the unverified claims only to decide
// whose Secrets to load, derives the key from them and lets the JWT library
// check the MAC (HS256 only) and the registered claims. Every client-caused
// failure gives the same 403; store failures give 500.
func (a *Authenticator) bearer(ctx context.Context, tok string) (*Principal, error) {
	if len(tok) > maxTokenLen {
		return nil, tokenInvalid()
	}
	var st verifyState
	var c tokenClaims
	_, err := a.parser.ParseWithClaims(tok, &c, func(t *jwt.Token) (any, error) {
		return a.tokenKey(ctx, &c, &st)
	})
	if st.internal != nil {
		return nil, internal(st.internal)
	}
	if err != nil {
		return nil, tokenInvalid()
	}
	p := &Principal{
		Kind:         c.Kind,
		Name:         c.Subject,
		Grantor:      c.Grantor,
		Restrict:     c.Restrict,
		MachineToken: c.MachineToken,
		Method:       MethodBearer,
		ExpiresAt:    c.ExpiresAt.Time,
		TokenID:      c.ID,
		Job:          c.Job,
		Claims:       c.Claims,
	}
	if c.IssuedAt != nil {
		p.IssuedAt = c.IssuedAt.Time
	}
	if c.Kind == KindMachine {
		p.Method = MethodMachine
	}
	if c.Kind == KindUser {
		p.Roles = slices.Clone(st.user.Roles)
		if c.Roles != nil {
			p.RoleRestricted = true
			p.TokenRoles = slices.Clone(*c.Roles)
			if p.TokenRoles == nil {
				p.TokenRoles = []string{}
			}
		}
	}
	return p, nil
}

var errRejected = errors.New("token rejected")

// tokenKey checks the shape and expiry of the unverified claims before any
// lookup (so junk and expired tokens cost no store work), then loads the
// current secrets and derives the key. A missing user, grantor or machine
// rejects the token like any other mismatch.
func (a *Authenticator) tokenKey(ctx context.Context, c *tokenClaims, st *verifyState) (any, error) {
	if c.ExpiresAt == nil || !a.now().Before(c.ExpiresAt.Time) || c.Subject == "" {
		return nil, errRejected
	}
	in := keyInputs{kind: c.Kind}
	switch c.Kind {
	case KindUser:
		if c.Grantor == "" || c.MachineToken != "" || c.Job != "" || len(c.Claims) > 0 {
			return nil, errRejected
		}
		u, err := a.lookupUser(ctx, c.Subject, st)
		if err != nil {
			return nil, err
		}
		st.user, in.user, in.grantor = u, u.Secret, u.Secret
		if c.Grantor != c.Subject {
			g, err := a.lookupUser(ctx, c.Grantor, st)
			if err != nil {
				return nil, err
			}
			in.grantor = g.Secret
		}
	case KindMachine:
		if c.Roles != nil || len(c.Restrict) > 0 {
			return nil, errRejected
		}
		if c.Job != "" {
			if err := a.jobKey(ctx, c, st, &in); err != nil {
				return nil, err
			}
			break
		}
		if c.Grantor != SystemGrantor || len(c.Claims) > 0 {
			return nil, errRejected
		}
		switch {
		case c.Subject == UnknownMachine && c.MachineToken == MachineDiscovery:
		case c.Subject != UnknownMachine && (c.MachineToken == MachineDiscovery || c.MachineToken == MachineOperations):
			s, err := a.secrets.MachineSecret(ctx, c.Subject)
			if err != nil {
				return nil, a.lookupFailed(err, st)
			}
			if s == "" {
				return nil, errRejected
			}
			in.machine = s
		default:
			return nil, errRejected
		}
	default:
		return nil, errRejected
	}
	base, sys, err := a.systemKeyInputs(ctx)
	if err != nil {
		st.internal = err
		return nil, err
	}
	in.system = sys
	key, err := deriveKey(base, in)
	if err != nil {
		st.internal = err
		return nil, err
	}
	return key, nil
}

func (a *Authenticator) lookupUser(ctx context.Context, name string, st *verifyState) (UserRecord, error) {
	u, err := a.secrets.User(ctx, name)
	if err != nil {
		return u, a.lookupFailed(err, st)
	}
	if u.Secret == "" {
		return u, errRejected
	}
	return u, nil
}

// lookupFailed: ENOTFOUND rejects the token; anything else is the server's
// failure, recorded so bearer reports 500 instead of 403.
func (a *Authenticator) lookupFailed(err error, st *verifyState) error {
	if backend.IsCode(err, backend.ENOTFOUND) {
		return errRejected
	}
	st.internal = err
	return err
}
