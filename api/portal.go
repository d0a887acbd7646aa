package api

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/webhookd/webhookd/accounts"
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
	// ReadOnly tells whether the session changes nothing: as asked, and always for a read key.
	ReadOnly bool `json:"readOnly"`
}

// errPortalOff answers a portal link while the portal is turned off, as /portal/ does.
var errPortalOff = &apiError{status: http.StatusNotFound, code: codeNotFound, message: "the portal is turned off on this server (WEBHOOKD_PORTAL=false)"}

// createPortalSession is POST <prefix>/portal-sessions: a signed link to the owner's portal for the
// caller's account and this variant (docs/portal.md). The link opens once, until expiresAt, and
// records the caller's key: revoking the key refuses the link and ends the session it opened.
func (h *deliveryHandlers) createPortalSession(c echo.Context) error {
	if err := h.accounts.PortalOn(); err != nil {
		return errPortalOff
	}
	var req portalSessionRequest
	if err := decodeOptional(c, &req); err != nil {
		return err
	}
	// A read key's link opens a read-only session, whatever the request says: the session may do
	// what the key may (docs/portal.md).
	key := keyOf(c)
	r := accounts.PortalLinkRequest{AccountID: accountOf(c).ID, APIKeyID: key.ID, Variant: h.v.model,
		ReadOnly: req.ReadOnly || key.Scope == model.ScopeRead}
	if req.TTL != nil {
		// Clamped so that the product cannot wrap: what is out of range stays out of range.
		ttl := time.Duration(max(min(int64(*req.TTL), math.MaxInt64/int64(time.Second)), 0)) * time.Second
		r.TTL = &ttl
	}
	link, err := h.accounts.IssuePortalLink(c.Request().Context(), r)
	switch {
	case errors.Is(err, accounts.ErrPortalTTLOutOfRange):
		max := int64(accounts.MaxPortalLinkTTL / time.Second)
		return validationFailed("ttl", "ttl is in seconds, from 1 to %d (24 hours); default %d", max, int64(accounts.DefaultPortalLinkTTL/time.Second))
	case errors.Is(err, accounts.ErrPortalOff):
		return errPortalOff
	case err != nil:
		return fmt.Errorf("create portal link: %w", err)
	}
	return c.JSON(http.StatusCreated, h.v.success(portalSessionResponse{
		URL: link.URL, ExpiresAt: isoTime(link.Link.ExpiresAt), ReadOnly: link.Link.ReadOnly,
	}, "Portal link created; it opens once"))
}
