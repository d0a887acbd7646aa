package api

import (
	"encoding/json"

	"github.com/labstack/echo/v4"

	"github.com/webhookd/webhookd/model"
)

// auditJSON is one entry of the audit log as both variants present it (only the envelope
// differs).
type auditJSON struct {
	ID      int64           `json:"id"`
	At      isoTime         `json:"at"`
	Actor   auditActorJSON  `json:"actor"`
	Action  string          `json:"action"`
	Target  auditTargetJSON `json:"target"`
	Changes json.RawMessage `json:"changes"`
}

type auditActorJSON struct {
	Kind  string `json:"kind"`
	ID    string `json:"id"`
	Label string `json:"label"`
}

type auditTargetJSON struct {
	Type string `json:"type"`
	ID   string `json:"id"`
}

func presentAudit(e *model.AuditEntry) any {
	return auditJSON{
		ID: e.ID, At: isoTime(e.At), Action: e.Action, Changes: json.RawMessage(e.Changes),
		Actor:  auditActorJSON{Kind: e.ActorKind, ID: e.ActorID, Label: e.ActorLabel},
		Target: auditTargetJSON{Type: e.TargetType, ID: e.TargetID},
	}
}

// auditLog is GET <prefix>/audit-log: the account's changes in the variant (and to the whole
// account: its API keys), newest first. ?before=<entry id> pages back, as a webhook's deliveries
// do.
func (h *deliveryHandlers) auditLog(c echo.Context) error {
	limit, before, err := backPageParams(c, "entry")
	if err != nil {
		return err
	}
	page, err := h.webhooks.AuditLog(c.Request().Context(), h.scope(c), before, limit)
	if err != nil {
		return err
	}
	if page.More {
		setNextLink(c, limit, "before", page.Last)
	}
	return writeList(c, h, page.Entries, presentAudit, "Audit log retrieved")
}
