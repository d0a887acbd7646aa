package model

import (
	"context"
	"fmt"
	"time"

	"github.com/uptrace/bun"
)

// PurgePortalAccess deletes up to limit portal sessions and up to limit portal links that ended
// before before (retention's cutoff): sessions that expired or were revoked then, and links that
// expired then and no remaining session came from. Such rows open nothing any more; they are kept
// until the cutoff only as a record of who had access when. It returns how many of each it
// deleted. Running it twice is harmless.
func PurgePortalAccess(ctx context.Context, db bun.IDB, before time.Time, limit int) (PortalRevoked, error) {
	var out PortalRevoked
	if limit <= 0 {
		return out, fmt.Errorf("purge portal access: batch size %d is not positive", limit)
	}
	sessions := db.NewSelect().Model((*PortalSession)(nil)).Column("id").
		WhereGroup(" AND ", func(q *bun.SelectQuery) *bun.SelectQuery {
			return q.Where("expires_at < ?", before).WhereOr("revoked_at < ?", before)
		}).OrderExpr("id").Limit(int64(limit))
	res, err := db.NewDelete().Model((*PortalSession)(nil)).Where("id IN (?)", sessions).Exec(ctx)
	if out.Sessions, err = affected(res, err); err != nil {
		return out, fmt.Errorf("purge portal sessions: %w", err)
	}
	links := db.NewSelect().Model((*PortalLink)(nil)).Column("id").Where("expires_at < ?", before).
		Where("NOT EXISTS (SELECT 1 FROM portal_sessions AS s WHERE s.link_id = portal_link.id)").
		OrderExpr("id").Limit(int64(limit))
	res, err = db.NewDelete().Model((*PortalLink)(nil)).Where("id IN (?)", links).Exec(ctx)
	if out.Links, err = affected(res, err); err != nil {
		return out, fmt.Errorf("purge portal links: %w", err)
	}
	return out, nil
}
