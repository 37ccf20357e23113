package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/provgate/provgate/backend"
	accessapi "github.com/provgate/provgate/gateway/access"
	"github.com/provgate/provgate/gateway/auth"
	"github.com/provgate/provgate/gateway/claims"
	"github.com/provgate/provgate/policies"
)

// Explainer evaluates a decision together with its trail (policies/opa
// Engine.Explain). A Decider that is not one gives explanations without a
// trail.
type Explainer interface {
	Explain(ctx context.Context, in policies.Input) (policies.Explanation, error)
}

// explainDecision decides in as Decide would and keeps the trail.
func (s *explorer) explainDecision(ctx context.Context, in policies.Input) (policies.Explanation, error) {
	if x, ok := s.policy.(Explainer); ok {
		return x.Explain(ctx, in)
	}
	d, err := s.policy.Decide(ctx, in)
	return policies.Explanation{Decision: d}, err
}

// askerResolver reads stored objects for an explained request as its
// asker may see them: an object the asker may not see is missing, so that
// an explanation never tells a hidden object from a missing one
// (docs/design.md §9.8).
type askerResolver struct{ r claims.Resolver }

func (a askerResolver) visible(ctx context.Context, prefix, key string) error {
	ok, err := backend.CanSee(ctx, prefix, key)
	if err != nil {
		return err
	}
	if !ok {
		return backend.NotFound(backend.RequestOp, prefix, key)
	}
	return nil
}

func (a askerResolver) NativeKey(ctx context.Context, prefix, key string) (string, error) {
	native, err := a.r.NativeKey(ctx, prefix, key)
	if err != nil {
		return "", err
	}
	if err := a.visible(ctx, prefix, native); err != nil {
		return "", backend.NotFound(backend.RequestOp, prefix, key)
	}
	return native, nil
}

func (a askerResolver) JobMachine(ctx context.Context, jobKey string) (string, error) {
	m, err := a.r.JobMachine(ctx, jobKey)
	if err != nil {
		return "", err
	}
	if err := a.visible(ctx, backend.PrefixJobs, jobKey); err != nil {
		return "", err
	}
	if err := a.visible(ctx, "machines", m); err != nil {
		return "", backend.NotFound(backend.RequestOp, backend.PrefixJobs, jobKey)
	}
	return m, nil
}

func (a askerResolver) Current(ctx context.Context, prefix, key string) ([]byte, error) {
	if err := a.visible(ctx, prefix, key); err != nil {
		return nil, err
	}
	return a.r.Current(ctx, prefix, key)
}

// explain answers what request r of principal p would get, without running
// it: the gateway's own authorization of r (authorize), with the
// request's own decision evaluated together with its trail, and objects
// the asker (whose ctx this is) may not see read as missing.
func (s *explorer) explain(ctx context.Context, p *auth.Principal, r apiRequest) accessapi.Explanation {
	out := accessapi.Explanation{User: p.Name, Method: r.Method, Path: r.Path, Required: []backend.Claim{},
		Missing: []backend.Claim{}, GrantedBy: []string{}, Messages: []string{}}
	if q := r.Query.Encode(); q != "" {
		out.Path += "?" + q
	}
	var x *policies.Explanation
	res := askerResolver{r: s.resolver}
	w := authorizeWith{resolver: res, main: func(ctx context.Context, in policies.Input) (policies.Decision, error) {
		e, err := s.explainDecision(ctx, in)
		x = &e
		return e.Decision, err
	}}
	z, err := s.authorize(ctx, p, r, w)
	if x == nil {
		// Refused before any decision: no route, a malformed body, a
		// missing object named by index.
		out.Status, out.Messages = errorAnswer(err)
		out.Steps = []accessapi.Step{{Step: "route", Outcome: accessapi.Fail, Detail: strings.Join(out.Messages, "; ")}}
		return out
	}
	out.DecisionID, out.Revision = x.DecisionID, x.Revision
	out.Required = append(out.Required, z.res.Claims...)
	out.Allowed = x.Decision.Allow
	out.Steps = append(out.Steps, accessapi.Step{Step: "route", Outcome: accessapi.Pass,
		Detail: fmt.Sprintf("%s %s: operation %s, %d required claim(s)", r.Method, z.res.Pattern, z.res.Operation, len(z.res.Claims))})
	out.Steps = append(out.Steps, accessapi.TrailSteps(*x, func(scope, name string) bool { return s.canSee(ctx, scope, name) })...)
	switch {
	case err != nil:
		out.Status, out.Messages = errorAnswer(err)
	case z.res.Key != "" && s.kinds.Kind(z.res.Scope) != nil:
		// Allowed: the handler then reads the object; a missing one (or one
		// the asker may not see) is 404.
		if _, cerr := res.Current(ctx, z.res.Scope, z.res.Key); cerr != nil {
			if !backend.IsCode(cerr, backend.ENOTFOUND) {
				out.Status, out.Messages = errorAnswer(cerr)
				break
			}
			out.Status, out.Messages = errorAnswer(notFound(r.Method, z.res.Scope, z.res.Ref))
			break
		}
		out.Status = okStatus(r.Method, z.res)
	default:
		out.Status = okStatus(r.Method, z.res)
	}
	decision := accessapi.Step{Step: "decision", Outcome: accessapi.Pass, Detail: fmt.Sprintf("allowed: %d", out.Status)}
	if out.Status >= 300 {
		decision.Outcome = accessapi.Fail
		decision.Detail = fmt.Sprintf("%d: %s", out.Status, strings.Join(out.Messages, "; "))
	}
	out.Steps = append(out.Steps, decision)
	if x.Trail != nil && !x.Decision.NotFound {
		granted := map[string]bool{}
		for _, st := range x.Trail.Claims {
			if st.Held && st.Licensed {
				continue
			}
			out.Missing = append(out.Missing, backend.Claim{Scope: st.Claim.Scope, Action: st.Claim.Action, Specific: st.Claim.Specific})
			for _, role := range s.visibleNames(ctx, "roles", st.GrantedBy) {
				if !granted[role] {
					granted[role] = true
					out.GrantedBy = append(out.GrantedBy, role)
				}
			}
		}
	}
	return out
}

// okStatus is the status an allowed request gets when its handler succeeds.
func okStatus(method string, res claims.Result) int {
	if method == http.MethodPost && res.Operation == "create" {
		return http.StatusCreated
	}
	return http.StatusOK
}

// errorAnswer is the status and messages the error handler would send.
func errorAnswer(err error) (int, []string) {
	var be *backend.Error
	if errors.As(err, &be) {
		code := statusOf(be.Code)
		if code >= 500 && be.Code != backend.EUNAVAILABLE {
			return code, []string{"internal error"}
		}
		return code, append([]string{}, be.Messages...)
	}
	return http.StatusInternalServerError, []string{"internal error"}
}

// canSee reports whether the asker (ctx's Access) may see scope/key.
func (s *explorer) canSee(ctx context.Context, scope, key string) bool {
	ok, err := backend.CanSee(ctx, scope, key)
	return err == nil && ok
}

func (s *explorer) visibleNames(ctx context.Context, scope string, names []string) []string {
	out := []string{}
	for _, n := range names {
		if s.canSee(ctx, scope, n) {
			out = append(out, n)
		}
	}
	return out
}

// explainTarget is the principal an explain question is about: the asker
// itself (with its own token's restrictions) when user is empty or its own
// name, otherwise the user as a login with its current roles.
func (s *explorer) explainTarget(ctx context.Context, asker *auth.Principal, user string) (*auth.Principal, error) {
	if user == "" || (asker.IsUser() && user == asker.Name) {
		return asker, nil
	}
	return s.userPrincipal(ctx, user)
}

// userPrincipal is user name as a Basic login would authenticate it: its
// current roles, no token restriction. The user is read through the read
// cache (Objects.View), which never answers a changed or deleted object
// (docs/design.md §14.6).
func (s *explorer) userPrincipal(ctx context.Context, name string) (*auth.Principal, error) {
	v, err := s.objects.View(ctx, "users", name)
	if err != nil {
		return nil, err
	}
	m := v.Model
	u, ok := m.(*backend.User)
	if !ok {
		return nil, backend.Errorf(backend.EINTERNAL, "users/%s: unexpected %T", name, m)
	}
	return &auth.Principal{Kind: auth.KindUser, Name: u.Name, Grantor: u.Name, Roles: append([]string{}, u.Roles...),
		Method: auth.MethodBasic}, nil
}

// parseTarget splits an explained request's path into path and query.
func parseTarget(method, target string, body []byte) (apiRequest, error) {
	path, rawQuery, _ := strings.Cut(target, "?")
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return apiRequest{}, backend.NewError(backend.EBADREQUEST, "POST", "access", "explain", "Path: malformed query string")
	}
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	if !strings.HasPrefix(path, apiBase+"/") {
		path = apiBase + path
	}
	return apiRequest{Method: strings.ToUpper(method), Path: path, Query: q, Body: body}, nil
}
