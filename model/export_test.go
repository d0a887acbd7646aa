package model

import (
	"context"
	"reflect"
	"slices"
)

// HasPreparedStatements reports whether db's hot statements are prepared, so that a test knows
// which path it exercised.
func HasPreparedStatements(db *DB) bool {
	return db.stmts.isPrepared()
}

// DeliveryTargetColumns returns the columns that LoadDeliveryTarget's statement, run on db, returns,
// and those of the row it scans them into, as bun knows them.
func DeliveryTargetColumns(ctx context.Context, db *DB) (selected, scanned []string, err error) {
	query := db.stmts.text.deliveryTarget
	if IsPostgres(db) {
		query = numberPlaceholders(query)
	}
	rows, err := db.DB.DB.QueryContext(ctx, query, 0)
	if err != nil {
		return nil, nil, err
	}
	selected, err = rows.Columns()
	selected = slices.Clone(selected) // pgdriver reuses the names' memory once rows close
	_ = rows.Close()
	if err != nil {
		return nil, nil, err
	}
	for _, f := range db.Table(reflect.TypeFor[deliveryTargetRow]()).Fields {
		scanned = append(scanned, f.Name)
	}
	return selected, scanned, nil
}
