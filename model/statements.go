package model

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/schema"
)

// The statements of every delivery and API request run prepared: bun formats arguments into the
// SQL text, so SQLite parsed each of them anew on every call (15-17% of webhookd's CPU per delivery
// in a profile, issue 21). Each is built once per database, its column lists taken from bun's schema
// of the model it reads or writes, with ? placeholders; PostgreSQL gets $1..$n. database/sql
// prepares a *sql.Stmt on each pool connection the first time it runs there, and reuses it after;
// a transaction reuses the one prepared on its connection (Tx.StmtContext).

// DB is an open database: bun's handle and its hot statements, prepared the first time one of them
// runs outside a transaction. Open makes it; whoever opened it closes it, statements and all.
type DB struct {
	*bun.DB
	stmts *statements
}

// Close closes the prepared statements, then the database.
func (db *DB) Close() error {
	return errors.Join(db.stmts.close(), db.DB.Close())
}

// statements are one database's hot statements: their texts, and once prepared, each by its text.
type statements struct {
	bdb  *bun.DB
	text hotText

	mu       sync.Mutex
	prepared map[string]*sql.Stmt // nil until prepare
	closed   bool
}

// hotText holds the texts of the statements, with ? placeholders, and the fields whose values the
// one-row inserts bind, in their columns' order.
type hotText struct {
	authenticate, deliveryTarget, subscribers, onlyWebhook, filters   string
	insertEvent, insertIdempotentEvent, insertDelivery, upsertAttempt string
	eventFields, deliveryFields, attemptFields                        []*schema.Field
}

// returningID is added to a one-row insert on PostgreSQL (insertRow).
const returningID = ` RETURNING id`

func newStatements(bdb *bun.DB) *statements {
	return &statements{bdb: bdb, text: newHotText(bdb)}
}

func newHotText(bdb *bun.DB) hotText {
	webhooks, events := bdb.Table(reflect.TypeFor[Webhook]()), bdb.Table(reflect.TypeFor[Event]())
	accounts, secrets := bdb.Table(reflect.TypeFor[Account]()), bdb.Table(reflect.TypeFor[PreviousSecret]())
	gen := bdb.QueryGen()
	var t hotText
	t.authenticate = `SELECT k.id AS key_id, k.key_hash, k.scope AS key_scope, ` + columns(gen, accounts, "a", "") + ` FROM api_keys AS k ` +
		`JOIN accounts AS a ON a.id = k.account_id WHERE (k.lookup = ?) AND (k.revoked_at IS NULL)`
	// deliveryTargetRow's columns: the webhook's, and those of its event and previous secrets
	// under their prefixes, and the delivery's state and attempts.
	t.deliveryTarget = `SELECT ` + columns(gen, webhooks, "webhook", "") + `, ` + columns(gen, events, "e", "ev_") + `, ` +
		columns(gen, secrets, "p", "prev_") + `, d.state AS d_state, d.attempts AS d_attempts, d.lane_seq AS d_lane_seq` +
		` FROM "webhooks" AS "webhook" JOIN deliveries AS d ON d.webhook_id = webhook.id ` +
		`JOIN events AS e ON e.id = d.event_id LEFT JOIN webhook_previous_secrets AS p ON p.webhook_id = webhook.id ` +
		`WHERE (d.id = ?) ORDER BY p.expires_at DESC, p.id DESC`
	// A subscriber is read for its id, its URL, its payload filter, the version of its event
	// type that it gets (the filter judges that version's body) and its ordering key only. bun writes the query,
	// and the placeholders into it as they are.
	subscribers := func(by string) string {
		return bdb.NewSelect().Model((*Webhook)(nil)).Column("id", "url", "filter", "event_type", "version", "ordering_key").Where("account_id = ?", bun.Safe("?")).
			Where("variant = ?", bun.Safe("?")).Where(by+" = ?", bun.Safe("?")).OrderExpr("id ASC").String()
	}
	t.subscribers, t.onlyWebhook = subscribers("event_type"), subscribers("id")
	// The payload filters of an event type's subscribers, with the version each receives, in the
	// order of the subscribers (JudgeFilters). Not grouped: sorting the texts cost more than
	// judging a text twice, which Verdicts does not.
	t.filters = bdb.NewSelect().Model((*Webhook)(nil)).Column("filter", "version").Where("account_id = ?", bun.Safe("?")).
		Where("variant = ?", bun.Safe("?")).Where("event_type = ?", bun.Safe("?")).Where("filter IS NOT NULL").
		OrderExpr("id ASC").String()

	t.insertEvent, t.eventFields = insert(gen, events, "")
	idempotent, _ := insert(gen, events, "event")
	t.insertIdempotentEvent = idempotent + ` ON CONFLICT (account_id, variant, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING`
	t.insertDelivery, t.deliveryFields = insert(gen, bdb.Table(reflect.TypeFor[Delivery]()), "")
	upsert, attemptFields := insert(gen, bdb.Table(reflect.TypeFor[Attempt]()), "attempt")
	t.attemptFields = attemptFields
	// A retried activity may record the same attempt twice; the later outcome wins.
	sets := make([]string, 0, len(t.attemptFields))
	for _, f := range t.attemptFields {
		if f.Name != "delivery_id" && f.Name != "attempt" {
			sets = append(sets, f.Name+" = EXCLUDED."+f.Name)
		}
	}
	t.upsertAttempt = upsert + ` ON CONFLICT (delivery_id, attempt) DO UPDATE SET ` + strings.Join(sets, ", ")
	return t
}

// columns lists table's columns as alias.column, or alias.column AS prefix_column when prefix is
// set: what bun scans into the model, or into one embedded with that prefix (bun:"embed:prefix").
func columns(gen schema.QueryGen, table *schema.Table, alias, prefix string) string {
	cols := make([]string, len(table.Fields))
	for i, f := range table.Fields {
		cols[i] = string(gen.AppendIdent(nil, alias)) + "." + string(f.SQLName)
		if prefix != "" {
			cols[i] += " AS " + string(gen.AppendIdent(nil, prefix+f.Name))
		}
	}
	return strings.Join(cols, ", ")
}

// insert is the insert of one row of table (with that alias, if any) as bun writes it: every column
// but an autoincremented primary key. It returns the fields whose values it binds, in order.
func insert(gen schema.QueryGen, table *schema.Table, alias string) (string, []*schema.Field) {
	var fields []*schema.Field
	var cols []string
	for _, f := range table.Fields {
		if f.IsPK && f.AutoIncrement {
			continue
		}
		fields = append(fields, f)
		cols = append(cols, string(f.SQLName))
	}
	into := string(table.SQLName)
	if alias != "" {
		into += " AS " + string(gen.AppendIdent(nil, alias))
	}
	return `INSERT INTO ` + into + ` (` + strings.Join(cols, ", ") + `) VALUES (` +
		strings.Repeat("?, ", len(cols)-1) + `?)`, fields
}

// fieldValues returns the values of fields in row, a pointer to a struct, as bun writes them: NULL
// for the zero value of a nullzero field (a nil pointer binds as NULL anyway).
func fieldValues(fields []*schema.Field, row any) []any {
	v := reflect.ValueOf(row).Elem()
	args := make([]any, len(fields))
	for i, f := range fields {
		if !f.NullZero || !f.HasZeroValue(v) {
			args[i] = f.Value(v).Interface()
		}
	}
	return args
}

// all is every statement of text, as prepare prepares them: the one-row inserts as insertRow runs
// them on PostgreSQL (pg) or SQLite, and each shape of an attempt's webhook update.
func (t hotText) all(pg bool) []string {
	stmts := []string{t.authenticate, t.deliveryTarget, t.subscribers, t.onlyWebhook, t.filters, t.upsertAttempt, attemptDeliverySQL}
	for _, insert := range []string{t.insertEvent, t.insertIdempotentEvent, t.insertDelivery} {
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

// statementsOf returns the statements of db when it is a DB, or ones that are never prepared (the
// queries then run formatted by bun) when it is a bare bun handle or a transaction: those carry no
// statements of their own.
func statementsOf(db bun.IDB) *statements {
	if d, ok := db.(*DB); ok {
		return d.stmts
	}
	return newStatements(bunDB(db))
}

// bunDB returns the bun.DB that db is, or belongs to.
func bunDB(db bun.IDB) *bun.DB {
	switch d := db.(type) {
	case *bun.DB:
		return d
	case *DB:
		return d.DB
	}
	return db.NewRaw("").DB()
}

// prepare prepares the statements on their database, unless db (what they are about to run on) is a
// transaction or s is not its database's own: preparing takes a pool connection besides the
// transaction's, and on SQLite a pool whose every connection holds a transaction waiting for the
// write lock would never hand one out.
func (s *statements) prepare(ctx context.Context, db bun.IDB) error {
	if _, ok := db.(*DB); !ok {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.prepared != nil || s.closed {
		return nil
	}
	pg := IsPostgres(s.bdb)
	prepared := map[string]*sql.Stmt{}
	for _, query := range s.text.all(pg) {
		text := query
		if pg {
			text = numberPlaceholders(query)
		}
		stmt, err := s.bdb.DB.PrepareContext(ctx, text)
		if err != nil {
			for _, done := range prepared {
				_ = done.Close()
			}
			return fmt.Errorf("prepare %q: %w", query, err)
		}
		prepared[query] = stmt
	}
	s.prepared = prepared
	return nil
}

// isPrepared reports whether the statements are prepared.
func (s *statements) isPrepared() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.prepared != nil
}

func (s *statements) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	var errs []error
	for _, stmt := range s.prepared {
		errs = append(errs, stmt.Close())
	}
	s.prepared = nil
	return errors.Join(errs...)
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

// stmt returns query's prepared statement for db (bound to db's transaction when db is one),
// preparing them when db is s's own database; nil when there is none.
func (s *statements) stmt(ctx context.Context, db bun.IDB, query string) (*sql.Stmt, error) {
	if err := s.prepare(ctx, db); err != nil {
		return nil, err
	}
	s.mu.Lock()
	stmt, ok := s.prepared[query]
	prepared := s.prepared != nil
	s.mu.Unlock()
	if !prepared {
		return nil, nil
	}
	if !ok {
		return nil, fmt.Errorf("statement %q is not prepared", query)
	}
	switch tx := db.(type) {
	case bun.Tx:
		return tx.StmtContext(ctx, stmt), nil
	case *bun.Tx:
		return tx.StmtContext(ctx, stmt), nil
	case *DB:
		return stmt, nil
	}
	return nil, nil
}

// query runs query, one of the statements, on db and scans its rows into dest as bun does. Without
// a prepared statement bun formats it.
func (s *statements) query(ctx context.Context, db bun.IDB, dest any, query string, args ...any) error {
	stmt, err := s.stmt(ctx, db, query)
	if err != nil {
		return err
	}
	var rows *sql.Rows
	if stmt == nil {
		rows, err = db.QueryContext(ctx, query, args...)
	} else {
		var driverArgs []any
		if driverArgs, err = bindArgs(s.bdb.Dialect(), args); err != nil {
			return err
		}
		rows, err = stmt.QueryContext(ctx, driverArgs...)
	}
	if err != nil {
		return err
	}
	return s.bdb.ScanRows(ctx, rows, dest)
}

// exec runs query, one of the statements, on db, as query does.
func (s *statements) exec(ctx context.Context, db bun.IDB, query string, args ...any) (sql.Result, error) {
	stmt, err := s.stmt(ctx, db, query)
	if err != nil {
		return nil, err
	}
	if stmt == nil {
		return db.ExecContext(ctx, query, args...)
	}
	driverArgs, err := bindArgs(s.bdb.Dialect(), args)
	if err != nil {
		return nil, err
	}
	return stmt.ExecContext(ctx, driverArgs...)
}

// insertRow runs insert, one of the one-row inserts, on db and returns the new row's id, or 0 when
// it inserted none (ON CONFLICT DO NOTHING). PostgreSQL returns the id (RETURNING id). SQLite gives
// the connection's last rowid instead: it runs RETURNING as a trigger, and a statement with a
// trigger in a transaction keeps a statement journal, a 64 KiB buffer allocated and freed with every
// page the insert touched copied into it, 8% of webhookd's CPU per delivery in a profile
// (docs/performance-history.md).
func (s *statements) insertRow(ctx context.Context, db bun.IDB, insert string, args ...any) (int64, error) {
	if IsPostgres(db) {
		var ids []int64
		if err := s.query(ctx, db, &ids, insert+returningID, args...); err != nil || len(ids) == 0 {
			return 0, err
		}
		return ids[0], nil
	}
	res, err := s.exec(ctx, db, insert, args...)
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

// bindArgs turns args into what the drivers bind, so that a row reads and compares as it did when
// bun formatted the same values into the text: a time is bound as the text bun's dialect writes
// (UTC, microseconds, "+00:00"), since SQLite stores it as that text and compares times as text,
// and the drivers' own formats differ (nanoseconds, the time's own zone). database/sql converts
// the rest (a nil pointer is NULL).
func bindArgs(d schema.Dialect, args []any) ([]any, error) {
	out := make([]any, len(args))
	for i, arg := range args {
		if v := reflect.ValueOf(arg); v.Kind() == reflect.Pointer {
			if v.IsNil() {
				continue
			}
			arg = v.Elem().Interface()
		}
		if t, ok := arg.(time.Time); ok {
			// AppendTime writes a quoted literal; the quotes are not part of the value.
			out[i] = strings.Trim(string(d.AppendTime(nil, t)), "'")
			continue
		}
		v, err := driver.DefaultParameterConverter.ConvertValue(arg)
		if err != nil {
			return nil, fmt.Errorf("bind argument %d: %w", i+1, err)
		}
		if s, ok := v.(string); ok && strings.IndexByte(s, 0) >= 0 {
			return nil, errStringNUL
		}
		out[i] = v
	}
	return out, nil
}
