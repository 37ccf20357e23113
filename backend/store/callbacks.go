package store

import (
	"context"
	stdsql "database/sql"
	"sort"
	"strconv"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/provgate/provgate/backend"
)

// AppendJobLog adds chunk to the end of a job's log. Chunks are separate
// rows, so appending never rewrites what is already stored.
func (s *Store) AppendJobLog(ctx context.Context, jobUUID string, chunk []byte) error {
	if len(chunk) == 0 {
		return nil
	}
	err := s.conn(ctx).Exec(`INSERT INTO job_logs (job, chunk) VALUES (?, ?)`, jobUUID, chunk).Error
	return s.dbErr(backend.ReplaceOp, "jobs", jobUUID, err)
}

// JobLog returns a job's whole log (empty when nothing was appended).
func (s *Store) JobLog(ctx context.Context, jobUUID string) ([]byte, error) {
	rows, err := s.conn(ctx).Raw(`SELECT chunk FROM job_logs WHERE job = ? ORDER BY id`, jobUUID).Rows()
	if err != nil {
		return nil, s.dbErr(backend.ReadOp, "jobs", jobUUID, err)
	}
	defer rows.Close()
	out := []byte{}
	for rows.Next() {
		var c []byte
		if err := rows.Scan(&c); err != nil {
			return nil, s.dbErr(backend.ReadOp, "jobs", jobUUID, err)
		}
		out = append(out, c...)
	}
	if err := rows.Err(); err != nil {
		return nil, s.dbErr(backend.ReadOp, "jobs", jobUUID, err)
	}
	return out, nil
}

// DeleteJobLog removes a job's log (no error when there is none).
func (s *Store) DeleteJobLog(ctx context.Context, jobUUID string) error {
	err := s.conn(ctx).Exec(`DELETE FROM job_logs WHERE job = ?`, jobUUID).Error
	return s.dbErr(backend.DeleteOp, "jobs", jobUUID, err)
}

func micros(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMicro()
}

func fromMicros(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMicro(v).UTC()
}

// now is the time leases are measured against. On PostgreSQL it is the
// database clock, so that servers sharing one database agree on it whatever
// their own clocks say.
func (s *Store) now(ctx context.Context) (time.Time, error) {
	if !s.pg() {
		return time.Now(), nil
	}
	var us int64
	rows, err := s.conn(ctx).Raw(`SELECT (extract(epoch from clock_timestamp()) * 1000000)::bigint`).Rows()
	if err != nil {
		return time.Time{}, s.dbErr(backend.ReadOp, "deliveries", "", err)
	}
	defer rows.Close()
	if rows.Next() {
		if err := rows.Scan(&us); err != nil {
			return time.Time{}, s.dbErr(backend.ReadOp, "deliveries", "", err)
		}
	}
	return time.UnixMicro(us), rows.Err()
}

// EnqueueDelivery stores a new delivery and returns its ID. It joins ctx's
// transaction when there is one, so a delivery can be queued atomically with
// the change that caused it. State defaults to pending and NextAt to now.
func (s *Store) EnqueueDelivery(ctx context.Context, d backend.Delivery) (int64, error) {
	now, err := s.now(ctx)
	if err != nil {
		return 0, err
	}
	if d.State == "" {
		d.State = backend.DeliveryPending
	}
	if err := checkState(d.State); err != nil {
		return 0, err
	}
	if d.NextAt.IsZero() {
		d.NextAt = now
	}
	if d.CreatedAt.IsZero() {
		d.CreatedAt = now
	}
	id, err := queryValue[int64](s.conn(ctx).Raw(`INSERT INTO callback_deliveries
	(plugin, callback, machine, job, payload, attempts, state, last_error, next_at_us, lease_until_us, created_at_us, updated_at_us)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`,
		d.Plugin, d.Callback, d.Machine, d.Job, nonNilBytes(d.Payload), d.Attempts, string(d.State), d.LastError,
		micros(d.NextAt), micros(d.LeaseUntil), micros(d.CreatedAt), micros(now)))
	if err != nil {
		return 0, s.dbErr(backend.CreateOp, "deliveries", "", err)
	}
	return id, nil
}

func nonNilBytes(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

func checkState(st backend.DeliveryState) error {
	switch st {
	case backend.DeliveryPending, backend.DeliveryDone, backend.DeliveryFailed:
		return nil
	}
	return backend.NewError(backend.EINVALID, "ValidationError", "deliveries", "", "state must be pending, done or failed")
}

const deliveryCols = `id, plugin, callback, machine, job, payload, attempts, state, last_error, next_at_us, lease_until_us, created_at_us, updated_at_us`

func (s *Store) scanDeliveries(db *gorm.DB) ([]backend.Delivery, error) {
	out, err := queryRows(db, func(rows *stdsql.Rows, d *backend.Delivery) error {
		var next, lease, created, updated int64
		if err := rows.Scan(&d.ID, &d.Plugin, &d.Callback, &d.Machine, &d.Job, &d.Payload, &d.Attempts, &d.State,
			&d.LastError, &next, &lease, &created, &updated); err != nil {
			return err
		}
		d.NextAt, d.LeaseUntil, d.CreatedAt, d.UpdatedAt = fromMicros(next), fromMicros(lease), fromMicros(created), fromMicros(updated)
		return nil
	})
	if err != nil {
		return nil, s.dbErr(backend.ReadOp, "deliveries", "", err)
	}
	return out, nil
}

// ClaimDeliveries leases up to n due deliveries (pending, NextAt and
// LeaseUntil not after now): it sets LeaseUntil to now+lease and counts the
// attempt, in one statement. On PostgreSQL the candidates are locked with
// SKIP LOCKED, so concurrent claimers, in this process or others sharing
// the database, never get the same delivery; on SQLite the statement runs
// alone on the single connection.
func (s *Store) ClaimDeliveries(ctx context.Context, n int, lease time.Duration) ([]backend.Delivery, error) {
	if n <= 0 {
		return nil, nil
	}
	var out []backend.Delivery
	err := s.InTx(ctx, func(ctx context.Context) error {
		now, err := s.now(ctx)
		if err != nil {
			return err
		}
		nowUs := micros(now)
		lock := ""
		if s.pg() {
			lock = ` FOR UPDATE SKIP LOCKED`
		}
		// The locking CTE is evaluated once (PostgreSQL never inlines a CTE
		// with FOR UPDATE), so LIMIT bounds the claim exactly.
		q := `WITH c AS (SELECT id FROM callback_deliveries
	WHERE state = 'pending' AND next_at_us <= ? AND lease_until_us <= ?
	ORDER BY next_at_us, id LIMIT ?` + lock + `)
UPDATE callback_deliveries SET lease_until_us = ?, attempts = attempts + 1, updated_at_us = ?
WHERE id IN (SELECT id FROM c) RETURNING ` + deliveryCols
		out, err = s.scanDeliveries(s.conn(ctx).Raw(q, nowUs, nowUs, n, micros(now.Add(lease)), nowUs))
		return err
	})
	if err != nil {
		return nil, err
	}
	sortDeliveries(out)
	return out, nil
}

// sortDeliveries puts claimed deliveries in due order; RETURNING gives none.
func sortDeliveries(ds []backend.Delivery) {
	sort.Slice(ds, func(i, j int) bool {
		if !ds[i].NextAt.Equal(ds[j].NextAt) {
			return ds[i].NextAt.Before(ds[j].NextAt)
		}
		return ds[i].ID < ds[j].ID
	})
}

// FinishDelivery records the outcome of a claimed delivery and clears its
// lease: pending (retry at nextAt), done or failed.
func (s *Store) FinishDelivery(ctx context.Context, id int64, state backend.DeliveryState, lastErr string, nextAt time.Time) error {
	if err := checkState(state); err != nil {
		return err
	}
	now, err := s.now(ctx)
	if err != nil {
		return err
	}
	res := s.conn(ctx).Exec(`UPDATE callback_deliveries SET state = ?, last_error = ?, next_at_us = ?, lease_until_us = 0, updated_at_us = ? WHERE id = ?`,
		string(state), lastErr, micros(nextAt), micros(now), id)
	if res.Error != nil {
		return s.dbErr(backend.ReplaceOp, "deliveries", "", res.Error)
	}
	if res.RowsAffected == 0 {
		return backend.NotFound(backend.ReplaceOp, "deliveries", strconv.FormatInt(id, 10))
	}
	return nil
}

// ListDeliveries returns deliveries in a state ("" = all), oldest first;
// limit <= 0 means no limit.
func (s *Store) ListDeliveries(ctx context.Context, state backend.DeliveryState, limit int) ([]backend.Delivery, error) {
	q := `SELECT ` + deliveryCols + ` FROM callback_deliveries`
	var args []any
	if state != "" {
		q += ` WHERE state = ?`
		args = append(args, string(state))
	}
	q += ` ORDER BY id`
	if limit > 0 {
		q += ` LIMIT ?`
		args = append(args, limit)
	}
	return s.scanDeliveries(s.conn(ctx).Raw(q, args...))
}

// RecordAttempt stores one callback attempt; At defaults to now.
func (s *Store) RecordAttempt(ctx context.Context, a backend.CallbackAttempt) error {
	return s.RecordAttempts(ctx, []backend.CallbackAttempt{a})
}

// attemptRowsPerInsert keeps one INSERT's bound values (9 a row) well under
// SQLite's limit of 32,766.
const attemptRowsPerInsert = 500

// sqliteAttemptRowsPerInsert is the same on SQLite, smaller: its driver
// (glebarez/go-sqlite) finds each bound value by scanning the arguments
// from the first, so binding costs the square of the values per
// statement; 32 rows (288 values) per INSERT keep a batch of a few hundred
// attempts from spending most of its time there.
const sqliteAttemptRowsPerInsert = 32

// RecordAttempts stores callback attempts in one transaction, a multi-row
// INSERT per 500 rows (32 on SQLite); At defaults to now.
func (s *Store) RecordAttempts(ctx context.Context, as []backend.CallbackAttempt) error {
	if len(as) == 0 {
		return nil
	}
	rows := attemptRowsPerInsert
	if !s.pg() {
		rows = sqliteAttemptRowsPerInsert
	}
	err := s.InTx(ctx, func(ctx context.Context) error {
		for start := 0; start < len(as); start += rows {
			chunk := as[start:min(start+rows, len(as))]
			var sb strings.Builder
			sb.WriteString(`INSERT INTO callback_attempts (plugin, callback, machine, source, attempt, status, duration_ms, error, at_us) VALUES `)
			args := make([]any, 0, 9*len(chunk))
			for i, a := range chunk {
				if a.At.IsZero() {
					a.At = time.Now()
				}
				if i > 0 {
					sb.WriteString(", ")
				}
				sb.WriteString("(?, ?, ?, ?, ?, ?, ?, ?, ?)")
				args = append(args, a.Plugin, a.Callback, a.Machine, string(a.Source), a.Attempt, a.Status, a.DurationMs, a.Error, micros(a.At))
			}
			if err := s.conn(ctx).Exec(sb.String(), args...).Error; err != nil {
				return err
			}
		}
		return nil
	})
	return s.dbErr(backend.CreateOp, "attempts", "", err)
}

// ListAttempts returns the attempts q selects, newest first (by At, then
// by ID).
func (s *Store) ListAttempts(ctx context.Context, q backend.AttemptQuery) ([]backend.CallbackAttempt, error) {
	sql := `SELECT id, plugin, callback, machine, source, attempt, status, duration_ms, error, at_us FROM callback_attempts`
	var conds []string
	var args []any
	if q.Plugin != "" {
		conds = append(conds, `plugin = ?`)
		args = append(args, q.Plugin)
	}
	if q.Machine != "" {
		conds = append(conds, `machine = ?`)
		args = append(args, q.Machine)
	}
	if q.AfterID != 0 {
		at := micros(q.AfterAt)
		conds = append(conds, `(at_us < ? OR (at_us = ? AND id < ?))`)
		args = append(args, at, at, q.AfterID)
	}
	if len(conds) > 0 {
		sql += ` WHERE ` + strings.Join(conds, ` AND `)
	}
	sql += ` ORDER BY at_us DESC, id DESC`
	if q.Limit > 0 {
		sql += ` LIMIT ?`
		args = append(args, q.Limit)
	}
	out, err := queryRows(s.conn(ctx).Raw(sql, args...), func(rows *stdsql.Rows, a *backend.CallbackAttempt) error {
		var at int64
		if err := rows.Scan(&a.ID, &a.Plugin, &a.Callback, &a.Machine, &a.Source, &a.Attempt, &a.Status, &a.DurationMs, &a.Error, &at); err != nil {
			return err
		}
		a.At = fromMicros(at)
		return nil
	})
	if err != nil {
		return nil, s.dbErr(backend.ReadOp, "attempts", "", err)
	}
	return out, nil
}

// PruneCallbackHistory deletes attempts recorded before t and finished
// (done or failed) deliveries last updated before t; it returns how many
// rows went.
func (s *Store) PruneCallbackHistory(ctx context.Context, before time.Time) (int64, error) {
	var n int64
	err := s.InTx(ctx, func(ctx context.Context) error {
		r := s.conn(ctx).Exec(`DELETE FROM callback_attempts WHERE at_us < ?`, micros(before))
		if r.Error != nil {
			return s.dbErr(backend.DeleteOp, "attempts", "", r.Error)
		}
		n += r.RowsAffected
		r = s.conn(ctx).Exec(`DELETE FROM callback_deliveries WHERE state IN ('done', 'failed') AND updated_at_us < ?`, micros(before))
		if r.Error != nil {
			return s.dbErr(backend.DeleteOp, "deliveries", "", r.Error)
		}
		n += r.RowsAffected
		return nil
	})
	return n, err
}
