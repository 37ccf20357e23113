package gateway

import (
	"context"
	"encoding/json"
	"sort"

	"github.com/gofiber/fiber/v2"

	"github.com/provgate/provgate/backend"
	accessapi "github.com/provgate/provgate/gateway/access"
	"github.com/provgate/provgate/gateway/auth"
	"github.com/provgate/provgate/policies"
)

// CandidatePolicy is a policy loaded for a diff and not served
// (policies/opa Engine.Candidate): it decides on a copy of the served data.
type CandidatePolicy interface {
	Question(ctx context.Context, in policies.Input) (policies.Decision, error)
	ExplainReplay(ctx context.Context, in policies.Input, r policies.Replay) (policies.Explanation, error)
	Revision() string
	Close() error
}

// Candidates loads a candidate policy from an archive (a .tar.gz of a
// policy directory or an OPA bundle), compiled and tested as a reload would.
type Candidates func(ctx context.Context, archive []byte) (CandidatePolicy, error)

// Bounds of one policy diff: the users whose matrices are compared, and the
// decision-log lines replayed.
const (
	maxDiffUsers  = 200
	maxDiffReplay = 1000
)

func (s *explorer) handlePolicyDiff(c *fiber.Ctx) error {
	var q accessapi.PolicyDiffRequest
	if err := json.Unmarshal(c.Body(), &q); err != nil || len(q.Archive) == 0 {
		return backend.NewError(backend.EBADREQUEST, "POST", "access", "policy/diff", "body must be {\"Archive\": <base64 .tar.gz>, \"Replay\": n}")
	}
	if q.Replay <= 0 {
		q.Replay = 100
	}
	ctx := userContext(c)
	cand, err := s.candidates(ctx, q.Archive)
	if err != nil {
		return err
	}
	defer cand.Close()
	d, err := s.policyDiff(ctx, cand, min(q.Replay, maxDiffReplay))
	if err != nil {
		return err
	}
	return c.JSON(d)
}

// policyDiff compares the served policy with cand: the matrix of every
// user the caller may see (the first maxDiffUsers by name), and the newest
// logged decisions the caller may read, replayed at their logged time.
func (s *explorer) policyDiff(ctx context.Context, cand CandidatePolicy, replay int) (accessapi.PolicyDiff, error) {
	out := accessapi.PolicyDiff{Candidate: cand.Revision(), Users: []accessapi.UserDiff{}, Changed: []accessapi.ReplayDelta{}}
	if r, ok := s.policy.(interface{ Revision() string }); ok {
		out.Revision = r.Revision()
	}
	users, err := s.visibleUsers(ctx)
	if err != nil {
		return out, err
	}
	sort.Slice(users, func(i, j int) bool { return users[i].Name < users[j].Name })
	if len(users) > maxDiffUsers {
		users = users[:maxDiffUsers]
	}
	for _, u := range users {
		p := &auth.Principal{Kind: auth.KindUser, Name: u.Name, Grantor: u.Name, Roles: u.Roles, Method: auth.MethodBasic}
		before, err := s.matrixWith(ctx, s.question, p)
		if err != nil {
			return out, err
		}
		after, err := s.matrixWith(ctx, cand.Question, p)
		if err != nil {
			return out, err
		}
		if ch := cellChanges(before, after); len(ch) > 0 {
			out.Users = append(out.Users, accessapi.UserDiff{User: u.Name, Changes: ch})
		}
	}
	if s.decisionLog == "" {
		return out, nil
	}
	lines, err := accessapi.ReadDecisionLog(s.decisionLog, replay, func(l accessapi.LoggedDecision) bool {
		return len(l.Input.Required) > 0 && s.mayRead(ctx, l)
	})
	if err != nil {
		return out, backend.Errorf(backend.EINTERNAL, "decision log: %v", err)
	}
	out.Replayed = len(lines)
	for _, l := range lines {
		x, err := cand.ExplainReplay(ctx, l.Input, l.Replay())
		if err != nil {
			return out, &backend.Error{Code: backend.EINTERNAL, Messages: []string{"authorization failed"}, Err: err}
		}
		was, now := accessapi.Outcome(l.Result.Allow, l.Result.NotFound), accessapi.Outcome(x.Decision.Allow, x.Decision.NotFound)
		if was != now {
			out.Changed = append(out.Changed, accessapi.ReplayDelta{DecisionID: l.DecisionID, Principal: l.Input.Principal.Name,
				Method: l.Input.Method, Path: l.Input.Path, Logged: was, Candidate: now, Reasons: nonNil(x.Decision.Reasons)})
		}
	}
	return out, nil
}

// cellChanges lists the cells whose access differs between two matrices
// of the same user.
func cellChanges(before, after accessapi.Matrix) []accessapi.CellChange {
	was := map[[2]string]string{}
	for _, sc := range before.Scopes {
		for _, a := range sc.Actions {
			was[[2]string{sc.Scope, a.Action}] = a.Access
		}
	}
	var out []accessapi.CellChange
	for _, sc := range after.Scopes {
		for _, a := range sc.Actions {
			if w := was[[2]string{sc.Scope, a.Action}]; w != a.Access {
				out = append(out, accessapi.CellChange{Scope: sc.Scope, Action: a.Action, Before: w, After: a.Access})
			}
		}
	}
	return out
}
