package render

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/provgate/provgate/backend"
)

// JobObjects is what job actions are rendered from: jobs, machines and
// tasks; the object service's object part implements it.
type JobObjects interface {
	Get(ctx context.Context, prefix, key string) (backend.Model, int64, error)
}

// MachineParams gives the params templates see; the object service's
// params part implements it.
type MachineParams interface {
	// Aggregate returns a machine's effective params; decode opens Secure
	// values.
	Aggregate(ctx context.Context, m *backend.Machine, decode bool) (map[string]json.RawMessage, error)
}

// JobActions renders the task templates of jobs for the agent that runs
// them (GET /jobs/<id>/actions; docs/design.md §10.4).
type JobActions struct {
	o      JobObjects
	params MachineParams
	tokens TokenMinter
	info   func() Info
}

// NewJobActions returns the job action renderer; params are the machines'
// params, tokens mints the machine tokens templates ask for, info describes
// the server's endpoint.
func NewJobActions(o JobObjects, params MachineParams, tokens TokenMinter, info func() Info) *JobActions {
	return &JobActions{o: o, params: params, tokens: tokens, info: info}
}

// JobActions renders job key's task templates for the agent's OS goos (""
// for every template): one action per template, in the task's order. A
// job whose task is not a task (a "stage:", "bootenv:" or "action:" entry)
// has none.
func (j *JobActions) JobActions(ctx context.Context, key, goos string) ([]backend.JobAction, error) {
	jm, _, err := j.o.Get(ctx, backend.PrefixJobs, key)
	if err != nil {
		return nil, err
	}
	job := jm.(*backend.Job)
	mm, _, err := j.o.Get(ctx, backend.PrefixMachines, job.Machine)
	if err != nil {
		return nil, err
	}
	m := mm.(*backend.Machine)
	out := []backend.JobAction{}
	if strings.Contains(job.Task, ":") {
		return out, nil
	}
	tm, _, err := j.o.Get(ctx, backend.PrefixTasks, job.Task)
	if err != nil {
		return nil, err
	}
	task := tm.(*backend.Task)
	decode, tokens, err := callerRights(ctx, m.Uuid)
	if err != nil {
		return nil, err
	}
	raw, err := j.params.Aggregate(ctx, m, decode)
	if err != nil {
		return nil, err
	}
	agg, err := backend.DecodeParams(raw)
	if err != nil {
		return nil, err
	}
	env := Env{
		Machine: m,
		Params: func(_ context.Context, name string) (any, bool, error) {
			v, ok := agg[name]
			return v, ok, nil
		},
		Info:   j.info(),
		Tokens: j.tokens,
	}
	if !tokens {
		env.Tokens = maskedTokens{}
	}
	for _, t := range task.Templates {
		if os := t.Meta["OS"]; os != "" && goos != "" && !strings.EqualFold(os, goos) {
			continue
		}
		text, err := Render(ctx, Task, t.Name, t.Contents, env, Limits{})
		if err != nil {
			return nil, backend.OpError(backend.ECONFLICT, backend.ReadOp, backend.PrefixJobs, key, "template "+t.Name+": "+err.Error())
		}
		meta := t.Meta
		if meta == nil {
			meta = map[string]string{}
		}
		out = append(out, backend.JobAction{Name: t.Name, Path: t.Path, Content: text, Meta: meta})
	}
	return out, nil
}

// callerRights says what the caller of a job's actions may see rendered
// (docs/design.md §10.4): secure values decoded only with machines
// getSecure on the machine (its own tokens hold it), machine tokens only
// for the machine itself or a caller holding everything its operations
// token holds (a token is that authority, handed out). Server-internal
// work (backend.WithSystem) sees both; a ctx declaring neither is refused
// (docs/design.md §2.3).
func callerRights(ctx context.Context, machine string) (decode, tokens bool, err error) {
	if decode, err = backend.Can(ctx, backend.Claim{Scope: "machines", Action: "getSecure", Specific: machine}); err != nil {
		return false, false, err
	}
	missing, err := backend.Ungranted(ctx, backend.Grant{Claims: backend.OperationsClaims(machine),
		Subject: &backend.Subject{Kind: "machine", Name: machine}})
	switch {
	case backend.IsCode(err, backend.EFORBIDDEN):
		return decode, false, nil
	case err != nil:
		return false, false, err
	}
	return decode, len(missing) == 0, nil
}

// maskedTokens stands in for the token minter when the caller may not
// receive the machine's tokens: .GenerateToken and .GenerateInfiniteToken
// render empty, as for a machine that has none.
type maskedTokens struct{}

func (maskedTokens) GenerateToken(context.Context, *backend.Machine) (string, error) { return "", nil }

func (maskedTokens) GenerateInfiniteToken(context.Context, *backend.Machine) (string, error) {
	return "", nil
}
