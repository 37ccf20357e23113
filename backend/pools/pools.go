// Package pools implements pool membership operations (docs/design.md §11): the
// active-pool list, per-pool status, and the add, remove, allocate and
// release verbs with their action groups, status moves and waits.
//
// Every verb chooses and claims its machines inside one store transaction
// (docs/design.md §11.3): the candidates are locked with ClaimForUpdate, re-checked by
// the claim query itself, and written with their revision, so two callers
// never get the same machine, on one replica or several.
package pools

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/provgate/provgate/backend"
	"github.com/provgate/provgate/backend/eventbus"
)

// Store is what the pool service needs from storage; the store satisfies it.
type Store interface {
	backend.RecordStore
	ClaimForUpdate(ctx context.Context, prefix string, q backend.Query, n int) ([]backend.Record, error)
}

// Distincter is an optional store capability: the distinct values of one
// index over the objects matching q. When the store offers it, Active is one
// SELECT DISTINCT instead of one small query per pool.
type Distincter interface {
	Distinct(ctx context.Context, prefix, index string, q backend.Query) ([]string, error)
}

// Options configure a Service.
type Options struct {
	// Kinds is the kind catalog cmd built (docs/design.md §1.4); nil
	// builds one.
	Kinds *backend.Catalog
	// Bus receives a machines "update" event per changed machine, after
	// commit, and wakes pool waits. Nil: no events, waits rely on re-checks.
	Bus    *eventbus.Bus
	Logger *slog.Logger
	// Now stamps events; time.Now when nil.
	Now func() time.Time
	// Recheck is how often a wait re-reads its machines from the store, for
	// changes made by other replicas whose events this bus never sees.
	// Default 2s.
	Recheck time.Duration
	// Notify runs inside an operation's transaction with the events it
	// will publish (docs/design.md §13.4); its error aborts the operation.
	Notify func(ctx context.Context, evs []backend.Event) error
}

// Service runs pool operations against a Store.
type Service struct {
	st      Store
	bus     *eventbus.Bus
	log     *slog.Logger
	now     func() time.Time
	recheck time.Duration
	notify  func(ctx context.Context, evs []backend.Event) error
	// machines is the machines kind, whose indexes pool filters read.
	machines *backend.Kind
}

// New returns a Service.
func New(st Store, opts Options) *Service {
	s := &Service{st: st, bus: opts.Bus, log: opts.Logger, now: opts.Now, recheck: opts.Recheck, notify: opts.Notify}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	kinds := opts.Kinds
	if kinds == nil {
		kinds = backend.NewCatalog()
	}
	s.machines = kinds.Kind(backend.PrefixMachines)
	if s.now == nil {
		s.now = time.Now
	}
	if s.recheck <= 0 {
		s.recheck = 2 * time.Second
	}
	return s
}

// slimMachines keeps large maps out of reads that only need pool fields.
var slimMachines = []string{"Params", "Meta"}

func (s *Service) indexFilter(name, op string, values ...string) backend.Filter {
	return backend.Filter{Name: name, Target: backend.TargetIndex, Index: s.machines.Indexes[name], Op: op, Values: values}
}

// Active returns the sorted names of every pool that has at least one
// machine, whether or not a Pool object exists (GET /pools-active).
// visible, when non-nil, counts only those machines (tenant visibility), so
// a pool of hidden machines is not revealed, as its status is not.
func (s *Service) Active(ctx context.Context, visible []string) ([]string, error) {
	if d, ok := s.st.(Distincter); ok {
		names, err := d.Distinct(ctx, "machines", "Pool", backend.Query{Limit: -1, Visible: visible})
		if err != nil {
			return nil, err
		}
		return normalizePools(names), nil
	}
	// Without a distinct query, find one machine outside the pools already
	// found, repeatedly: one LIMIT 1 query per active pool, never a scan of
	// every machine into memory.
	var found []string
	for {
		q := backend.Query{Limit: 1, Slim: slimMachines, Visible: visible}
		if len(found) > 0 {
			q.Filters = []backend.Filter{s.indexFilter("Pool", backend.OpNin, found...)}
		}
		recs, _, _, err := s.st.List(ctx, "machines", q)
		if err != nil {
			return nil, err
		}
		if len(recs) == 0 {
			break
		}
		var m struct{ Pool string }
		if err := json.Unmarshal(recs[0].Data, &m); err != nil {
			return nil, err
		}
		for _, f := range found {
			if f == m.Pool {
				// The store ignored the filter; stop rather than loop forever.
				return normalizePools(found), nil
			}
		}
		found = append(found, m.Pool)
	}
	return normalizePools(found), nil
}

// normalizePools maps the empty pool to default (an unset Pool means the
// default pool, docs/design.md §11.2), removes duplicates and sorts.
func normalizePools(names []string) []string {
	seen := map[string]bool{}
	out := []string{}
	for _, n := range names {
		if n == "" {
			n = backend.DefaultPool
		}
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// Status returns the machines of pool grouped by PoolStatus (GET
// /pools/<id>/status). visible, when non-nil, restricts the machines to
// those keys (tenant visibility). It works for pools without an object; a
// pool with neither an object nor (visible) machines is not found.
func (s *Service) Status(ctx context.Context, pool string, visible []string) (map[string][]backend.PoolResult, error) {
	if strings.IndexByte(pool, 0) >= 0 {
		// No pool id holds a NUL; PostgreSQL would refuse the query.
		return nil, backend.NotFound(backend.ReadOp, "pools", pool)
	}
	q := backend.Query{Limit: -1, Slim: slimMachines, Visible: visible,
		Filters: []backend.Filter{s.indexFilter("Pool", backend.OpEq, pool)}}
	recs, _, _, err := s.st.List(ctx, "machines", q)
	if err != nil {
		return nil, err
	}
	out := map[string][]backend.PoolResult{}
	if len(recs) == 0 {
		p, err := s.poolObject(ctx, pool)
		if err != nil {
			return nil, err
		}
		if p == nil {
			return nil, backend.NotFound(backend.ReadOp, "pools", pool)
		}
		return out, nil
	}
	for _, r := range recs {
		m, err := decodeMachine(r.Data)
		if err != nil {
			return nil, err
		}
		res := result(m)
		out[res.Status] = append(out[res.Status], res)
	}
	for _, l := range out {
		sortResults(l)
	}
	return out, nil
}

// poolObject reads the Pool object, nil (no error) for an implicit pool.
func (s *Service) poolObject(ctx context.Context, id string) (*backend.Pool, error) {
	rec, err := s.st.Get(ctx, "pools", id)
	if err != nil {
		if backend.IsCode(err, backend.ENOTFOUND) {
			return nil, nil
		}
		return nil, err
	}
	p := &backend.Pool{}
	if err := json.Unmarshal(rec.Data, p); err != nil {
		return nil, err
	}
	return p, nil
}

// decodeMachine reads a stored machine. UseNumber keeps param values such
// as large integers exact through the read-modify-write of an operation.
func decodeMachine(data []byte) (*backend.Machine, error) {
	m := &backend.Machine{}
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	if err := d.Decode(m); err != nil {
		return nil, err
	}
	m.Fill()
	return m, nil
}

func result(m *backend.Machine) backend.PoolResult {
	return backend.PoolResult{Name: m.Name, Uuid: m.Uuid, Allocated: m.PoolAllocated, Status: m.PoolStatus}
}

func sortResults(l []backend.PoolResult) {
	sort.Slice(l, func(i, j int) bool {
		if l[i].Name != l[j].Name {
			return l[i].Name < l[j].Name
		}
		return l[i].Uuid < l[j].Uuid
	})
}
