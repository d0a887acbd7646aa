package api

import (
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/webhookd/webhookd/model"
)

// portalSessionRequest is the body of POST <prefix>/portal-sessions. ttl is whole seconds, as
// JSON carries a duration without a unit's spelling to agree on.
type portalSessionRequest struct {
	TTL      *jsonInt `json:"ttl"`
	ReadOnly bool     `json:"readOnly"`
}

type portalSessionResponse struct {
	URL       string  `json:"url"`
	ExpiresAt isoTime `json:"expiresAt"`
}

// createPortalSession is POST <prefix>/portal-sessions: a signed link to the owner's portal for the
// caller's account and this variant (docs/portal.md). The link opens once, until expiresAt, and
// records the caller's key: revoking the key refuses the link and ends the session it opened.
func (h *deliveryHandlers) createPortalSession(c echo.Context) error {
	if !h.portal {
		return &apiError{status: http.StatusNotFound, code: codeNotFound, message: "the portal is turned off on this server (WEBHOOKD_PORTAL=false)"}
	}
	var req portalSessionRequest
	if err := decodeOptional(c, &req); err != nil {
		return err
	}
	var ttl time.Duration
	if req.TTL != nil {
		max := int64(model.MaxPortalLinkTTL / time.Second)
		if *req.TTL < 1 || int64(*req.TTL) > max {
			return validationFailed("ttl", "ttl is in seconds, from 1 to %d (24 hours); default %d", max, int64(model.DefaultPortalLinkTTL/time.Second))
		}
		ttl = time.Duration(*req.TTL) * time.Second
	}
	token, link, err := model.CreatePortalLink(c.Request().Context(), h.db, model.NewPortalLink{
		AccountID: accountOf(c).ID, APIKeyID: c.Get(contextKeyID).(int64), Variant: h.v.model, ReadOnly: req.ReadOnly, TTL: ttl,
	})
	if err != nil {
		return fmt.Errorf("create portal link: %w", err)
	}
	return c.JSON(http.StatusCreated, h.v.success(portalSessionResponse{
		URL: model.PortalEnterURL(h.publicURL, token), ExpiresAt: isoTime(link.ExpiresAt),
	}, "Portal link created; it opens once"))
}
