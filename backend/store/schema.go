package store

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"gorm.io/gorm"

	"github.com/provgate/provgate/backend"
)

// tableName is the object table of a kind. Prefixes come from the kind
// catalog, never from requests (callers check them with kind() first).
func tableName(prefix string) string { return "obj_" + prefix }

// hotIndexes are plain expression indexes for filters that run on every pool
// operation or job listing.
var hotIndexes = map[string][]string{
	"machines": {"Pool", "PoolStatus"},
	"jobs":     {"Machine"},
}

// claimIndexes lead with the fields a claim (ClaimForUpdate) narrows by
// equality and end with the key it walks in order, so that a pool claim
// reads only the rows it takes, however large the pool (docs/design.md §11.3).
var claimIndexes = map[string][]string{
	"machines": {"Pool", "PoolStatus"},
}

var identRe = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]*$`)

// fieldName checks a JSON field name taken from an index definition before it
// is written into SQL text (index expressions cannot take bound parameters).
func fieldName(f string) string {
	if !identRe.MatchString(f) {
		panic(fmt.Sprintf("store: index field %q is not a plain identifier", f))
	}
	return f
}

func (s *Store) migrate(ctx context.Context) error {
	var stmts []string
	add := func(pg, lite string) {
		if s.pg() {
			stmts = append(stmts, pg)
		} else {
			stmts = append(stmts, lite)
		}
	}
	add(`CREATE TABLE IF NOT EXISTS settings (name text COLLATE "C" PRIMARY KEY, value text NOT NULL)`,
		`CREATE TABLE IF NOT EXISTS settings (name TEXT PRIMARY KEY, value TEXT NOT NULL)`)
	add(`CREATE TABLE IF NOT EXISTS revision (id integer PRIMARY KEY, value bigint NOT NULL)`,
		`CREATE TABLE IF NOT EXISTS revision (id INTEGER PRIMARY KEY, value INTEGER NOT NULL)`)
	stmts = append(stmts, `INSERT INTO revision (id, value) VALUES (1, 0) ON CONFLICT (id) DO NOTHING`)
	// Their sum moves with every committed create and delete of an object
	// of a kind restricted lists count (visible.go), on PostgreSQL; each
	// transaction moves one of existStripes rows, so that concurrent
	// creates seldom wait for each other.
	add(`CREATE TABLE IF NOT EXISTS obj_exist (id integer PRIMARY KEY, gen bigint NOT NULL)`,
		`CREATE TABLE IF NOT EXISTS obj_exist (id INTEGER PRIMARY KEY, gen INTEGER NOT NULL)`)
	stripes := make([]string, existStripes)
	for i := range stripes {
		stripes[i] = fmt.Sprintf("(%d, 0)", i)
	}
	stmts = append(stmts, `INSERT INTO obj_exist (id, gen) VALUES `+strings.Join(stripes, ", ")+` ON CONFLICT (id) DO NOTHING`)
	// The change log: which user, role, tenant or setting each revision
	// wrote (store.go bumpRevision).
	add(`CREATE TABLE IF NOT EXISTS revision_changes (rev bigint PRIMARY KEY, prefix text NOT NULL, "key" text COLLATE "C" NOT NULL)`,
		`CREATE TABLE IF NOT EXISTS revision_changes (rev INTEGER PRIMARY KEY, prefix TEXT NOT NULL, "key" TEXT NOT NULL)`)
	add(`CREATE TABLE IF NOT EXISTS job_logs (id bigserial PRIMARY KEY, job text NOT NULL, chunk bytea NOT NULL)`,
		`CREATE TABLE IF NOT EXISTS job_logs (id INTEGER PRIMARY KEY AUTOINCREMENT, job TEXT NOT NULL, chunk BLOB NOT NULL)`)
	stmts = append(stmts, `CREATE INDEX IF NOT EXISTS ix_job_logs_job ON job_logs (job, id)`)
	add(`CREATE TABLE IF NOT EXISTS callback_deliveries (
	id bigserial PRIMARY KEY,
	plugin text NOT NULL DEFAULT '', callback text NOT NULL DEFAULT '',
	machine text NOT NULL DEFAULT '', job text NOT NULL DEFAULT '',
	payload bytea, attempts integer NOT NULL DEFAULT 0,
	state text NOT NULL DEFAULT 'pending', last_error text NOT NULL DEFAULT '',
	next_at_us bigint NOT NULL DEFAULT 0, lease_until_us bigint NOT NULL DEFAULT 0,
	created_at_us bigint NOT NULL DEFAULT 0, updated_at_us bigint NOT NULL DEFAULT 0)`,
		`CREATE TABLE IF NOT EXISTS callback_deliveries (
	id INTEGER PRIMARY KEY AUTOINCREMENT,
	plugin TEXT NOT NULL DEFAULT '', callback TEXT NOT NULL DEFAULT '',
	machine TEXT NOT NULL DEFAULT '', job TEXT NOT NULL DEFAULT '',
	payload BLOB, attempts INTEGER NOT NULL DEFAULT 0,
	state TEXT NOT NULL DEFAULT 'pending', last_error TEXT NOT NULL DEFAULT '',
	next_at_us INTEGER NOT NULL DEFAULT 0, lease_until_us INTEGER NOT NULL DEFAULT 0,
	created_at_us INTEGER NOT NULL DEFAULT 0, updated_at_us INTEGER NOT NULL DEFAULT 0)`)
	stmts = append(stmts, `CREATE INDEX IF NOT EXISTS ix_callback_deliveries_due ON callback_deliveries (state, next_at_us, id)`)
	add(`CREATE TABLE IF NOT EXISTS callback_attempts (
	id bigserial PRIMARY KEY,
	plugin text NOT NULL DEFAULT '', callback text NOT NULL DEFAULT '',
	machine text NOT NULL DEFAULT '', source text NOT NULL DEFAULT '',
	attempt integer NOT NULL DEFAULT 0, status integer NOT NULL DEFAULT 0,
	duration_ms bigint NOT NULL DEFAULT 0, error text NOT NULL DEFAULT '',
	at_us bigint NOT NULL DEFAULT 0)`,
		`CREATE TABLE IF NOT EXISTS callback_attempts (
	id INTEGER PRIMARY KEY AUTOINCREMENT,
	plugin TEXT NOT NULL DEFAULT '', callback TEXT NOT NULL DEFAULT '',
	machine TEXT NOT NULL DEFAULT '', source TEXT NOT NULL DEFAULT '',
	attempt INTEGER NOT NULL DEFAULT 0, status INTEGER NOT NULL DEFAULT 0,
	duration_ms INTEGER NOT NULL DEFAULT 0, error TEXT NOT NULL DEFAULT '',
	at_us INTEGER NOT NULL DEFAULT 0)`)
	stmts = append(stmts,
		`CREATE INDEX IF NOT EXISTS ix_callback_attempts_at ON callback_attempts (at_us, id)`,
		`CREATE INDEX IF NOT EXISTS ix_callback_attempts_machine ON callback_attempts (machine, at_us)`)

	// Failed logins (logins.go): written only by failures, read by the
	// first Basic login of a credential, pruned once a window.
	add(`CREATE TABLE IF NOT EXISTS login_failures (id bigserial PRIMARY KEY,
	kind text NOT NULL, key_hash text NOT NULL, at_us bigint NOT NULL)`,
		`CREATE TABLE IF NOT EXISTS login_failures (id INTEGER PRIMARY KEY AUTOINCREMENT,
	kind TEXT NOT NULL, key_hash TEXT NOT NULL, at_us INTEGER NOT NULL)`)
	stmts = append(stmts,
		`CREATE INDEX IF NOT EXISTS ix_login_failures_key ON login_failures (kind, key_hash, at_us)`,
		`CREATE INDEX IF NOT EXISTS ix_login_failures_at ON login_failures (at_us)`)

	for _, prefix := range s.kinds.Prefixes() {
		stmts = append(stmts, s.kindDDL(s.kinds.Kind(prefix))...)
	}

	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if s.pg() {
			// Several servers may start at once against one database;
			// CREATE ... IF NOT EXISTS alone races on the catalog.
			if err := tx.Exec(`SELECT pg_advisory_xact_lock(7210368411)`).Error; err != nil {
				return err
			}
		}
		for _, st := range stmts {
			if err := tx.Exec(st).Error; err != nil {
				return fmt.Errorf("%w (in %.60s...)", err, st)
			}
		}
		return s.migrateRevCounter(tx)
	})
	if err != nil {
		return fmt.Errorf("store: migrating the %s schema: %w", s.dialect, err)
	}
	return nil
}

func (s *Store) kindDDL(k *backend.Kind) []string {
	t := tableName(k.Prefix)
	var out []string
	if s.pg() {
		out = append(out, `CREATE TABLE IF NOT EXISTS `+t+` ("key" text COLLATE "C" PRIMARY KEY, rev bigint NOT NULL, data jsonb NOT NULL)`)
	} else {
		out = append(out, `CREATE TABLE IF NOT EXISTS `+t+` ("key" TEXT PRIMARY KEY, rev INTEGER NOT NULL, data TEXT NOT NULL)`)
	}
	seen := map[string]bool{}
	var uniq []string
	for _, name := range k.IndexNames() {
		idx := k.Indexes[name]
		if idx.Unique && idx.Field != k.KeyField && !seen[idx.Field] {
			seen[idx.Field] = true
			uniq = append(uniq, idx.Field)
		}
	}
	sort.Strings(uniq)
	for _, f := range uniq {
		// Empty values are left out: objects may be saved before the
		// field is set, and "" must not collide with itself.
		out = append(out, fmt.Sprintf(`CREATE UNIQUE INDEX IF NOT EXISTS ux_%s_%s ON %s (%s) WHERE %s <> ''`,
			t, strings.ToLower(fieldName(f)), t, s.textField(f), s.rawText(f)))
	}
	for _, f := range hotIndexes[k.Prefix] {
		out = append(out, fmt.Sprintf(`CREATE INDEX IF NOT EXISTS ix_%s_%s ON %s (%s)`,
			t, strings.ToLower(fieldName(f)), t, s.textField(f)))
	}
	if fs := claimIndexes[k.Prefix]; len(fs) > 0 {
		cols := make([]string, 0, len(fs)+1)
		for _, f := range fs {
			cols = append(cols, s.textField(fieldName(f)))
		}
		out = append(out, fmt.Sprintf(`CREATE INDEX IF NOT EXISTS ix_%s_claim ON %s (%s, "key")`,
			t, t, strings.Join(cols, ", ")))
	}
	return out
}

// rawText is a top-level JSON field as text, as the database extracts it.
func (s *Store) rawText(f string) string {
	if s.pg() {
		return `(data->>'` + fieldName(f) + `')`
	}
	return `json_extract(data, '$.` + fieldName(f) + `')`
}

// textField is a top-level JSON field as text for comparison and sorting. On
// PostgreSQL it carries the "C" collation, the same expression the indexes
// are built on, so that the planner matches them.
func (s *Store) textField(f string) string {
	if s.pg() {
		return `((data->>'` + fieldName(f) + `') COLLATE "C")`
	}
	return s.rawText(f)
}

// migrateRevCounter creates the counter object revisions come from
// (store.go nextRev) when it is missing, starting above every revision
// already stored so that no object sees one of its old revisions again.
func (s *Store) migrateRevCounter(tx *gorm.DB) error {
	var exists int64
	check := `SELECT COUNT(*) FROM obj_rev WHERE id = 1`
	if s.pg() {
		check = `SELECT COUNT(*) FROM pg_class WHERE relname = 'obj_rev_seq' AND relkind = 'S' AND relnamespace = current_schema()::regnamespace`
	} else if err := tx.Exec(`CREATE TABLE IF NOT EXISTS obj_rev (id INTEGER PRIMARY KEY, value INTEGER NOT NULL)`).Error; err != nil {
		return err
	}
	if err := tx.Raw(check).Scan(&exists).Error; err != nil {
		return fmt.Errorf("%w (checking the object revision counter)", err)
	}
	if exists > 0 {
		return nil
	}
	var maxes []string
	for _, prefix := range s.kinds.Prefixes() {
		maxes = append(maxes, `SELECT MAX(rev) AS m FROM `+tableName(prefix))
	}
	var start int64
	if err := tx.Raw(`SELECT COALESCE(MAX(m), 0) FROM (` + strings.Join(maxes, ` UNION ALL `) + `) revs`).Scan(&start).Error; err != nil {
		return fmt.Errorf("%w (reading stored revisions)", err)
	}
	if s.pg() {
		if err := tx.Exec(`CREATE SEQUENCE obj_rev_seq`).Error; err != nil {
			return err
		}
		if start > 0 {
			return tx.Exec(`SELECT setval('obj_rev_seq', ?)`, start).Error
		}
		return nil
	}
	return tx.Exec(`INSERT INTO obj_rev (id, value) VALUES (1, ?)`, start).Error
}
