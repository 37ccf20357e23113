package objects

import (
	"bytes"
	"context"
	"fmt"
	"net"

	"github.com/google/uuid"

	"github.com/provgate/provgate/backend"
)

// kindRules are the rules one kind adds to the common path of a write
// (docs/design.md §4.10). The common path is the same for every kind:
// create, update and delete read, fill, validate, check grants, store and
// queue the event in one transaction; each step asks the kind's rules for
// what is special about it. Every field is optional: a kind without a rule
// for a step has nothing special there.
//
// The steps, in the order a write meets them:
//
//   - defaults fills what the server gives a new object (a create only):
//     keys, secrets, hashed passwords;
//   - beforeWrite runs on an update before validation (internal: the
//     server's own bookkeeping, which no lock stops);
//   - validate checks and normalises the object's own fields, and
//     references checks what it names of other objects (docs/design.md
//     §4.2: hard problems refuse the write, soft ones make it unavailable);
//     keyedMessages starts every message with the object's key, as DRP
//     reports them for these kinds;
//   - params checks, seals and schema-validates the values of a kind with
//     params (the Params part's rule, docs/design.md §3.9);
//   - configured runs last, only on an otherwise valid object, with its
//     params as written (a plugin's provider configuration);
//   - grants names what a valid write hands out, for the caller's Access
//     to decide (docs/design.md §5.9);
//   - afterWrite runs the cross-object effects of an update after the
//     object's own write, in its transaction (docs/design.md §4.5);
//   - secrets keeps the fields no reply shows (a user's password hash and
//     Secret, a machine's Secret) across an update, whose document never
//     held them, and says what a PUT body changes of them (docs/design.md
//     §4.4, §3.8);
//   - deletable refuses a delete for the kind's own reason, inUse lists the
//     references that keep an object from being deleted, afterDelete
//     removes what goes with a deleted object (docs/design.md §4.7).
type kindRules struct {
	defaults      func(m backend.Model, body []byte) error
	beforeWrite   func(op backend.Operation, old, m backend.Model, internal bool) error
	keyedMessages bool
	validate      checkFunc
	references    checkFunc
	params        checkFunc
	configured    func(m backend.Model, c *check)
	grants        func(ctx context.Context, m, old backend.Model) ([]backend.Grant, error)
	afterWrite    func(ctx context.Context, old, m backend.Model) error
	secrets       *secretRules
	deletable     func(m backend.Model) error
	inUse         []reference
	afterDelete   func(ctx context.Context, key string) error
}

// checkFunc checks m before a write; old is the stored version, nil on
// create. Problems go to c; an error aborts the write.
type checkFunc func(ctx context.Context, m, old backend.Model, c *check) error

// typed adapts a check written for one kind's Go type.
func typed[T backend.Model](f func(ctx context.Context, m T, old backend.Model, c *check) error) checkFunc {
	return func(ctx context.Context, m, old backend.Model, c *check) error { return f(ctx, m.(T), old, c) }
}

// secretRules keep a kind's hidden fields (see kindRules.secrets).
type secretRules struct {
	// keep copies old's hidden fields into m, then applies se.
	keep func(old, m backend.Model, se secretEdits)
	// replaced is what a PUT body m changes of old's hidden fields.
	replaced func(old, m backend.Model) secretEdits
}

// reference is one kind of object that can keep another from being
// deleted: objects of prefix whose index names it.
type reference struct {
	prefix, index, label string
}

// newRules is the table of every kind's rules, built once per Service from
// its parts: the object part's checks, the Params part's params rule, the
// Jobs part's job rules and the plugin rules. It is the one place to read
// everything the object service does specially for a kind.
func newRules(o *CRUD, p *Params, j *Jobs, pl *pluginRules) map[string]*kindRules {
	return map[string]*kindRules{
		backend.PrefixUsers: {
			defaults: o.userDefaults,
			secrets:  &secretRules{keep: o.keepUserSecrets, replaced: userSecretsReplaced},
			validate: typed(o.checkUser),
			grants:   typedGrants(func(_ context.Context, u, old *backend.User) ([]backend.Grant, error) { return userGrants(u, old), nil }),
		},
		backend.PrefixRoles: {
			validate: typed(o.checkRole),
			grants:   typedGrants(o.roleClaimGrants),
			inUse:    []reference{{"users", "Roles", "User"}},
		},
		backend.PrefixTenants: {
			validate:  typed(o.checkTenant),
			grants:    typedGrants(o.tenantNotWidened),
			deletable: tenantDeletable,
		},
		backend.PrefixMachines: {
			defaults:      o.machineDefaults,
			beforeWrite:   machineUnlocked,
			keyedMessages: true,
			// A machine's references decide its task list, so they are
			// checked with its own fields (checkMachine, refs.go).
			validate:  typed(o.checkMachine),
			params:    p.prepareParams,
			secrets:   &secretRules{keep: o.keepMachineSecret, replaced: machineSecretReplaced},
			deletable: machineDeletable,
		},
		backend.PrefixProfiles: {
			keyedMessages: true,
			validate:      typed(named(func(p *backend.Profile) string { return p.Name })),
			references:    typed(o.checkProfileRefs),
			params:        p.prepareParams,
			inUse:         []reference{{"machines", "Profiles", "Machine"}, {"profiles", "Profiles", "Profile"}, {"stages", "Profiles", "Stage"}},
		},
		backend.PrefixParams: {
			validate: typed(p.checkParam),
		},
		backend.PrefixBootenvs: {
			validate: typed(checkBootEnv),
			inUse:    []reference{{"machines", "BootEnv", "Machine"}, {"stages", "BootEnv", "Stage"}},
		},
		backend.PrefixWorkflows: {
			keyedMessages: true,
			validate:      typed(named(func(w *backend.Workflow) string { return w.Name })),
			references:    typed(o.checkWorkflowRefs),
			inUse:         []reference{{"machines", "Workflow", "Machine"}},
		},
		backend.PrefixStages: {
			keyedMessages: true,
			validate:      typed(named(func(st *backend.Stage) string { return st.Name })),
			references:    typed(o.checkStageRefs),
			params:        p.prepareParams,
			inUse:         []reference{{"machines", "Stage", "Machine"}, {"workflows", "Stages", "Workflow"}},
		},
		backend.PrefixTasks: {
			validate: typed(o.checkTask),
			grants:   typedGrants(taskGrants),
			inUse:    []reference{{"stages", "Tasks", "Stage"}},
		},
		backend.PrefixJobs: {
			beforeWrite: j.beforeWrite,
			validate:    typed(checkJob),
			afterWrite:  j.afterWrite,
			deletable:   jobDeletable,
			afterDelete: j.deleteLog,
		},
		backend.PrefixPools: {
			validate: typed(o.checkPool),
			inUse:    []reference{{"machines", "Pool", "Machine"}},
		},
		backend.PrefixPlugins: {
			validate:   typed(pl.check),
			params:     p.prepareParams,
			configured: pl.configured,
			grants:     typedGrants(pl.grants),
		},
		backend.PrefixReservations: {
			validate: typed(checkReservation),
		},
	}
}

// typedGrants adapts a grants rule written for one kind's Go type; old is
// nil on create.
func typedGrants[T backend.Model](f func(ctx context.Context, m, old T) ([]backend.Grant, error)) func(context.Context, backend.Model, backend.Model) ([]backend.Grant, error) {
	return func(ctx context.Context, m, old backend.Model) ([]backend.Grant, error) {
		o, _ := old.(T)
		return f(ctx, m.(T), o)
	}
}

// named is the validation of a kind whose only rule of its own is DRP's
// name rule.
func named[T backend.Model](name func(T) string) func(context.Context, T, backend.Model, *check) error {
	return func(_ context.Context, m T, _ backend.Model, c *check) error {
		nameRule(c, name(m), backend.ValidName)
		return nil
	}
}

// rulesOf returns prefix's rules; a kind without any has an empty set.
func (s *core) rulesOf(prefix string) *kindRules {
	if r := s.rules[prefix]; r != nil {
		return r
	}
	return &kindRules{}
}

// Defaults of new objects ----------------------------------------------

// machineDefaults: a new machine gets a Uuid when it has none, a Secret
// when empty, and Runnable true (DRP makes every new machine runnable;
// drpcli always sends false).
func (s *CRUD) machineDefaults(m backend.Model, _ []byte) error {
	v := m.(*backend.Machine)
	if v.Uuid == "" {
		v.Uuid = uuid.NewString()
	}
	if v.Secret == "" {
		v.Secret = s.newSecret()
	}
	v.Runnable = true
	return nil
}

// userDefaults: a new user gets a Secret, and a "Password" member of the
// body (a provgate extension) is hashed into PasswordHash.
func (s *CRUD) userDefaults(m backend.Model, body []byte) error {
	v := m.(*backend.User)
	if err := s.createPassword(v, body); err != nil {
		return err
	}
	if v.Secret == "" {
		v.Secret = s.newSecret()
	}
	return nil
}

// Hidden fields --------------------------------------------------------

func (s *CRUD) keepUserSecrets(old, m backend.Model, se secretEdits) {
	v, o := m.(*backend.User), old.(*backend.User)
	v.PasswordHash, v.Secret = o.PasswordHash, o.Secret
	if se.password != nil {
		v.PasswordHash = se.password
	}
	if se.rotate {
		v.Secret = s.newSecret()
	}
}

// userSecretsReplaced: a PUT body's PasswordHash is taken as is; a new
// Secret value rotates it to a fresh random one.
func userSecretsReplaced(old, m backend.Model) secretEdits {
	var se secretEdits
	v, o := m.(*backend.User), old.(*backend.User)
	if len(v.PasswordHash) > 0 && !bytes.Equal(v.PasswordHash, o.PasswordHash) {
		se.password, se.rotate = v.PasswordHash, true
	}
	if v.Secret != "" && v.Secret != o.Secret {
		se.rotate = true
	}
	return se
}

func (s *CRUD) keepMachineSecret(old, m backend.Model, se secretEdits) {
	v := m.(*backend.Machine)
	v.Secret = old.(*backend.Machine).Secret
	if se.rotate {
		v.Secret = s.newSecret()
	}
}

// machineSecretReplaced: a new Secret value in a PUT body rotates it.
func machineSecretReplaced(old, m backend.Model) secretEdits {
	v := m.(*backend.Machine)
	return secretEdits{rotate: v.Secret != "" && v.Secret != old.(*backend.Machine).Secret}
}

// Rules of single kinds ------------------------------------------------

// machineUnlocked refuses an update that leaves a locked machine locked
// (unlocking is allowed); the job state machine's own bookkeeping still
// happens (docs/design.md §4.5).
func machineUnlocked(op backend.Operation, old, m backend.Model, internal bool) error {
	if om := old.(*backend.Machine); !internal && om.Locked && m.(*backend.Machine).Locked {
		return backend.OpError(backend.ECONFLICT, op, om.Prefix(), om.Key(), "Locked")
	}
	return nil
}

func machineDeletable(m backend.Model) error {
	if m.(*backend.Machine).Locked {
		return backend.OpError(backend.ECONFLICT, backend.DeleteOp, m.Prefix(), m.Key(), "Locked")
	}
	return nil
}

func jobDeletable(m backend.Model) error {
	if v := m.(*backend.Job); v.State != backend.JobFailed && v.State != backend.JobFinished {
		return backend.NewError(backend.EINVALID, "ValidationError", v.Prefix(), v.Key(),
			fmt.Sprintf("Jobs %s is not in a deletable state: %s", v.Key(), v.State))
	}
	return nil
}

func tenantDeletable(m backend.Model) error {
	if v := m.(*backend.Tenant); len(v.Users) > 0 {
		return backend.NewError(backend.ECONFLICT, "StillInUseError", v.Prefix(), v.Key(),
			fmt.Sprintf("Constraining Users: %v", v.Users))
	}
	return nil
}

func (s *CRUD) checkTask(_ context.Context, t *backend.Task, _ backend.Model, c *check) error {
	nameRule(c, t.Name, backend.ValidName)
	// Extra claims go into job tokens (docs/design.md §8.7): they must
	// mean what they say, as a role's claims must.
	checkClaims(s.kinds, t.ExtraClaims, c)
	return nil
}

func checkReservation(_ context.Context, r *backend.Reservation, _ backend.Model, c *check) error {
	if net.ParseIP(r.Addr) == nil {
		c.bad("Invalid Address `%s`", r.Addr)
	}
	if r.Token == "" {
		c.bad("Reservation Token cannot be empty")
	}
	return nil
}

// checkParam validates a param definition: its name, and its Schema
// compiles.
func (s *Params) checkParam(_ context.Context, p *backend.Param, _ backend.Model, c *check) error {
	if !backend.ValidParamName(p.Name) {
		c.bad("Invalid Name `%s`", p.Name)
	}
	if p.Schema != nil {
		if _, err := s.schemas.compile(p.Schema); err != nil {
			c.bad("Invalid Schema: %s", schemaError(err))
		}
	}
	return nil
}
