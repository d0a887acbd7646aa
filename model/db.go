package model

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect"
	"github.com/uptrace/bun/dialect/pgdialect"
	"github.com/uptrace/bun/dialect/sqlitedialect"
	"github.com/uptrace/bun/driver/pgdriver"
	"github.com/uptrace/bun/driver/sqliteshim"
)

// Connection pool sizes: PostgreSQL's, and SQLite's, whose writers queue on one lock anyway.
const (
	maxPostgresConns = 20
	maxSQLiteConns   = 8
)

// Open connects to the database named by dsn: "sqlite:<path>" for the embedded development store, or
// "postgres://..." (also "postgresql://...") for PostgreSQL through pgdriver. It does not migrate.
// The caller closes the DB, which closes the statements prepared on it.
func Open(ctx context.Context, dsn string) (*DB, error) {
	var db *bun.DB
	switch {
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		if _, err := url.Parse(dsn); err != nil {
			return nil, fmt.Errorf("database url: %w", err)
		}
		sqldb := sql.OpenDB(pgdriver.NewConnector(pgdriver.WithDSN(dsn)))
		// As many idle as open: with fewer, every burst past the idle count closes connections
		// after use and opens new ones (a PostgreSQL backend each) for the next. Idle ones still
		// close after five minutes.
		sqldb.SetMaxOpenConns(maxPostgresConns)
		sqldb.SetMaxIdleConns(maxPostgresConns)
		sqldb.SetConnMaxIdleTime(5 * time.Minute)
		db = bun.NewDB(sqldb, pgdialect.New())
	case strings.HasPrefix(dsn, "sqlite:"):
		path := strings.TrimPrefix(strings.TrimPrefix(dsn, "sqlite:"), "//")
		path, options, _ := strings.Cut(path, "?")
		if path == "" {
			return nil, fmt.Errorf("database url %q: missing file path", dsn)
		}
		synchronous, err := sqliteSynchronous(options)
		if err != nil {
			return nil, fmt.Errorf("database url %q: %w", dsn, err)
		}
		if dir := filepath.Dir(path); dir != "." {
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return nil, fmt.Errorf("create database directory: %w", err)
			}
		}
		// WAL lets readers run beside the single writer; busy_timeout makes writers queue instead of
		// failing; immediate transactions take the write lock up front so two read-then-write
		// transactions cannot deadlock on the upgrade.
		q := url.Values{}
		q.Add("_pragma", "busy_timeout(10000)")
		q.Add("_pragma", "journal_mode(WAL)")
		q.Add("_pragma", "foreign_keys(1)")
		q.Add("_pragma", "synchronous("+synchronous+")")
		q.Set("_txlock", "immediate")
		sqldb, err := sql.Open(sqliteshim.ShimName, "file:"+path+"?"+q.Encode())
		if err != nil {
			return nil, fmt.Errorf("open sqlite: %w", err)
		}
		// database/sql keeps two idle connections unless told: the other six were closed after
		// each use and opened again, pragmas and all, which was 15% of webhookd's CPU per delivery
		// in a profile (docs/performance-history.md).
		sqldb.SetMaxOpenConns(maxSQLiteConns)
		sqldb.SetMaxIdleConns(maxSQLiteConns)
		db = bun.NewDB(sqldb, sqlitedialect.New())
	default:
		return nil, fmt.Errorf("database url %q: scheme must be sqlite: or postgres://", redactDSN(dsn))
	}
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := db.PingContext(pingCtx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("connect to database: %w", err)
	}
	return &DB{DB: db, stmts: newStatements(db)}, nil
}

// sqliteSynchronous reads the options of a sqlite: URL (the part after "?"): synchronous=normal
// (the default) or full (docs/operations.md, "Durability"), nothing else.
func sqliteSynchronous(options string) (string, error) {
	q, err := url.ParseQuery(options)
	if err != nil {
		return "", fmt.Errorf("options: %w", err)
	}
	mode := "NORMAL"
	for name, values := range q {
		switch {
		case name != "synchronous":
			return "", fmt.Errorf("unknown option %q (the one option is synchronous=normal or full)", name)
		case len(values) != 1 || (!strings.EqualFold(values[0], "normal") && !strings.EqualFold(values[0], "full")):
			return "", fmt.Errorf("synchronous=%s: want normal or full", strings.Join(values, ","))
		}
		mode = strings.ToUpper(values[0])
	}
	return mode, nil
}

// IsPostgres reports whether db talks to PostgreSQL.
func IsPostgres(db bun.IDB) bool {
	return db.Dialect().Name() == dialect.PG
}

// redactDSN hides a password so a configuration error can be logged.
func redactDSN(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil || u.User == nil {
		return dsn
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}

// ScanOne runs q, a select of one row into dst, and returns dst; ErrNotFound when there is no such
// row (or it is another account's: the query's scope decides).
func ScanOne[T any](ctx context.Context, dst *T, q *bun.SelectQuery, what string) (*T, error) {
	err := q.Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", what, err)
	}
	return dst, nil
}

// inTx runs fn in a transaction: db's own when db already is one, else a new one. bun would nest a
// savepoint in a transaction it is handed (two more statements per call); callers that join a
// domain change's transaction (InsertEvent) need none, since any error of theirs rolls the whole
// change back.
func inTx(ctx context.Context, db bun.IDB, fn func(ctx context.Context, tx bun.Tx) error) error {
	switch tx := db.(type) {
	case bun.Tx:
		return fn(ctx, tx)
	case *bun.Tx:
		return fn(ctx, *tx)
	}
	return db.RunInTx(ctx, nil, fn)
}
