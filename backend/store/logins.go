package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"sort"
	"time"

	"github.com/provgate/provgate/backend"
)

// Failed logins are kept in the table login_failures, one row per failure
// of a user name (kind "user") or of a client address (kind "ip"), so that
// every server sharing the database counts the same failures. Keys are
// stored hashed: they are whatever a client sent, of any length, and only
// ever compared for equality.

const (
	failUser = "user"
	failIP   = "ip"
)

func failKey(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// RecentLoginFailures returns the times of the most recent failures after
// since, newest first: at most userLimit of user's and ipLimit of ip's (a
// limit of 0, or an empty ip, asks for none of that kind). It is one query.
func (s *Store) RecentLoginFailures(ctx context.Context, user, ip string, since time.Time, userLimit, ipLimit int) ([]time.Time, []time.Time, error) {
	if ip == "" {
		ipLimit = 0
	}
	userLimit, ipLimit = max(userLimit, 0), max(ipLimit, 0)
	if userLimit == 0 && ipLimit == 0 {
		return nil, nil, nil
	}
	after := since.UnixMicro()
	rows, err := s.conn(ctx).Raw(`SELECT kind, at_us FROM (SELECT kind, at_us FROM login_failures
	WHERE kind = ? AND key_hash = ? AND at_us > ? ORDER BY at_us DESC LIMIT ?) u
UNION ALL
SELECT kind, at_us FROM (SELECT kind, at_us FROM login_failures
	WHERE kind = ? AND key_hash = ? AND at_us > ? ORDER BY at_us DESC LIMIT ?) i`,
		failUser, failKey(user), after, userLimit, failIP, failKey(ip), after, ipLimit).Rows()
	if err != nil {
		return nil, nil, s.dbErr(backend.ReadOp, "login_failures", "", err)
	}
	defer rows.Close()
	var us, is []time.Time
	for rows.Next() {
		var kind string
		var at int64
		if err := rows.Scan(&kind, &at); err != nil {
			return nil, nil, s.dbErr(backend.ReadOp, "login_failures", "", err)
		}
		if kind == failUser {
			us = append(us, fromMicros(at))
		} else {
			is = append(is, fromMicros(at))
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, s.dbErr(backend.ReadOp, "login_failures", "", err)
	}
	newestFirst := func(ts []time.Time) {
		sort.Slice(ts, func(i, j int) bool { return ts[i].After(ts[j]) })
	}
	newestFirst(us)
	newestFirst(is)
	return us, is, nil
}

// AddLoginFailure records one failure at t of user and of ip; an empty user
// or ip records none of that kind.
func (s *Store) AddLoginFailure(ctx context.Context, user, ip string, t time.Time) error {
	at := t.UnixMicro()
	var err error
	switch {
	case user != "" && ip != "":
		err = s.conn(ctx).Exec(`INSERT INTO login_failures (kind, key_hash, at_us) VALUES (?, ?, ?), (?, ?, ?)`,
			failUser, failKey(user), at, failIP, failKey(ip), at).Error
	case user != "":
		err = s.conn(ctx).Exec(`INSERT INTO login_failures (kind, key_hash, at_us) VALUES (?, ?, ?)`, failUser, failKey(user), at).Error
	case ip != "":
		err = s.conn(ctx).Exec(`INSERT INTO login_failures (kind, key_hash, at_us) VALUES (?, ?, ?)`, failIP, failKey(ip), at).Error
	}
	return s.dbErr(backend.ActionOp, "login_failures", "", err)
}

// PruneLoginFailures deletes the failures at or before t.
func (s *Store) PruneLoginFailures(ctx context.Context, t time.Time) error {
	err := s.conn(ctx).Exec(`DELETE FROM login_failures WHERE at_us <= ?`, t.UnixMicro()).Error
	return s.dbErr(backend.DeleteOp, "login_failures", "", err)
}
