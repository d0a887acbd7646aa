package portal

import (
	"net/http"

	"github.com/labstack/echo/v4"
)

// logout ends the session (a read-only one too: signing out changes nothing of the account's)
// and clears its cookie. The session is ended in the database, not only forgotten by this browser,
// so a copy of the cookie opens nothing either.
func (s *Server) logout(c echo.Context) error {
	if err := s.accounts.EndPortalSession(c.Request().Context(), sessionOf(c)); err != nil {
		return err
	}
	c.SetCookie(s.cookie.cleared())
	c.Set(contextSession, nil)
	return s.render(c, http.StatusOK, "error", map[string]any{"Title": "Signed out", "Message": "You have signed out of the portal. Open a new link to come back."})
}
