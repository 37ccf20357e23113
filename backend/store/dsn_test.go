package store

import (
	"strings"
	"testing"
)

func TestParseDSN(t *testing.T) {
	tests := []struct {
		dsn, dialect, target, err string
	}{
		{"postgres://u:p@db/x", DialectPostgres, "postgres://u:p@db/x", ""},
		{"postgresql://db/x?sslmode=disable", DialectPostgres, "postgresql://db/x?sslmode=disable", ""},
		{"host=db user=pg password=S3cret dbname=x", DialectPostgres, "host=db user=pg password=S3cret dbname=x", ""},
		{"  dbname = x host=/run/postgresql", DialectPostgres, "  dbname = x host=/run/postgresql", ""},
		{"sqlite:/var/lib/provgate/p.db", DialectSQLite, "/var/lib/provgate/p.db", ""},
		{"sqlite://rel/p.db", DialectSQLite, "rel/p.db", ""},
		{"sqlite:", "", "", "needs a file path"},
		{"", "", "", "empty"},
		{"./provgate.db", "", "", "not a database DSN"},
		{"/var/lib/provgate.db", "", "", "not a database DSN"},
		{"mysql://u:hunter2@h/db", "", "", `unsupported scheme "mysql"`},
		{"host='unterminated password=S3cret", "", "", "malformed PostgreSQL keyword=value DSN"},
	}
	for _, tt := range tests {
		dialect, target, err := ParseDSN(tt.dsn)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("ParseDSN(%q) = %v, want error %q", tt.dsn, err, tt.err)
			}
			for _, pw := range []string{"S3cret", "hunter2"} {
				if err != nil && strings.Contains(err.Error(), pw) {
					t.Errorf("ParseDSN(%q): error shows the password: %v", tt.dsn, err)
				}
			}
			continue
		}
		if err != nil || dialect != tt.dialect || target != tt.target {
			t.Errorf("ParseDSN(%q) = %q, %q, %v; want %q, %q", tt.dsn, dialect, target, err, tt.dialect, tt.target)
		}
	}
}

func TestRedactDSN(t *testing.T) {
	tests := []struct{ dsn, want string }{
		{"postgres://app:S3cret@db:5432/x", "postgres://app:xxxxx@db:5432/x"},
		{"postgres://app@db/x?password=S3cret&sslmode=disable", "postgres://app@db/x?password=xxxxx&sslmode=disable"},
		{"host=db user=pg password=S3cret dbname=x", "host=db user=pg password=xxxxx dbname=x"},
		{"host=db password = 'S3 cret\\' x' dbname=x", "host=db password=xxxxx dbname=x"},
		{"PASSWORD=S3cret host=db", "password=xxxxx host=db"},
		{"host=db dbname=x", "host=db dbname=x"},
		{"sqlite:/tmp/p.db", "sqlite:/tmp/p.db"},
		{"", ""},
	}
	for _, tt := range tests {
		got := RedactDSN(tt.dsn)
		if got != tt.want {
			t.Errorf("RedactDSN(%q) = %q, want %q", tt.dsn, got, tt.want)
		}
		if strings.Contains(got, "S3") {
			t.Errorf("RedactDSN(%q) shows the password: %q", tt.dsn, got)
		}
	}
}

func TestDescribePostgresKeywordValue(t *testing.T) {
	where, pw := describePostgres("host=db.example port=6543 dbname=prov user=pg password=S3cret")
	if where != "db.example:6543/prov" || pw != "S3cret" {
		t.Fatalf("describePostgres = %q, %q", where, pw)
	}
}
