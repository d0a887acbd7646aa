package model

// sizedRow is a row of a list as a page is planned: its id and the bytes it would carry.
type sizedRow struct {
	ID   int64 `bun:"id"`
	Size int64 `bun:"size"`
}

// fitPage plans a page from rows read one past limit, in the list's order: it holds at most limit
// rows and, when maxBytes is set, no more of them than fit in maxBytes, but always the first, so
// that paging goes on past a row larger than the budget. When budget is set, the page also holds
// no row that would take it past budget, not even the first: a reader with a hard bound on what it
// reads (a filter's trial) gets an empty page, with more, where the next row does not fit. It
// returns the ids the page holds and whether any row is left for a next page.
func fitPage(rows []sizedRow, limit, maxBytes, budget int64) (ids []int64, more bool) {
	var total int64
	for _, r := range rows {
		if int64(len(ids)) == limit || (len(ids) > 0 && maxBytes > 0 && total+r.Size > maxBytes) ||
			(budget > 0 && total+r.Size > budget) {
			break
		}
		ids = append(ids, r.ID)
		total += r.Size
	}
	return ids, len(ids) < len(rows)
}

// dataSize is the SQL for the bytes a text column holds, NULL counting none; both databases answer
// it from the column's length, without handing the value to webhookd.
func dataSize(column string) string { return "COALESCE(octet_length(" + column + "), 0)" }
