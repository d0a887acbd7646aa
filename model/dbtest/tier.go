//go:build !integration && !e2e

package dbtest

// postgresTier is false in the plain unit run: no test process starts PostgreSQL.
const postgresTier = false

// Backends returns the databases the store and handler tests run their assertions on: SQLite
// alone in the plain unit run, SQLite and PostgreSQL with the integration tag.
func Backends() []Backend {
	return []Backend{{"sqlite", SQLite}}
}
