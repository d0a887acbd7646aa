package api

import (
	"fmt"
	"net/url"
	"strconv"

	"github.com/labstack/echo/v4"
)

// limitParam reads ?limit= (default 50, 1..200).
func limitParam(c echo.Context) (int64, error) {
	s := c.QueryParam("limit")
	if s == "" {
		return defaultPageSize, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, invalidField("limit", "limit must be an integer")
	}
	if n < 1 || n > maxPageSize {
		return 0, validationFailed("limit", "limit must be between 1 and %d", maxPageSize)
	}
	return n, nil
}

// backPageParams reads ?limit= and ?before= (the id of a newest-first list's last row seen,
// exclusive; 0 when absent): what every newest-first list pages back with. what names the ids
// in the refusal ("delivery", "entry").
func backPageParams(c echo.Context, what string) (limit, before int64, err error) {
	if limit, err = limitParam(c); err != nil {
		return 0, 0, err
	}
	if s := c.QueryParam("before"); s != "" {
		n, ok := parseID(s)
		if !ok || n < 1 {
			return 0, 0, invalidField("before", "before must be a positive integer %s id", what)
		}
		before = n
	}
	return limit, before, nil
}

// pageParams reads ?limit= and ?after= (an id, exclusive).
func pageParams(c echo.Context) (limit, after int64, err error) {
	if limit, err = limitParam(c); err != nil {
		return 0, 0, err
	}
	if s := c.QueryParam("after"); s != "" {
		n, ok := parseID(s)
		if !ok {
			return 0, 0, invalidField("after", "after must be a non-negative integer id")
		}
		after = n
	}
	return limit, after, nil
}

// trimPage cuts a page read with one row more than limit (which tells whether a next page exists
// without a count query) back to limit, and then points the Link header at the next page.
func trimPage[T any](c echo.Context, items []T, limit int64, id func(*T) int64) []T {
	if int64(len(items)) > limit {
		items = items[:limit]
		setNextLink(c, limit, "after", id(&items[limit-1]))
	}
	return items
}

// setNextLink points a Link header at the page that follows lastID, keeping the request's filters;
// cursor names the parameter that pages ("after", or "before" for a list newest first).
func setNextLink(c echo.Context, limit int64, cursor string, lastID int64) {
	next := url.Values{}
	for k, v := range c.QueryParams() {
		next[k] = v
	}
	next.Set("limit", strconv.FormatInt(limit, 10))
	next.Set(cursor, strconv.FormatInt(lastID, 10))
	c.Response().Header().Set("Link", fmt.Sprintf(`<%s?%s>; rel="next"`, c.Request().URL.Path, next.Encode()))
}

// MaxPageBytes bounds a page of a list that carries payloads by their bytes as well as by count:
// the events' data, or the response bodies, request headers and errors of a delivery log's
// attempts. A page stops before the item that would take it past the budget, holding at least one
// item, and its Link leads on. 1 MiB holds a whole page of 200 events of up to 5 KB each, so
// ordinary pages are never cut, while a read of the largest events (256 KiB) holds 4 of them in
// memory instead of 200 (51 MB; issue 18).
const MaxPageBytes = 1 << 20
