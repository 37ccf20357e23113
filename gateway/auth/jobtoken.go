package auth

import (
	"context"
	"slices"
	"time"

	"github.com/provgate/provgate/backend"
)

// IssueJobToken mints the token of a job (docs/design.md §8.7), which the
// agent hands to the job's task scripts as RS_TOKEN: a machine operations
// token of the job's machine that also holds the task's extra claims, and
// that stops verifying as soon as the job leaves the created and running
// states, or when the machine's or the system Secret changes.
//
// It is never wider than its creator allows. The creator is the principal
// that asked for the job: the machine's own operations token (or one of its
// job tokens), whose workflow an operator gave it, or a user the caller
// found to hold every claim the token would carry. A user grants the token
// (it also dies with the user's Secret); a machine's tokens pass on their
// grantor. The token never outlives its creator's token. Any other
// creator is EFORBIDDEN.
func (a *Authenticator) IssueJobToken(ctx context.Context, creator *Principal, machine, job string, extra []backend.Claim, ttl time.Duration) (string, time.Time, error) {
	if creator == nil || machine == "" || machine == UnknownMachine || job == "" {
		return "", time.Time{}, errNoJobToken()
	}
	grantor := ""
	switch creator.Kind {
	case KindMachine:
		if creator.MachineToken != MachineOperations || creator.Name != machine {
			return "", time.Time{}, errNoJobToken()
		}
		grantor = creator.Grantor
	case KindUser:
		if creator.Name == "" {
			return "", time.Time{}, errNoJobToken()
		}
		grantor = creator.Name
	default:
		return "", time.Time{}, errNoJobToken()
	}
	if ttl <= 0 {
		return "", time.Time{}, backend.Errorf(backend.EBADREQUEST, "ttl must be positive")
	}
	if !creator.ExpiresAt.IsZero() {
		if left := creator.ExpiresAt.Sub(a.now()); left < ttl {
			ttl = left
		}
		if ttl <= 0 {
			return "", time.Time{}, tokenInvalid()
		}
	}
	in := keyInputs{kind: kindJob}
	ms, err := a.mintingMachineSecret(ctx, machine)
	if err != nil {
		return "", time.Time{}, err
	}
	in.machine = ms
	if grantor != SystemGrantor {
		g, err := a.grantorSecret(ctx, grantor)
		if err != nil {
			return "", time.Time{}, err
		}
		in.grantor = g
	}
	base, sys, err := a.systemKeyInputs(ctx)
	if err != nil {
		return "", time.Time{}, internal(err)
	}
	in.system = sys
	c := &tokenClaims{Kind: KindMachine, Grantor: grantor, MachineToken: MachineOperations, Job: job,
		Claims: slices.Clone(extra)}
	var exp time.Time
	c.RegisteredClaims, exp = a.registered(machine, ttl)
	tok, err := a.sign(base, in, c)
	if err != nil {
		return "", time.Time{}, err
	}
	return tok, exp, nil
}

func errNoJobToken() error {
	return &backend.Error{Code: backend.EFORBIDDEN, Type: "AUTH", Messages: []string{"no job token for this caller"}}
}

// jobKey fills the key inputs of a job token after checking that its job
// still runs on its machine: a job token ends with its job.
func (a *Authenticator) jobKey(ctx context.Context, c *tokenClaims, st *verifyState, in *keyInputs) error {
	if c.MachineToken != MachineOperations || c.Subject == UnknownMachine || c.Grantor == "" {
		return errRejected
	}
	js, ok := a.secrets.(JobStates)
	if !ok {
		return errRejected
	}
	machine, state, err := js.JobState(ctx, c.Job)
	if err != nil {
		return a.lookupFailed(err, st)
	}
	if machine != c.Subject || (state != backend.JobCreated && state != backend.JobRunning) {
		return errRejected
	}
	s, err := a.secrets.MachineSecret(ctx, c.Subject)
	if err != nil {
		return a.lookupFailed(err, st)
	}
	if s == "" {
		return errRejected
	}
	in.kind, in.machine = kindJob, s
	if c.Grantor != SystemGrantor {
		g, err := a.lookupUser(ctx, c.Grantor, st)
		if err != nil {
			return err
		}
		in.grantor = g.Secret
	}
	return nil
}

// JobTokenClaims are the claims a user must hold for a job token it asks
// for to be no wider than itself: the operations set on the machine (its
// update claims taken whole, backend.OperationsClaims) and the task's extra
// claims.
func JobTokenClaims(machine string, extra []backend.Claim) []backend.Claim {
	return append(backend.OperationsClaims(machine), extra...)
}
