package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/uptrace/bun/driver/pgdriver"
)

// PostgreSQL's statements by cost (issue 45): with -postgres-stats, each tier starts from reset
// pg_stat_statements counters, and the report lists, per delivery, the statements that took the
// most execution time, and each database's calls and time, so that Temporal's statements and
// webhookd's are apart. Execution time is the backend's time in the executor, not all its CPU time:
// parsing, planning, the protocol and commits come on top (the postgres/<database> CPU shares).

// pgStatements is the connection to the database where pg_stat_statements is installed.
type pgStatements struct{ db *sql.DB }

func openPGStatements(dsn string) *pgStatements {
	if dsn == "" {
		return nil
	}
	return &pgStatements{db: sql.OpenDB(pgdriver.NewConnector(pgdriver.WithDSN(dsn)))}
}

func (p *pgStatements) close() {
	if p != nil {
		_ = p.db.Close()
	}
}

// reset zeroes the counters; a failure is printed, not fatal: the figures are then n/a.
func (p *pgStatements) reset(ctx context.Context) {
	if p == nil {
		return
	}
	if _, err := p.db.ExecContext(ctx, "SELECT pg_stat_statements_reset()"); err != nil {
		fmt.Printf("  pg_stat_statements: reset: %v\n", err)
	}
}

// report is the statements since the reset, per delivery: each database's calls and execution
// time, then the top statements.
func (p *pgStatements) report(ctx context.Context, n int) string {
	if p == nil || n == 0 {
		return ""
	}
	var b strings.Builder
	per := float64(n)
	err := p.each(ctx, `SELECT d.datname, sum(s.calls)::float8, sum(s.total_exec_time)
		FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
		GROUP BY d.datname ORDER BY 3 DESC`, func(rows *sql.Rows) error {
		var db string
		var calls, ms float64
		if err := rows.Scan(&db, &calls, &ms); err != nil {
			return err
		}
		fmt.Fprintf(&b, "  - %s: %.2f statements, %.3f ms of execution per delivery\n", db, calls/per, ms/per)
		return nil
	})
	if err == nil {
		err = p.each(ctx, `SELECT d.datname, s.calls::float8, s.total_exec_time, s.rows::float8, regexp_replace(s.query, '\s+', ' ', 'g')
			FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
			WHERE d.datname <> 'postgres' ORDER BY s.total_exec_time DESC LIMIT 30`, func(rows *sql.Rows) error {
			var db, query string
			var calls, ms, rowCount float64
			if err := rows.Scan(&db, &calls, &ms, &rowCount, &query); err != nil {
				return err
			}
			if len(query) > 110 {
				query = query[:110] + "..."
			}
			fmt.Fprintf(&b, "    %s: %.2f calls, %.3f ms, %.1f rows per delivery: %s\n", db, calls/per, ms/per, rowCount/per, query)
			return nil
		})
	}
	if err != nil {
		fmt.Fprintf(&b, "  pg_stat_statements: %v\n", err)
	}
	return b.String()
}

// each runs query and calls scan on each row.
func (p *pgStatements) each(ctx context.Context, query string, scan func(*sql.Rows) error) (err error) {
	rows, err := p.db.QueryContext(ctx, query)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, rows.Close()) }()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}
