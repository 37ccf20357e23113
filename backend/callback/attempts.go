package callback

import (
	"context"

	"github.com/provgate/provgate/backend"
)

// Limits of Attempts.
const (
	DefaultAttemptsLimit = 100
	MaxAttemptsLimit     = 1000
)

// Attempts lists the recorded attempts of plugin, newest first, for the
// caller in ctx: every attempt names a machine, and only the attempts of
// machines the caller may see are listed (backend.CanSee), so a machine its
// tenant hides looks exactly like a machine with no attempts. machine, when
// set, keeps that machine's attempts only. limit (default 100, at most
// 1000) counts visible attempts: rows the caller may not see are skipped,
// never counted, so a short page tells nothing about hidden activity.
func (s *Service) Attempts(ctx context.Context, plugin, machine string, limit int) ([]backend.CallbackAttempt, error) {
	if limit <= 0 || limit > MaxAttemptsLimit {
		limit = DefaultAttemptsLimit
	}
	out := []backend.CallbackAttempt{}
	if s.opts.Store == nil {
		return out, nil
	}
	// What this service attempted is readable as soon as it returned.
	s.FlushAttempts()
	if machine != "" {
		ok, err := backend.CanSee(ctx, "machines", machine)
		if err != nil {
			return nil, err
		}
		if !ok {
			return out, nil
		}
	}
	visible := map[string]bool{}
	q := backend.AttemptQuery{Plugin: plugin, Machine: machine, Limit: max(limit, 100)}
	for {
		page, err := s.opts.Store.ListAttempts(ctx, q)
		if err != nil {
			return nil, err
		}
		for _, a := range page {
			ok, seen := visible[a.Machine]
			if !seen {
				if ok, err = backend.CanSee(ctx, "machines", a.Machine); err != nil {
					return nil, err
				}
				visible[a.Machine] = ok
			}
			if !ok {
				continue
			}
			out = append(out, a)
			if len(out) == limit {
				return out, nil
			}
		}
		if len(page) < q.Limit {
			return out, nil
		}
		last := page[len(page)-1]
		q.AfterAt, q.AfterID = last.At, last.ID
	}
}
