package store

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/provgate/provgate/backend"
)

// frag is a piece of SQL with its bound arguments, in placeholder order.
type frag struct {
	sql  string
	args []any
}

// arg marks a value to bind in cat.
type arg struct{ v any }

// cat joins SQL text, fragments and bound values, keeping the arguments in
// the order their placeholders appear.
func cat(parts ...any) frag {
	var sb strings.Builder
	var args []any
	for _, p := range parts {
		switch p := p.(type) {
		case string:
			sb.WriteString(p)
		case frag:
			sb.WriteString(p.sql)
			args = append(args, p.args...)
		case arg:
			if f, ok := p.v.(frag); ok {
				// A value that needs SQL around its placeholder (a cast).
				sb.WriteString(f.sql)
				args = append(args, f.args...)
				continue
			}
			sb.WriteString("?")
			args = append(args, p.v)
		default:
			panic("store: cat: unexpected part")
		}
	}
	return frag{sql: sb.String(), args: args}
}

func raw(sql string) frag { return frag{sql: sql} }

// list is "(?, ?, ...)" over vals.
func list(vals []any) frag {
	parts := []any{"("}
	for i, v := range vals {
		if i > 0 {
			parts = append(parts, ", ")
		}
		parts = append(parts, arg{v})
	}
	parts = append(parts, ")")
	return cat(parts...)
}

func join(fs []frag, sep string) frag {
	parts := make([]any, 0, 2*len(fs))
	for i, f := range fs {
		if i > 0 {
			parts = append(parts, sep)
		}
		parts = append(parts, f)
	}
	return cat(parts...)
}

// not is the negation of a condition that treats "unknown" (a missing
// field) as false, so that Ne, Nin and Except match objects without the
// field.
func not(f frag) frag { return cat("NOT COALESCE((", f, "), FALSE)") }

// builder translates list filters of one kind into SQL conditions.
type builder struct {
	s    *Store
	kind *backend.Kind
}

func (s *Store) newBuilder(k *backend.Kind) *builder { return &builder{s: s, kind: k} }

func notAcceptable(prefix, format string, args ...any) error {
	e := backend.Errorf(backend.ENOTACCEPTABLE, format, args...)
	e.Op, e.Model = backend.ReadOp, prefix
	return e
}

// valKind says how an index's values compare in SQL.
type valKind int

const (
	vText valKind = iota
	vInt
	vBool
	vIP
	vTime
)

func kindOf(t backend.IndexType) valKind {
	switch t {
	case backend.IndexInt:
		return vInt
	case backend.IndexBool:
		return vBool
	case backend.IndexIP:
		return vIP
	case backend.IndexTime:
		return vTime
	}
	return vText
}

// ipKey is an order-preserving text form of an IP address: the hex of its
// 16-byte form.
func ipKey(s string) (string, bool) {
	ip := net.ParseIP(s)
	if ip == nil {
		return "", false
	}
	return hex.EncodeToString(ip.To16()), true
}

// timeKey is an order-preserving text form of an RFC 3339 time: fixed
// width, UTC, nanoseconds.
func timeKey(s string) (string, bool) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return "", false
	}
	return t.UTC().Format("2006-01-02T15:04:05.000000000Z"), true
}

// indexExpr is the comparison expression of a scalar index.
func (b *builder) indexExpr(idx backend.Index) frag {
	pg := b.s.pg()
	f := idx.Field
	switch kindOf(idx.Type) {
	case vInt:
		if pg {
			return raw(`(CASE WHEN jsonb_typeof(data->'` + fieldName(f) + `') = 'number' THEN (data->>'` + f + `')::numeric END)`)
		}
		return raw(b.s.rawText(f))
	case vBool:
		if pg {
			return raw(`COALESCE((data->'` + fieldName(f) + `') = 'true'::jsonb, FALSE)`)
		}
		return raw(`COALESCE(` + b.s.rawText(f) + `, 0)`)
	case vIP:
		// Addresses compare as addresses (10.0.0.40 > 10.0.0.6), not as
		// text. Stored values are validated IPs or "" (unset).
		if pg {
			return raw(`(NULLIF(` + b.s.rawText(f) + `, '')::inet)`)
		}
		return raw(`ipkey(` + b.s.rawText(f) + `)`)
	case vTime:
		// RFC 3339 text with trimmed fractions does not sort as time.
		if pg {
			return raw(`((` + b.s.rawText(f) + `)::timestamptz)`)
		}
		return raw(`timekey(` + b.s.rawText(f) + `)`)
	}
	if f == b.kind.KeyField {
		return raw(`"key"`)
	}
	return raw(b.s.textField(f))
}

// indexText is an index's value as text, for regular expressions.
func (b *builder) indexText(idx backend.Index) frag {
	f := idx.Field
	if b.s.pg() {
		return raw(b.s.rawText(f))
	}
	switch kindOf(idx.Type) {
	case vBool:
		return raw(`(data -> '$.` + fieldName(f) + `')`)
	case vInt:
		return raw(`CAST(` + b.s.rawText(f) + ` AS TEXT)`)
	}
	return raw(b.s.rawText(f))
}

// regex is "text matches pattern" in the dialect.
func (b *builder) regex(text frag, pattern string) frag {
	if b.s.pg() {
		return cat("(", text, " ~ ", arg{pattern}, ")")
	}
	return cat("regexp(", arg{pattern}, ", ", text, ")")
}

func (b *builder) indexValue(idx backend.Index, name, v string) (any, error) {
	switch kindOf(idx.Type) {
	case vInt:
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, notAcceptable(b.kind.Prefix, "%s must be an integer, not %q", name, v)
		}
		return n, nil
	case vBool:
		t, err := strconv.ParseBool(v)
		if err != nil || (v != "true" && v != "false") {
			return nil, notAcceptable(b.kind.Prefix, "%s must be true or false", name)
		}
		if b.s.pg() {
			return t, nil
		}
		if t {
			return int64(1), nil
		}
		return int64(0), nil
	case vIP:
		return b.castOrKey(name, v, ipKey, "an IP address", "inet")
	case vTime:
		return b.castOrKey(name, v, timeKey, "an RFC 3339 time", "timestamptz")
	}
	return v, nil
}

// castOrKey is v cast to pgType on PostgreSQL, elsewhere its sortable key
// (made by key); what names the form v must have.
func (b *builder) castOrKey(name, v string, key func(string) (string, bool), what, pgType string) (any, error) {
	k, ok := key(v)
	if !ok {
		return nil, notAcceptable(b.kind.Prefix, "%s must be %s, not %q", name, what, v)
	}
	if b.s.pg() {
		return cat("CAST(", arg{v}, " AS "+pgType+")"), nil
	}
	return k, nil
}

// scalar builds op over expression e with already-typed values.
func scalar(op string, e frag, vals []any) frag {
	switch op {
	case backend.OpEq:
		return cat(e, " = ", arg{vals[0]})
	case backend.OpNe:
		return not(cat(e, " = ", arg{vals[0]}))
	case backend.OpLt:
		return cat(e, " < ", arg{vals[0]})
	case backend.OpLte:
		return cat(e, " <= ", arg{vals[0]})
	case backend.OpGt:
		return cat(e, " > ", arg{vals[0]})
	case backend.OpGte:
		return cat(e, " >= ", arg{vals[0]})
	case backend.OpIn:
		return cat(e, " IN ", list(vals))
	case backend.OpNin:
		return not(cat(e, " IN ", list(vals)))
	case backend.OpBetween:
		return cat("(", e, " >= ", arg{vals[0]}, " AND ", e, " <= ", arg{vals[1]}, ")")
	case backend.OpExcept:
		return not(cat("(", e, " >= ", arg{vals[0]}, " AND ", e, " <= ", arg{vals[1]}, ")"))
	}
	panic("store: unknown operator " + op)
}

func checkArity(prefix string, f backend.Filter) error {
	n := len(f.Values)
	switch f.Op {
	case backend.OpBetween, backend.OpExcept:
		if n != 2 {
			return notAcceptable(prefix, "%s: %s needs 2 values", f.Name, f.Op)
		}
	case backend.OpIn, backend.OpNin:
		if n == 0 {
			return notAcceptable(prefix, "%s: %s needs at least one value", f.Name, f.Op)
		}
	case backend.OpEq, backend.OpNe, backend.OpLt, backend.OpLte, backend.OpGt, backend.OpGte, backend.OpRe:
		if n != 1 {
			return notAcceptable(prefix, "%s: %s needs 1 value", f.Name, f.Op)
		}
	default:
		return notAcceptable(prefix, "%s: unknown operator %q", f.Name, f.Op)
	}
	return nil
}

// filter translates one list filter into a condition.
func (b *builder) filter(f backend.Filter) (frag, error) {
	if err := checkArity(b.kind.Prefix, f); err != nil {
		return frag{}, err
	}
	switch f.Target {
	case backend.TargetIndex:
		return b.indexFilter(f)
	case backend.TargetMeta:
		return b.metaFilter(f)
	case backend.TargetParam:
		if !b.kind.ParamFilters || !backend.ValidParamName(f.Name) {
			return frag{}, notAcceptable(b.kind.Prefix, "Filter not found: %s", f.Name)
		}
		return b.paramFilter(f)
	}
	return frag{}, notAcceptable(b.kind.Prefix, "Filter not found: %s", f.Name)
}

func (b *builder) indexFilter(f backend.Filter) (frag, error) {
	idx := f.Index
	if !identRe.MatchString(idx.Field) {
		return frag{}, notAcceptable(b.kind.Prefix, "Filter not found: %s", f.Name)
	}
	switch idx.Type {
	case backend.IndexList:
		return b.listFilter(f)
	case backend.IndexMap:
		return frag{}, notAcceptable(b.kind.Prefix, "%s: cannot filter a map index", f.Name)
	}
	if f.Op == backend.OpRe {
		return b.regex(b.indexText(idx), f.Values[0]), nil
	}
	if idx.Unordered {
		switch f.Op {
		case backend.OpLt, backend.OpLte, backend.OpGt, backend.OpGte, backend.OpBetween, backend.OpExcept:
			return frag{}, notAcceptable(b.kind.Prefix, "%s: %s is not supported on an unordered index", f.Name, f.Op)
		}
	}
	vals := make([]any, len(f.Values))
	for i, v := range f.Values {
		tv, err := b.indexValue(idx, f.Name, v)
		if err != nil {
			return frag{}, err
		}
		vals[i] = tv
	}
	c := scalar(f.Op, b.indexExpr(idx), vals)
	// The unique indexes are partial (non-empty values); naming their
	// predicate lets the planner use them for equality lookups.
	if f.Op == backend.OpEq && idx.Unique && idx.Field != b.kind.KeyField && f.Values[0] != "" && kindOf(idx.Type) == vText {
		c = cat("(", c, " AND ", b.s.rawText(idx.Field), " <> '')")
	}
	return c, nil
}

// listFilter handles JSON arrays of strings: Eq means "contains".
func (b *builder) listFilter(f backend.Filter) (frag, error) {
	var from, el string
	fld := fieldName(f.Index.Field)
	if b.s.pg() {
		from = `jsonb_array_elements_text(CASE WHEN jsonb_typeof(data->'` + fld + `') = 'array' THEN data->'` + fld + `' ELSE '[]'::jsonb END) AS e(v)`
		el = `e.v`
	} else {
		from = `json_each(data, '$.` + fld + `') AS e`
		el = `e.value`
	}
	exists := func(cond frag) frag { return cat("EXISTS (SELECT 1 FROM ", from, " WHERE ", cond, ")") }
	vals := make([]any, len(f.Values))
	for i, v := range f.Values {
		vals[i] = v
	}
	switch f.Op {
	case backend.OpEq:
		return exists(cat(el, " = ", arg{vals[0]})), nil
	case backend.OpNe:
		return cat("NOT ", exists(cat(el, " = ", arg{vals[0]}))), nil
	case backend.OpIn:
		return exists(cat(el, " IN ", list(vals))), nil
	case backend.OpNin:
		return cat("NOT ", exists(cat(el, " IN ", list(vals)))), nil
	case backend.OpRe:
		return exists(b.regex(raw(el), f.Values[0])), nil
	}
	return frag{}, notAcceptable(b.kind.Prefix, "%s: %s is not supported on a list index", f.Name, f.Op)
}

// metaFilter compares data.Meta.<key> as text.
func (b *builder) metaFilter(f backend.Filter) (frag, error) {
	key := strings.TrimPrefix(f.Name, "Meta.")
	var e frag
	if b.s.pg() {
		e = cat(`((data->'Meta'->>CAST(`, arg{key}, ` AS text)) COLLATE "C")`)
	} else {
		e = cat(`(SELECT m.value FROM json_each(data, '$.Meta') AS m WHERE m.key = `, arg{key}, `)`)
	}
	if f.Op == backend.OpRe {
		return b.regex(e, f.Values[0]), nil
	}
	vals := make([]any, len(f.Values))
	for i, v := range f.Values {
		vals[i] = v
	}
	return scalar(f.Op, e, vals), nil
}

// jsonValue reads a param filter value: JSON when it parses, else a string.
func jsonValue(s string) any {
	if !json.Valid([]byte(s)) {
		return s
	}
	d := json.NewDecoder(bytes.NewReader([]byte(s)))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return s
	}
	return v
}

// number reads a JSON number as int64 when it is integral, else float64.
func number(n json.Number) any {
	if i, err := n.Int64(); err == nil {
		return i
	}
	f, _ := n.Float64()
	return f
}

func (b *builder) paramFilter(f backend.Filter) (frag, error) {
	vals := make([]any, len(f.Values))
	canon := make([]string, len(f.Values))
	numeric := true
	for i, s := range f.Values {
		vals[i] = jsonValue(s)
		if _, ok := vals[i].(json.Number); !ok {
			numeric = false
		}
		c, err := json.Marshal(vals[i])
		if err != nil {
			return frag{}, notAcceptable(b.kind.Prefix, "filter value %q of %s cannot be encoded: %v", s, f.Name, err)
		}
		canon[i] = string(c)
	}
	if b.s.pg() {
		return b.paramFilterPG(f, vals, canon, numeric)
	}
	return b.paramFilterSQLite(f, vals, canon, numeric)
}

// textForm is a filter value as text for range comparisons: strings as
// themselves, anything else as its canonical JSON text.
func textForm(v any, canon string) string {
	if s, ok := v.(string); ok {
		return s
	}
	return canon
}

func (b *builder) paramFilterPG(f backend.Filter, vals []any, canon []string, numeric bool) (frag, error) {
	name := f.Name
	pj := cat(`(data->'Params'->CAST(`, arg{name}, ` AS text))`)
	ptext := cat(`(data->'Params'->>CAST(`, arg{name}, ` AS text))`)
	eqs := func() []frag {
		out := make([]frag, len(vals))
		for i := range vals {
			out[i] = cat("CAST(", arg{canon[i]}, " AS jsonb)")
		}
		return out
	}
	switch f.Op {
	case backend.OpEq:
		return cat(pj, " = ", eqs()[0]), nil
	case backend.OpNe:
		return not(cat(pj, " = ", eqs()[0])), nil
	case backend.OpIn:
		return cat(pj, " IN (", join(eqs(), ", "), ")"), nil
	case backend.OpNin:
		return not(cat(pj, " IN (", join(eqs(), ", "), ")")), nil
	case backend.OpRe:
		return b.regex(ptext, f.Values[0]), nil
	}
	var e frag
	typed := make([]any, len(vals))
	if numeric {
		e = cat(`(CASE WHEN jsonb_typeof(`, pj, `) = 'number' THEN (`, ptext, `)::numeric END)`)
		for i, v := range vals {
			typed[i] = number(v.(json.Number))
		}
	} else {
		e = cat("(", ptext, ` COLLATE "C")`)
		for i, v := range vals {
			typed[i] = textForm(v, canon[i])
		}
	}
	return scalar(f.Op, e, typed), nil
}

// paramFilterSQLite reads the param through json_each, which exposes each
// value's JSON type; the key is bound, so names with '/' or '.' need no
// JSON-path quoting.
func (b *builder) paramFilterSQLite(f backend.Filter, vals []any, canon []string, numeric bool) (frag, error) {
	exists := func(cond frag) frag {
		return cat(`EXISTS (SELECT 1 FROM json_each(data, '$.Params') AS p WHERE p.key = `, arg{f.Name}, ` AND (`, cond, `))`)
	}
	eq := func(i int) frag {
		switch v := vals[i].(type) {
		case string:
			return cat(`p.type = 'text' AND p.value = `, arg{v})
		case json.Number:
			return cat(`p.type IN ('integer', 'real') AND p.value = `, arg{number(v)})
		case bool:
			if v {
				return raw(`p.type = 'true'`)
			}
			return raw(`p.type = 'false'`)
		case nil:
			return raw(`p.type = 'null'`)
		}
		return cat(`p.type IN ('object', 'array') AND json(p.value) = json(`, arg{canon[i]}, `)`)
	}
	anyEq := func() frag {
		out := make([]frag, len(vals))
		for i := range vals {
			out[i] = cat("(", eq(i), ")")
		}
		return join(out, " OR ")
	}
	ptext := raw(`(CASE p.type WHEN 'true' THEN 'true' WHEN 'false' THEN 'false' WHEN 'null' THEN NULL ELSE CAST(p.value AS TEXT) END)`)
	switch f.Op {
	case backend.OpEq, backend.OpIn:
		return exists(anyEq()), nil
	case backend.OpNe, backend.OpNin:
		return cat("NOT ", exists(anyEq())), nil
	case backend.OpRe:
		return exists(b.regex(ptext, f.Values[0])), nil
	}
	var e frag
	typed := make([]any, len(vals))
	guard := raw(`p.type IN ('integer', 'real')`)
	if numeric {
		e = raw(`p.value`)
		for i, v := range vals {
			typed[i] = number(v.(json.Number))
		}
	} else {
		e = ptext
		guard = raw(`p.type <> 'null'`)
		for i, v := range vals {
			typed[i] = textForm(v, canon[i])
		}
	}
	switch f.Op {
	case backend.OpExcept:
		return cat("NOT ", exists(cat(guard, " AND ", scalar(backend.OpBetween, e, typed)))), nil
	}
	return exists(cat(guard, " AND ", scalar(f.Op, e, typed))), nil
}

// visible restricts rows to keys; the keys travel as one bound JSON array so
// that any number of them fits in one parameter.
func (b *builder) visible(keys []string) (frag, error) {
	if keys == nil {
		return frag{}, nil
	}
	if len(keys) == 0 {
		return raw("1 = 0"), nil
	}
	js, err := json.Marshal(keys)
	if err != nil {
		return frag{}, fmt.Errorf("encoding visible keys: %w", err)
	}
	if b.s.pg() {
		return cat(`"key" IN (SELECT jsonb_array_elements_text(CAST(`, arg{string(js)}, ` AS jsonb)))`), nil
	}
	return cat(`"key" IN (SELECT value FROM json_each(`, arg{string(js)}, `))`), nil
}

// where builds the filter conditions (without Visible) of q.
func (b *builder) where(q backend.Query) (frag, error) {
	var conds []frag
	for _, f := range q.Filters {
		c, err := b.filter(f)
		if err != nil {
			return frag{}, err
		}
		conds = append(conds, cat("(", c, ")"))
	}
	return join(conds, " AND "), nil
}

func and(fs ...frag) frag {
	var keep []frag
	for _, f := range fs {
		if f.sql != "" {
			keep = append(keep, f)
		}
	}
	if len(keep) == 0 {
		return frag{}
	}
	return join(keep, " AND ")
}

func whereClause(f frag) frag {
	if f.sql == "" {
		return frag{}
	}
	return cat(" WHERE ", f)
}

func (b *builder) orderBy(q backend.Query) (string, error) {
	dir, nulls := " ASC", " NULLS FIRST"
	if q.Reverse {
		dir, nulls = " DESC", " NULLS LAST"
	}
	var parts []string
	for _, name := range q.Sort {
		idx, ok := b.kind.Indexes[name]
		if !ok {
			return "", notAcceptable(b.kind.Prefix, "Filter not found: %s", name)
		}
		if idx.Unordered || idx.Type == backend.IndexList || idx.Type == backend.IndexMap {
			return "", notAcceptable(b.kind.Prefix, "Cannot sort on %s", name)
		}
		e := b.indexExpr(idx)
		if e.sql == `"key"` {
			parts = append(parts, e.sql+dir)
			continue
		}
		parts = append(parts, e.sql+dir+nulls)
	}
	parts = append(parts, `"key"`+dir)
	return " ORDER BY " + strings.Join(parts, ", "), nil
}

func (s *Store) count(ctx context.Context, prefix string, where frag) (int, error) {
	var n int64
	rows, err := s.conn(ctx).Raw(`SELECT count(*) FROM `+tableName(prefix)+whereClause(where).sql, whereClause(where).args...).Rows()
	if err != nil {
		return 0, s.dbErr(backend.ReadOp, prefix, "", err)
	}
	defer rows.Close()
	if rows.Next() {
		if err := rows.Scan(&n); err != nil {
			return 0, s.dbErr(backend.ReadOp, prefix, "", err)
		}
	}
	if err := rows.Err(); err != nil {
		return 0, s.dbErr(backend.ReadOp, prefix, "", err)
	}
	return int(n), nil
}

// List returns the page of objects matching q, the total number of objects
// of the kind visible to the caller (after q.Visible, before filters) and the
// number matching q's filters (before offset and limit). Filtering, sorting
// and paging all run in SQL.
func (s *Store) List(ctx context.Context, prefix string, q backend.Query) (recs []Record, total, matched int, err error) {
	return s.list(ctx, prefix, q, true)
}

// ListRevs is List without the documents: each Record holds its key and
// revision only, for a caller that keeps encoded objects by revision (the
// read cache, docs/design.md §14.6) and reads the few it lacks with
// GetMany.
func (s *Store) ListRevs(ctx context.Context, prefix string, q backend.Query) (recs []Record, total, matched int, err error) {
	return s.list(ctx, prefix, q, false)
}

// GetMany reads the objects of keys that exist, in key order.
func (s *Store) GetMany(ctx context.Context, prefix string, keys []string) ([]Record, error) {
	k, err := s.kind(prefix)
	if err != nil {
		return nil, err
	}
	vis, err := s.newBuilder(k).visible(keys)
	if err != nil {
		return nil, err
	}
	w := whereClause(vis)
	return s.scanRecords(s.conn(ctx).Raw(`SELECT "key", rev, data FROM `+tableName(prefix)+w.sql+` ORDER BY "key"`, w.args...), prefix)
}

func (s *Store) list(ctx context.Context, prefix string, q backend.Query, data bool) (recs []Record, total, matched int, err error) {
	k, err := s.kind(prefix)
	if err != nil {
		return nil, 0, 0, err
	}
	b := s.newBuilder(k)
	if q.KeyPaged(k) {
		if id, sorted := s.counts.id(prefix, q.Visible); sorted {
			if recs, err = s.visiblePage(ctx, k, prefix, q, data); err != nil {
				return nil, 0, 0, err
			}
			if total, err = s.visibleTotal(ctx, b, id, q.Visible); err != nil {
				return nil, 0, 0, err
			}
			return recs, total, total, nil
		}
	}
	filters, err := b.where(q)
	if err != nil {
		return nil, 0, 0, err
	}
	vis, err := b.visible(q.Visible)
	if err != nil {
		return nil, 0, 0, err
	}
	order, err := b.orderBy(q)
	if err != nil {
		return nil, 0, 0, err
	}
	w := whereClause(and(vis, filters))
	sql := `SELECT ` + columns(data) + ` FROM ` + tableName(prefix) + w.sql + order
	args := append([]any(nil), w.args...)
	switch {
	case q.Limit >= 0:
		sql += ` LIMIT ?`
		args = append(args, q.Limit)
		if q.Offset > 0 {
			sql += ` OFFSET ?`
			args = append(args, q.Offset)
		}
	case q.Offset > 0:
		if s.pg() {
			sql += ` OFFSET ?`
		} else {
			sql += ` LIMIT -1 OFFSET ?`
		}
		args = append(args, q.Offset)
	}
	recs, err = s.scanRows(s.conn(ctx).Raw(sql, args...), prefix, data)
	if err != nil {
		return nil, 0, 0, err
	}
	total, err = s.count(ctx, prefix, vis)
	if err != nil {
		return nil, 0, 0, err
	}
	switch {
	case filters.sql == "":
		matched = total
	case q.Limit < 0 && q.Offset == 0:
		matched = len(recs)
	default:
		matched, err = s.count(ctx, prefix, and(vis, filters))
		if err != nil {
			return nil, 0, 0, err
		}
	}
	return recs, total, matched, nil
}

// ClaimForUpdate, inside InTx, selects and locks up to n objects matching q
// that no other transaction holds (FOR UPDATE SKIP LOCKED on PostgreSQL),
// starting at a random key so that concurrent callers spread over the
// candidates. q's sort, offset and limit are ignored; Visible applies.
//
// The cost does not grow with the number of candidates (docs/design.md
// §11.3): the database walks the matching keys in key order from a random
// pivot, through the (Pool, PoolStatus, key) index for pool claims, and
// stops after n; when the walk reaches the last key it wraps around to the
// first. Sorting every candidate by random() instead read the whole pool
// for each claim. On SQLite the transaction itself is exclusive (one
// connection, BEGIN IMMEDIATE), so no row can be claimed twice.
func (s *Store) ClaimForUpdate(ctx context.Context, prefix string, q backend.Query, n int) ([]Record, error) {
	k, err := s.kind(prefix)
	if err != nil {
		return nil, err
	}
	if s.txFrom(ctx) == nil {
		return nil, backend.OpError(backend.EINTERNAL, backend.ReplaceOp, prefix, "", "ClaimForUpdate must run inside InTx")
	}
	if n <= 0 {
		return nil, nil
	}
	b := s.newBuilder(k)
	filters, err := b.where(q)
	if err != nil {
		return nil, err
	}
	vis, err := b.visible(q.Visible)
	if err != nil {
		return nil, err
	}
	pivot := randomPivot()
	recs, err := s.claimRange(ctx, prefix, and(vis, filters, cat(`"key" >= `, arg{pivot})), n)
	if err != nil || len(recs) >= n {
		return recs, err
	}
	rest, err := s.claimRange(ctx, prefix, and(vis, filters, cat(`"key" < `, arg{pivot})), n-len(recs))
	if err != nil {
		return nil, err
	}
	return append(recs, rest...), nil
}

// claimRange locks and reads up to n objects matching cond, the first in key
// order. The inner select takes the row locks over keys only; the outer one reads
// the claimed rows' documents.
func (s *Store) claimRange(ctx context.Context, prefix string, cond frag, n int) ([]Record, error) {
	w := whereClause(cond)
	inner := `SELECT "key" FROM ` + tableName(prefix) + w.sql + ` ORDER BY "key" LIMIT ?`
	if s.pg() {
		inner += ` FOR UPDATE SKIP LOCKED`
	}
	sql := `SELECT "key", rev, data FROM ` + tableName(prefix) + ` WHERE "key" IN (` + inner + `)`
	return s.scanRecords(s.conn(ctx).Raw(sql, append(w.args, n)...), prefix)
}

// randomPivot is where a claim starts walking the keys: 32 random hex
// digits, spread evenly over the UUID keys machines carry.
func randomPivot() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
