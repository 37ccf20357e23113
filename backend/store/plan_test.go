package store_test

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"gorm.io/gorm"

	"github.com/provgate/provgate/backend/store"
)

// captureSQL records the SQL and parameters of every raw query the store
// runs, so that tests can ask the database how it plans them.
type captureSQL struct {
	mu   sync.Mutex
	sql  []string
	vars [][]any
}

func (c *captureSQL) install(t *testing.T, s *store.Store) {
	t.Helper()
	err := s.DB().Callback().Row().Before("gorm:row").Register("storetest:capture", func(db *gorm.DB) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.sql = append(c.sql, db.Statement.SQL.String())
		c.vars = append(c.vars, append([]any(nil), db.Statement.Vars...))
	})
	if err != nil {
		t.Fatal(err)
	}
}

func (c *captureSQL) reset() {
	c.mu.Lock()
	c.sql, c.vars = nil, nil
	c.mu.Unlock()
}

// pageQuery is the first captured statement that reads objects.
func (c *captureSQL) pageQuery(t *testing.T) (string, []any) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, q := range c.sql {
		if strings.HasPrefix(q, `SELECT "key", rev, data`) {
			return q, c.vars[i]
		}
	}
	t.Fatalf("no page query among %q", c.sql)
	return "", nil
}

func fillMachines(t *testing.T, s *store.Store, n int) {
	t.Helper()
	var sql string
	if s.Dialect() == "postgres" {
		sql = `INSERT INTO obj_machines ("key", rev, data)
SELECT 'k' || lpad(i::text, 6, '0'), 1, jsonb_build_object('Uuid', 'k' || lpad(i::text, 6, '0'), 'Name', 'n' || i,
	'Pool', CASE WHEN i % 1000 = 0 THEN 'rare' ELSE 'default' END, 'PoolStatus', 'Free', 'CurrentTask', i % 7,
	'Params', jsonb_build_object('a/b', i % 3))
FROM generate_series(1, ?) AS i`
	} else {
		sql = `WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < ?)
INSERT INTO obj_machines ("key", rev, data)
SELECT printf('k%06d', i), 1, json_object('Uuid', printf('k%06d', i), 'Name', 'n' || i,
	'Pool', CASE WHEN i % 1000 = 0 THEN 'rare' ELSE 'default' END, 'PoolStatus', 'Free', 'CurrentTask', i % 7,
	'Params', json_object('a/b', i % 3))
FROM s`
	}
	if err := s.DB().Exec(sql, n).Error; err != nil {
		t.Fatal(err)
	}
	if err := s.DB().Exec(`ANALYZE obj_machines`).Error; err != nil {
		t.Fatal(err)
	}
}

func explain(t *testing.T, s *store.Store, sql string, vars []any) string {
	t.Helper()
	prefix := "EXPLAIN QUERY PLAN "
	if s.Dialect() == "postgres" {
		prefix = "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) "
	}
	rows, err := s.DB().Raw(prefix+sql, vars...).Rows()
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var lines []string
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		var parts []string
		for _, v := range vals {
			switch v := v.(type) {
			case []byte:
				parts = append(parts, string(v))
			case string:
				parts = append(parts, v)
			}
		}
		lines = append(lines, strings.Join(parts, " "))
	}
	return strings.Join(lines, "\n")
}

func TestLargeListUsesIndexes(t *testing.T) {
	if testing.Short() {
		t.Skip("fills 100k rows")
	}
	each(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		const n = 100000
		fillMachines(t, s, n)
		var cap captureSQL
		cap.install(t, s)
		pg := s.Dialect() == "postgres"
		cases := []struct {
			name           string
			q              string
			page           int
			total, matched int
			// plan must contain all of want and none of avoid
			want, avoid []string
		}{
			{"key order", "limit=50", 50, n, n,
				pick(pg, []string{"Index Scan using obj_machines_pkey", "rows=50 "}, []string{"USING INDEX sqlite_autoindex_obj_machines_1"}),
				[]string{"Seq Scan", "TEMP B-TREE", "Sort"}},
			{"key order reversed with offset", "limit=50&offset=100&reverse=true", 50, n, n,
				pick(pg, []string{"Index Scan Backward using obj_machines_pkey", "rows=150 "}, []string{"USING INDEX sqlite_autoindex_obj_machines_1"}),
				[]string{"Seq Scan", "TEMP B-TREE", "Sort"}},
			{"pool filter", "Pool=rare&limit=50", 50, n, 100,
				pick(pg, []string{"ix_obj_machines_pool"}, []string{"ix_obj_machines_pool"}), []string{"Seq Scan"}},
			{"unique name", "Name=n4242", 1, n, 1,
				pick(pg, []string{"ux_obj_machines_name"}, []string{"ux_obj_machines_name"}), []string{"Seq Scan"}},
			{"param filter", "a/b=2&limit=50", 50, n, n / 3, nil, nil},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				cap.reset()
				q := parse(t, "machines", c.q)
				recs, total, matched, err := s.List(ctx, "machines", q)
				if err != nil {
					t.Fatal(err)
				}
				if len(recs) != c.page || total != c.total || matched != c.matched {
					t.Fatalf("page %d total %d matched %d; want %d %d %d", len(recs), total, matched, c.page, c.total, c.matched)
				}
				sql, vars := cap.pageQuery(t)
				plan := explain(t, s, sql, vars)
				for _, w := range c.want {
					if !strings.Contains(plan, w) {
						t.Errorf("plan lacks %q:\n%s", w, plan)
					}
				}
				for _, a := range c.avoid {
					if strings.Contains(plan, a) {
						t.Errorf("plan has %q:\n%s", a, plan)
					}
				}
			})
		}
		t.Run("pool claim", func(t *testing.T) { claimReadsOnlyWhatItTakes(t, s, &cap) })
	})
}

func pick(pg bool, a, b []string) []string {
	if pg {
		return a
	}
	return b
}

// claimReadsOnlyWhatItTakes: a pool claim reads the rows it takes, not the
// pool: the walk from a random pivot goes through the (Pool, PoolStatus,
// key) index and stops at the count, on the 99,900-machine pool as on the
// 100-machine one (docs/design.md §11.3). s holds fillMachines' rows.
func claimReadsOnlyWhatItTakes(t *testing.T, s *store.Store, cap *captureSQL) {
	ctx := context.Background()
	pg := s.Dialect() == "postgres"
	rowsRe := regexp.MustCompile(`rows=(\d+)`)
	for _, c := range []struct{ pool string }{{"default"}, {"rare"}} {
		t.Run(c.pool, func(t *testing.T) {
			q := parse(t, "machines", "Pool="+c.pool+"&PoolStatus=Free")
			for round := 0; round < 3; round++ {
				cap.reset()
				var recs []store.Record
				err := s.InTx(ctx, func(ctx context.Context) error {
					var err error
					recs, err = s.ClaimForUpdate(ctx, "machines", q, 50)
					return err
				})
				if err != nil {
					t.Fatal(err)
				}
				if len(recs) != 50 {
					t.Fatalf("claimed %d, want 50", len(recs))
				}
				for _, r := range recs {
					if !strings.Contains(string(r.Data), `"Pool":"`+c.pool+`"`) && !strings.Contains(string(r.Data), `"Pool": "`+c.pool+`"`) {
						t.Fatalf("claimed %s outside pool %s: %s", r.Key, c.pool, r.Data)
					}
				}
				sql, vars := cap.pageQuery(t)
				plan := explain(t, s, sql, vars)
				if pg {
					if strings.Contains(plan, "Seq Scan") {
						t.Errorf("claim scans the table:\n%s", plan)
					}
					for _, m := range rowsRe.FindAllStringSubmatch(plan, -1) {
						if r, _ := strconv.Atoi(m[1]); r > 1000 {
							t.Errorf("a plan node reads %d rows for a claim of 50:\n%s", r, plan)
						}
					}
				} else {
					if !strings.Contains(plan, "ix_obj_machines_claim") {
						t.Errorf("claim does not use the claim index:\n%s", plan)
					}
					if strings.Contains(plan, "TEMP B-TREE") || strings.Contains(plan, "SCAN obj_machines") {
						t.Errorf("claim sorts or scans the pool:\n%s", plan)
					}
				}
			}
		})
	}
}
