package portal

import (
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/webhookd/webhookd/model"
)

// auditListed is how many entries a page of the audit log shows.
const auditListed = 50

// auditPage is GET /portal/audit: the account's audit log in the session's variant (and its
// changes to the whole account, its API keys), newest first, in pages that follow one another by
// id (?before=), as the event log's do. A read-only session may read it: it changes nothing.
func (s *Server) auditPage(c echo.Context) error {
	var before int64
	if v := c.QueryParam("before"); v != "" {
		id, err := strconv.ParseInt(v, 10, 64)
		if err != nil || id < 1 {
			return &pageError{status: http.StatusBadRequest, title: "Audit log", message: "The page cursor is not valid; start again from the first page."}
		}
		before = id
	}
	page, err := s.webhooks.AuditLog(c.Request().Context(), sessionOf(c).Scope(), before, auditListed)
	if err != nil {
		return err
	}
	data := map[string]any{"Title": "Audit log", "Entries": page.Entries, "First": before == 0}
	if page.More {
		data["Next"] = "/portal/audit?before=" + strconv.FormatInt(page.Last, 10)
	}
	return s.render(c, http.StatusOK, "audit", data)
}

// auditActor is who made an entry's change, in a line.
func auditActor(e *model.AuditEntry) string {
	switch e.ActorKind {
	case model.ActorKindAPIKey:
		return "API key " + e.ActorID + " (" + e.ActorLabel + ")"
	case model.ActorKindPortal:
		return "portal session " + e.ActorID + " (" + e.ActorLabel + ")"
	case model.ActorKindCLI:
		return "operator: " + e.ActorLabel
	}
	return e.ActorKind
}
