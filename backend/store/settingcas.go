package store

import (
	"context"

	"github.com/provgate/provgate/backend"
)

// UpdateSetting reads setting name and replaces it with the value next
// returns, in one transaction that holds the row: no other UpdateSetting of
// name runs between the read and the write, on one replica or several.
// next gets "" for an absent setting; when it returns write false nothing
// is written. Unlike SetSetting it does not bump the authorization data
// revision: it is for settings no cache holds (a policy bundle's sequence).
func (s *Store) UpdateSetting(ctx context.Context, name string, next func(cur string) (value string, write bool)) error {
	return s.InTx(ctx, func(ctx context.Context) error {
		db := s.conn(ctx)
		// The row exists before it is locked, so that two first writers
		// wait for each other too.
		if err := db.Exec(`INSERT INTO settings (name, value) VALUES (?, '') ON CONFLICT (name) DO NOTHING`, name).Error; err != nil {
			return s.dbErr(backend.ReplaceOp, "settings", name, err)
		}
		q := `SELECT value FROM settings WHERE name = ?`
		if s.pg() {
			// SQLite transactions are serialized already (BEGIN IMMEDIATE).
			q += ` FOR UPDATE`
		}
		var cur string
		rows, err := db.Raw(q, name).Rows()
		if err != nil {
			return s.dbErr(backend.ReadOp, "settings", name, err)
		}
		if rows.Next() {
			err = rows.Scan(&cur)
		}
		if cerr := rows.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return s.dbErr(backend.ReadOp, "settings", name, err)
		}
		v, write := next(cur)
		if !write {
			return nil
		}
		if err := db.Exec(`UPDATE settings SET value = ? WHERE name = ?`, v, name).Error; err != nil {
			return s.dbErr(backend.ReplaceOp, "settings", name, err)
		}
		return nil
	})
}
