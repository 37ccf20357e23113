package auth

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/provgate/provgate/backend"
)

// FailureLog keeps the times of failed Basic logins, per user name and per
// client address. Replicas that share one store share one log, so a client
// gets the same number of guesses whichever replica it reaches, and a
// restart forgets nothing. The gateway wires the store's; Options.Failures
// nil keeps an in-memory log, private to the process.
type FailureLog interface {
	// RecentLoginFailures returns the times of the most recent failures
	// after since, newest first: at most userLimit of user's and ipLimit of
	// ip's. A limit of 0, or an empty ip, asks for none of that kind. It
	// is one read.
	RecentLoginFailures(ctx context.Context, user, ip string, since time.Time, userLimit, ipLimit int) (userTimes, ipTimes []time.Time, err error)
	// AddLoginFailure records one failure at t of user and of ip; an empty
	// user or ip records none of that kind.
	AddLoginFailure(ctx context.Context, user, ip string, t time.Time) error
	// PruneLoginFailures forgets failures at or before t.
	PruneLoginFailures(ctx context.Context, t time.Time) error
}

// failLimits applies the failure limits over a FailureLog: a sliding window
// of FailWindow in which a user name may fail FailLimitUser times and a
// client address FailLimitIP times. Only failures write; checking costs one
// read; the log is pruned at most once a window, by the failure path.
type failLimits struct {
	log            FailureLog
	userMax, ipMax int // 0: that limit is off
	window         time.Duration
	logger         interface{ Warn(string, ...any) }

	mu        sync.Mutex
	lastPrune time.Time
}

// failState is what a check learned: the failures already counted, so that
// recording one more can tell when a limit is reached without a read.
type failState struct{ user, ip int }

// check returns how long user and clientIP must wait (0: they may try now).
func (l *failLimits) check(ctx context.Context, user, clientIP string, now time.Time) (time.Duration, failState, error) {
	ipMax := l.ipMax
	if clientIP == "" {
		ipMax = 0
	}
	if l.userMax == 0 && ipMax == 0 {
		return 0, failState{}, nil
	}
	us, is, err := l.log.RecentLoginFailures(ctx, user, clientIP, now.Add(-l.window), l.userMax, ipMax)
	if err != nil {
		return 0, failState{}, err
	}
	st := failState{user: len(us), ip: len(is)}
	return max(l.wait(us, l.userMax, now), l.wait(is, ipMax, now)), st, nil
}

// wait: with max failures in the window (newest first), the key may try
// again when the oldest of them leaves it. Times from a replica whose clock
// runs ahead never make a wait longer than the window.
func (l *failLimits) wait(times []time.Time, limit int, now time.Time) time.Duration {
	if limit == 0 || len(times) < limit {
		return 0
	}
	return min(max(times[limit-1].Add(l.window).Sub(now), time.Second), l.window)
}

// failed records a failure of user from clientIP, warning when a limit is
// just reached, and prunes the log once a window.
func (l *failLimits) failed(ctx context.Context, user, clientIP string, st failState, now time.Time) error {
	u, ip := "", clientIP
	if l.userMax > 0 {
		u = user
	}
	if l.ipMax == 0 {
		ip = ""
	}
	if u == "" && ip == "" {
		return nil
	}
	if err := l.log.AddLoginFailure(ctx, u, ip, now); err != nil {
		return err
	}
	if u != "" && st.user+1 == l.userMax {
		l.logger.Warn("login failure limit reached", "user", user, "ip", clientIP)
	}
	if ip != "" && st.ip+1 == l.ipMax {
		l.logger.Warn("login failure limit reached", "ip", clientIP)
	}
	l.mu.Lock()
	prune := now.Sub(l.lastPrune) >= l.window
	if prune {
		l.lastPrune = now
	}
	l.mu.Unlock()
	if prune {
		if err := l.log.PruneLoginFailures(ctx, now.Add(-l.window)); err != nil {
			// Old rows only take room; the next window tries again.
			l.logger.Warn("pruning failed logins", "error", err.Error())
		}
	}
	return nil
}

// limitedError is the 429 of a limited login.
func limitedError(wait time.Duration) error {
	secs := int(math.Ceil(wait.Seconds()))
	return &backend.Error{Code: backend.ETOOMANY, Type: "AUTH",
		Messages: []string{fmt.Sprintf("too many failed logins; retry after %ds", secs)},
		Err:      &Limited{RetryAfter: time.Duration(secs) * time.Second}}
}

// memoryFailures is a FailureLog in memory: each key keeps its newest
// failures, at most keep of them, and at most maxKeys keys of each kind are
// tracked, since attackers choose both names and addresses.
type memoryFailures struct {
	mu      sync.Mutex
	keep    int
	maxKeys int
	users   map[string][]time.Time // oldest first
	ips     map[string][]time.Time
}

// NewMemoryFailures returns an in-memory FailureLog keeping the newest keep
// failures of at most maxKeys user names and maxKeys addresses.
func NewMemoryFailures(keep, maxKeys int) FailureLog {
	return &memoryFailures{keep: max(keep, 1), maxKeys: max(maxKeys, 1),
		users: map[string][]time.Time{}, ips: map[string][]time.Time{}}
}

func (m *memoryFailures) RecentLoginFailures(_ context.Context, user, ip string, since time.Time, userLimit, ipLimit int) ([]time.Time, []time.Time, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var is []time.Time
	if ip != "" {
		is = recent(m.ips[ip], since, ipLimit)
	}
	return recent(m.users[user], since, userLimit), is, nil
}

// recent returns the newest of ts (oldest first) after since, newest first,
// at most limit.
func recent(ts []time.Time, since time.Time, limit int) []time.Time {
	var out []time.Time
	for i := len(ts) - 1; i >= 0 && len(out) < limit; i-- {
		if !ts[i].After(since) {
			break
		}
		out = append(out, ts[i])
	}
	return out
}

func (m *memoryFailures) AddLoginFailure(_ context.Context, user, ip string, t time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if user != "" {
		m.add(m.users, user, t)
	}
	if ip != "" {
		m.add(m.ips, ip, t)
	}
	return nil
}

func (m *memoryFailures) add(times map[string][]time.Time, key string, t time.Time) {
	ts, ok := times[key]
	if !ok && len(times) >= m.maxKeys {
		// Full of live keys (many names or addresses under attack at
		// once): forget the key whose newest failure is oldest. Forgetting
		// only lets it start counting again; the other limit still applies.
		var victim string
		var newest time.Time
		for k, v := range times {
			if last := v[len(v)-1]; victim == "" || last.Before(newest) {
				victim, newest = k, last
			}
		}
		delete(times, victim)
	}
	i, _ := slices.BinarySearchFunc(ts, t, func(a, b time.Time) int { return a.Compare(b) })
	ts = slices.Insert(ts, i, t)
	if len(ts) > m.keep {
		ts = slices.Delete(ts, 0, len(ts)-m.keep)
	}
	times[key] = ts
}

func (m *memoryFailures) PruneLoginFailures(_ context.Context, t time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, times := range []map[string][]time.Time{m.users, m.ips} {
		for k, ts := range times {
			i := 0
			for i < len(ts) && !ts[i].After(t) {
				i++
			}
			if i == len(ts) {
				delete(times, k)
			} else {
				times[k] = ts[i:]
			}
		}
	}
	return nil
}
