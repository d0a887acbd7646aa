//go:build integration || e2e

package dbtest

// postgresTier is true in the integration and system tiers, which run on PostgreSQL too.
const postgresTier = true

// Backends returns both supported databases, so a test can run the same assertions on each.
func Backends() []Backend {
	return []Backend{{"sqlite", SQLite}, {"postgres", Postgres}}
}
