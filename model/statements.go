package model

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/schema"
)

// The statements of every delivery and API request run prepared: bun formats arguments into the
// SQL text, so SQLite parsed each of them anew on every call (15-17% of webhookd's CPU per delivery
// in a profile, issue 21). Each is written once with ? placeholders; PostgreSQL gets $1..$n.
// database/sql prepares a *sql.Stmt on each pool connection the first time it runs there, and
// reuses it after; a transaction reuses the one prepared on its connection (Tx.StmtContext).
const (
	authenticateSQL = `SELECT k.id AS key_id, k.key_hash, a.id, a.owner_email, a.created_at FROM api_keys AS k ` +
		`JOIN accounts AS a ON a.id = k.account_id WHERE (k.lookup = ?) AND (k.revoked_at IS NULL)`

	deliveryTargetSQL = `SELECT "webhook"."id", "webhook"."account_id", "webhook"."variant", "webhook"."url", ` +
		`"webhook"."event_type", "webhook"."status", "webhook"."secret", "webhook"."created_at", "webhook"."updated_at", ` +
		`"webhook"."last_triggered_at", "webhook"."last_status", "webhook"."failure_count", "webhook"."disabled_at", ` +
		`"webhook"."disabled_reason", "webhook"."failing_since", "webhook"."exhausted_count", "webhook"."rate_limit", ` +
		`"webhook"."max_in_flight", "webhook"."deleted_at", ` +
		`e.id AS ev_id, e.account_id AS ev_account_id, e.variant AS ev_variant, e.event_type AS ev_type, ` +
		`e.data AS ev_data, e.occurred_at AS ev_occurred_at, e.created_at AS ev_created_at, ` +
		`p.id AS prev_id, p.secret AS prev_secret, p.expires_at AS prev_expires_at ` +
		`FROM "webhooks" AS "webhook" JOIN deliveries AS d ON d.webhook_id = webhook.id ` +
		`JOIN events AS e ON e.id = d.event_id LEFT JOIN webhook_previous_secrets AS p ON p.webhook_id = webhook.id ` +
		`WHERE (d.id = ?) ORDER BY p.expires_at DESC, p.id DESC`

	subscribersSQL = `SELECT "webhook"."id", "webhook"."url" FROM "webhooks" AS "webhook" ` +
		`WHERE (account_id = ?) AND (variant = ?) AND (event_type = ?) AND "webhook"."deleted_at" IS NULL ORDER BY id ASC`
	onlyWebhookSQL = `SELECT "webhook"."id", "webhook"."url" FROM "webhooks" AS "webhook" ` +
		`WHERE (account_id = ?) AND (variant = ?) AND (id = ?) AND "webhook"."deleted_at" IS NULL ORDER BY id ASC`

	// The inserts of one row: insertRow runs them, and adds returningID on PostgreSQL.
	insertEventSQL = `INSERT INTO "events" ("account_id", "variant", "event_type", "data", "idempotency_key", ` +
		`"request_hash", "matched", "occurred_at", "created_at") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`
	insertIdempotentEventSQL = `INSERT INTO "events" AS "event" ("account_id", "variant", "event_type", "data", ` +
		`"idempotency_key", "request_hash", "matched", "occurred_at", "created_at") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ` +
		`ON CONFLICT (account_id, variant, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING`
	returningID = ` RETURNING id`

	upsertAttemptSQL = `INSERT INTO "delivery_attempts" AS "attempt" ("delivery_id", "attempt", "url", "started_at", ` +
		`"status_code", "error_class", "error", "latency_ms", "response_body", "request_headers") ` +
		`VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (delivery_id, attempt) DO UPDATE ` +
		`SET url = EXCLUDED.url, started_at = EXCLUDED.started_at, status_code = EXCLUDED.status_code, ` +
		`error_class = EXCLUDED.error_class, error = EXCLUDED.error, latency_ms = EXCLUDED.latency_ms, ` +
		`response_body = EXCLUDED.response_body, request_headers = EXCLUDED.request_headers`
)

// hotStatements are the statements prepared together, the first time one of them runs outside a
// transaction: the ones above, the one-row inserts as insertRow runs them on PostgreSQL (pg) or
// SQLite, and each shape of an attempt's webhook update.
func hotStatements(pg bool) []string {
	stmts := []string{authenticateSQL, deliveryTargetSQL, subscribersSQL, onlyWebhookSQL, upsertAttemptSQL, attemptDeliverySQL}
	for _, insert := range []string{insertEventSQL, insertIdempotentEventSQL, insertDeliverySQL} {
		if pg {
			insert += returningID
		}
		stmts = append(stmts, insert)
	}
	for _, v := range Variants {
		for _, success := range []bool{true, false} {
			query, _ := webhookOutcomeSQL(v.Spec(), success, 0, time.Time{}, time.Time{})
			stmts = append(stmts, query)
		}
	}
	return stmts
}

// preparedStatements is one database's hot statements, by their ? text.
type preparedStatements map[string]*sql.Stmt

// prepared holds each database's preparedStatements by its *sql.DB, which every bun.DB, Tx and
// Conn of it share: the query functions take bun.IDB, and a bun.Tx does not expose its DB
// otherwise. Entries stay for the life of the process: one per database opened.
var prepared struct {
	sync.Mutex
	byDB sync.Map // *sql.DB -> preparedStatements
}

// preparedOn returns the statements prepared on db's database, preparing them when db is not a
// transaction; in one, it returns nil until then. Preparing takes a pool connection besides the
// transaction's: on SQLite, a pool whose every connection holds a transaction waiting for the write
// lock would never hand one out.
func preparedOn(ctx context.Context, db bun.IDB, bdb *bun.DB) (preparedStatements, error) {
	if stmts, ok := prepared.byDB.Load(bdb.DB); ok {
		return stmts.(preparedStatements), nil
	}
	if _, ok := db.(*bun.DB); !ok {
		return nil, nil
	}
	prepared.Lock()
	defer prepared.Unlock()
	if stmts, ok := prepared.byDB.Load(bdb.DB); ok {
		return stmts.(preparedStatements), nil
	}
	stmts := preparedStatements{}
	for _, query := range hotStatements(IsPostgres(bdb)) {
		text := query
		if IsPostgres(bdb) {
			text = numberPlaceholders(query)
		}
		stmt, err := bdb.DB.PrepareContext(ctx, text)
		if err != nil {
			for _, s := range stmts {
				_ = s.Close()
			}
			return nil, fmt.Errorf("prepare %q: %w", query, err)
		}
		stmts[query] = stmt
	}
	prepared.byDB.Store(bdb.DB, stmts)
	return stmts, nil
}

// numberPlaceholders turns ? placeholders into PostgreSQL's $1..$n. The statements above hold no
// other question mark.
func numberPlaceholders(query string) string {
	var b strings.Builder
	n := 0
	for _, r := range query {
		if r != '?' {
			b.WriteRune(r)
			continue
		}
		n++
		b.WriteByte('$')
		b.WriteString(strconv.Itoa(n))
	}
	return b.String()
}

// preparedStmt returns query's prepared statement on db (bound to db's transaction when db is
// one), or nil when there is none yet.
func preparedStmt(ctx context.Context, db bun.IDB, bdb *bun.DB, query string) (*sql.Stmt, error) {
	stmts, err := preparedOn(ctx, db, bdb)
	if err != nil || stmts == nil {
		return nil, err
	}
	stmt, ok := stmts[query]
	if !ok {
		return nil, fmt.Errorf("statement %q is not prepared", query)
	}
	switch tx := db.(type) {
	case bun.Tx:
		return tx.StmtContext(ctx, stmt), nil
	case *bun.Tx:
		return tx.StmtContext(ctx, stmt), nil
	case *bun.DB:
		return stmt, nil
	}
	return nil, nil
}

// bunDB returns the bun.DB that db is, or belongs to.
func bunDB(db bun.IDB) *bun.DB {
	if bdb, ok := db.(*bun.DB); ok {
		return bdb
	}
	return db.NewRaw("").DB()
}

// queryPrepared runs query, one of hotStatements, on db and scans its rows into dest as bun does.
// Without a prepared statement (a transaction before any has been prepared, or a bun.Conn) bun
// formats it as before.
func queryPrepared(ctx context.Context, db bun.IDB, dest any, query string, args ...any) error {
	bdb := bunDB(db)
	stmt, err := preparedStmt(ctx, db, bdb, query)
	if err != nil {
		return err
	}
	var rows *sql.Rows
	if stmt == nil {
		rows, err = db.QueryContext(ctx, query, args...)
	} else {
		var driverArgs []any
		if driverArgs, err = sqlArgs(bdb.Dialect(), args); err != nil {
			return err
		}
		rows, err = stmt.QueryContext(ctx, driverArgs...)
	}
	if err != nil {
		return err
	}
	return bdb.ScanRows(ctx, rows, dest)
}

// execPrepared runs query, one of hotStatements, on db, as queryPrepared does.
func execPrepared(ctx context.Context, db bun.IDB, query string, args ...any) (sql.Result, error) {
	bdb := bunDB(db)
	stmt, err := preparedStmt(ctx, db, bdb, query)
	if err != nil {
		return nil, err
	}
	if stmt == nil {
		return db.ExecContext(ctx, query, args...)
	}
	driverArgs, err := sqlArgs(bdb.Dialect(), args)
	if err != nil {
		return nil, err
	}
	return stmt.ExecContext(ctx, driverArgs...)
}

// insertRow runs insert, one of the one-row inserts of hotStatements, on db and returns the new
// row's id, or 0 when it inserted none (ON CONFLICT DO NOTHING). PostgreSQL returns the id (RETURNING
// id). SQLite gives the connection's last rowid instead: it runs RETURNING as a trigger, and a
// statement with a trigger in a transaction keeps a statement journal, a 64 KiB buffer allocated and
// freed with every page the insert touched copied into it, 8% of webhookd's CPU per delivery in a
// profile (docs/performance.md).
func insertRow(ctx context.Context, db bun.IDB, insert string, args ...any) (int64, error) {
	if IsPostgres(db) {
		var ids []int64
		if err := queryPrepared(ctx, db, &ids, insert+returningID, args...); err != nil || len(ids) == 0 {
			return 0, err
		}
		return ids[0], nil
	}
	res, err := execPrepared(ctx, db, insert, args...)
	if err != nil {
		return 0, err
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return 0, err
	}
	return res.LastInsertId()
}

// errStringNUL refuses a string with a NUL byte, as bun does when it formats one: PostgreSQL's
// driver would drop the byte silently and SQLite store it.
var errStringNUL = errors.New("string contains a NUL byte (0x00)")

// sqlArgs turns args into what the drivers bind, so that a row reads and compares as it did when
// bun formatted the same values into the text.
func sqlArgs(d schema.Dialect, args []any) ([]any, error) {
	out := make([]any, len(args))
	for i, arg := range args {
		v, err := sqlArg(d, arg)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

// sqlArg binds a time as the text bun's dialect writes (UTC, microseconds, "+00:00"): SQLite stores
// it as that text and compares times as text, and the drivers' own formats differ (nanoseconds, the
// time's own zone). A nil pointer is NULL.
func sqlArg(d schema.Dialect, arg any) (any, error) {
	switch v := arg.(type) {
	case int64:
		return v, nil
	case int:
		return int64(v), nil
	case string:
		if strings.IndexByte(v, 0) >= 0 {
			return nil, errStringNUL
		}
		return v, nil
	case Variant:
		return sqlArg(d, string(v))
	case time.Time:
		// AppendTime writes a quoted literal; the quotes are not part of the value.
		return strings.Trim(string(d.AppendTime(nil, v)), "'"), nil
	case *string:
		if v == nil {
			return nil, nil
		}
		return sqlArg(d, *v)
	case *int:
		if v == nil {
			return nil, nil
		}
		return int64(*v), nil
	case *time.Time:
		if v == nil {
			return nil, nil
		}
		return sqlArg(d, *v)
	}
	return nil, fmt.Errorf("no SQL argument for a %T", arg)
}
