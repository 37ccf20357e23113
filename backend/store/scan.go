package store

import (
	"database/sql"

	"gorm.io/gorm"
)

// queryRows runs db and scans each of its rows into a T with scan. The first
// error (of the query, of a scan or of the iteration) is returned as it is,
// for the caller to report with dbErr.
func queryRows[T any](db *gorm.DB, scan func(*sql.Rows, *T) error) ([]T, error) {
	rows, err := db.Rows()
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		var v T
		if err := scan(rows, &v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// queryValue runs db and scans the single column of its first row; the zero
// T when there is no row. Errors are returned as they are, as by queryRows.
func queryValue[T any](db *gorm.DB) (T, error) {
	var v, zero T
	rows, err := db.Rows()
	if err != nil {
		return zero, err
	}
	defer rows.Close()
	if rows.Next() {
		if err := rows.Scan(&v); err != nil {
			return zero, err
		}
	}
	if err := rows.Err(); err != nil {
		return zero, err
	}
	return v, nil
}
