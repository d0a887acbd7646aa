package model

import "github.com/uptrace/bun"

// HasPreparedStatements reports whether db's hot statements are prepared, so that a test knows
// which path it exercised.
func HasPreparedStatements(db *bun.DB) bool {
	_, ok := prepared.byDB.Load(db.DB)
	return ok
}

// Pending is how many ids m holds that no write has taken yet.
func (m *DispatchMarks) Pending() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.pending)
}
