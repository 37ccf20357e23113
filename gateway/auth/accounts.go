package auth

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/provgate/provgate/backend"
)

// TokenRequest is the query of GET /users/<name>/token (docs/design.md §8.5).
type TokenRequest struct {
	TTL      string
	Roles    []string // nil: all the user's roles
	Scope    string
	Action   string
	Specific string
}

// RoleNarrower keeps the requested roles that do not widen the user's
// roles (docs/design.md §5.6); the policy engine implements it.
type RoleNarrower interface {
	TokenRoles(ctx context.Context, userRoles, requested []string) ([]string, error)
}

// UserWriter changes the credentials of stored users; the object service
// implements it, so every user write goes through it.
type UserWriter interface {
	SetPassword(ctx context.Context, name, password string) (*backend.User, error)
	RotateSecret(ctx context.Context, name string) error
	// MayTakeOver refuses (403) a caller that may not take over user name:
	// it must be name, hold what name holds, or impersonate it
	// (docs/design.md §5.9).
	MayTakeOver(ctx context.Context, name string) error
}

// AccountSecrets is what Accounts reads and rotates; SecretCache
// implements it.
type AccountSecrets interface {
	User(ctx context.Context, name string) (UserRecord, error)
	RotateSystemSecret(ctx context.Context) error
}

// Accounts serves the user routes beyond CRUD: tokens, passwords and
// Secrets.
type Accounts struct {
	authn   *Authenticator
	secrets AccountSecrets
	roles   RoleNarrower
	users   UserWriter
	changed func(ctx context.Context) error
}

// NewAccounts returns the account routes over authn and secrets. changed
// runs after a Secret rotation, to drop every cached copy of the old
// Secret (users, verified tokens) before the rotation is reported done.
func NewAccounts(authn *Authenticator, secrets AccountSecrets, roles RoleNarrower, users UserWriter, changed func(ctx context.Context) error) *Accounts {
	return &Accounts{authn: authn, secrets: secrets, roles: roles, users: users, changed: changed}
}

// Token issues a token for user name, granted by grantor (docs/design.md
// §8.5, §5.6): roles= keeps only the requested roles that do not widen the
// user's (the others are dropped silently), and scope, action and specific
// restrict the token to one claim ("*" for each one left out).
func (a *Accounts) Token(ctx context.Context, name string, grantor *Principal, req TokenRequest) (IssuedToken, error) {
	rec, err := a.secrets.User(ctx, name)
	if err != nil {
		if backend.IsCode(err, backend.ENOTFOUND) {
			return IssuedToken{}, backend.NotFound(backend.ReadOp, "users", name)
		}
		return IssuedToken{}, err
	}
	if grantor == nil || grantor.Name != name || !grantor.IsUser() {
		// A token for another user hands out that user's authority.
		if err := a.users.MayTakeOver(ctx, name); err != nil {
			return IssuedToken{}, err
		}
	}
	ttl, err := a.authn.ParseTTL(req.TTL)
	if err != nil {
		return IssuedToken{}, backend.OpError(backend.EBADREQUEST, backend.ReadOp, "users", name, backend.AsError(err).Messages...)
	}
	var roles []string
	if req.Roles != nil {
		if roles, err = a.roles.TokenRoles(ctx, rec.Roles, req.Roles); err != nil {
			return IssuedToken{}, err
		}
		if roles == nil {
			roles = []string{}
		}
	}
	tok, _, err := a.authn.IssueUserToken(ctx, rec, grantor, ttl, roles, req.restriction())
	if err != nil {
		return IssuedToken{}, err
	}
	out := IssuedToken{Token: tok, Roles: TokenRolesFrom(grantor, rec.Name, roles)}
	if req.Roles != nil {
		out.Dropped = []string{}
		for _, r := range req.Roles {
			if !slices.Contains(out.Roles, r) && !slices.Contains(out.Dropped, r) {
				out.Dropped = append(out.Dropped, r)
			}
		}
	}
	return out, nil
}

// IssuedToken is a minted user token and what it carries of the request
// (docs/design.md §8.5).
type IssuedToken struct {
	Token string
	// Roles are the roles the token is restricted to: those of roles= kept,
	// or those of a restricted token refreshing itself; nil when the token
	// carries the user's roles as they change.
	Roles []string
	// Dropped are the roles roles= asked for that the token does not
	// carry (missing, wider than any one of the user's roles, or outside
	// the asking token's own restriction); nil when roles= was not given.
	Dropped []string
}

// restriction is the claim a token request narrows the token to, if any.
func (req TokenRequest) restriction() []backend.Claim {
	if req.Scope == "" && req.Action == "" && req.Specific == "" {
		return nil
	}
	c := backend.Claim{Scope: req.Scope, Action: req.Action, Specific: req.Specific}
	for _, f := range []*string{&c.Scope, &c.Action, &c.Specific} {
		if *f == "" {
			*f = "*"
		}
	}
	return []backend.Claim{c}
}

// ChangePassword sets a user's password (and with it a new Secret).
func (a *Accounts) ChangePassword(ctx context.Context, name, password string) (backend.Model, error) {
	return a.users.SetPassword(ctx, name, password)
}

// RotateSecret gives user name a new Secret, which kills its tokens.
func (a *Accounts) RotateSecret(ctx context.Context, name string) error {
	if err := a.users.RotateSecret(ctx, name); err != nil {
		return err
	}
	return a.changed(ctx)
}

// RotateSystemSecret replaces the system Secret, which kills every token.
func (a *Accounts) RotateSystemSecret(ctx context.Context) error {
	if err := a.secrets.RotateSystemSecret(ctx); err != nil {
		return err
	}
	return a.changed(ctx)
}

// MachineTokenTTLs are the lifetimes of the machine tokens templates mint
// (the knownTokenTimeout and unknownTokenTimeout preferences).
type MachineTokenTTLs interface {
	KnownTokenTTL(ctx context.Context) time.Duration
	UnknownTokenTTL(ctx context.Context) time.Duration
}

// infiniteMachineTokenTTL is the lifetime of GenerateInfiniteToken's
// tokens: three years, as DRP.
const infiniteMachineTokenTTL = 3 * 52 * 7 * 24 * time.Hour

// MachineTokens mints machine tokens during template expansion, the only
// way they are made (docs/design.md §8.6). It implements render.Tokens.
type MachineTokens struct {
	authn *Authenticator
	ttls  MachineTokenTTLs
}

// NewMachineTokens returns the template token source over authn.
func NewMachineTokens(authn *Authenticator, ttls MachineTokenTTLs) MachineTokens {
	return MachineTokens{authn: authn, ttls: ttls}
}

// GenerateToken mints an operations token for a known machine, or a
// discovery token when m is not known yet.
func (t MachineTokens) GenerateToken(ctx context.Context, m *backend.Machine) (string, error) {
	if m == nil || m.Uuid == "" {
		tok, _, err := t.authn.IssueMachineToken(ctx, "", MachineDiscovery, t.ttls.UnknownTokenTTL(ctx))
		return tok, err
	}
	tok, _, err := t.authn.IssueMachineToken(ctx, m.Uuid, MachineOperations, t.ttls.KnownTokenTTL(ctx))
	return tok, err
}

// GenerateInfiniteToken mints a long-lived operations token for a known
// machine; none for an unknown one.
func (t MachineTokens) GenerateInfiniteToken(ctx context.Context, m *backend.Machine) (string, error) {
	if m == nil || m.Uuid == "" {
		return "", nil
	}
	tok, _, err := t.authn.IssueMachineToken(ctx, m.Uuid, MachineOperations, infiniteMachineTokenTTL)
	return tok, err
}

// ObjectGetter reads a stored object; the object service implements it.
type ObjectGetter interface {
	Get(ctx context.Context, prefix, key string) (backend.Model, int64, error)
}

// JobTokens mints the token a job creation answers with, which the agent
// gives the job's task scripts (docs/design.md §8.7).
type JobTokens struct {
	authn   *Authenticator
	objects ObjectGetter
	ttls    MachineTokenTTLs
}

// NewJobTokens returns the job token source over authn; objects reads the
// job's task.
func NewJobTokens(authn *Authenticator, objects ObjectGetter, ttls MachineTokenTTLs) *JobTokens {
	return &JobTokens{authn: authn, objects: objects, ttls: ttls}
}

// JobToken returns job's token for creator, carrying the extra claims of
// the job's task as it is now (also set in job.ExtraClaims); "" when
// creator may not have one: a user needs every claim the token would
// carry.
func (t *JobTokens) JobToken(ctx context.Context, job *backend.Job, creator *Principal) (string, error) {
	var extra []backend.Claim
	if !strings.Contains(job.Task, ":") {
		tm, _, err := t.objects.Get(backend.WithSystem(ctx), backend.PrefixTasks, job.Task)
		if err != nil && !backend.IsCode(err, backend.ENOTFOUND) {
			return "", err
		}
		if err == nil {
			extra = tm.(*backend.Task).ExtraClaims
		}
	}
	job.ExtraClaims = extra
	if creator == nil {
		return "", nil
	}
	if creator.IsUser() {
		// The token hands out what it carries: the user must hold all of
		// it, self claims not counted (docs/design.md §5.9, §8.7). Its
		// tenant restricts the token as well (the policy reads the
		// token's grantor).
		missing, err := backend.Ungranted(ctx, backend.Grant{Claims: JobTokenClaims(job.Machine, extra)})
		switch {
		case backend.IsCode(err, backend.EFORBIDDEN):
			return "", nil
		case err != nil || len(missing) > 0:
			return "", err
		}
	}
	// A token without expiry (Basic) gives the job token the known-machine
	// token lifetime; otherwise the creator's token bounds it.
	ttl := t.ttls.KnownTokenTTL(ctx)
	if !creator.ExpiresAt.IsZero() {
		ttl = infiniteMachineTokenTTL
	}
	tok, _, err := t.authn.IssueJobToken(ctx, creator, job.Machine, job.Uuid, extra, ttl)
	if backend.IsCode(err, backend.EFORBIDDEN) {
		return "", nil
	}
	return tok, err
}
