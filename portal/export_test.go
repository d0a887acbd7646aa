package portal

import "github.com/labstack/echo/v4"

// CSRFToken is a session's CSRF token, for tests of a read-only session, whose pages carry none.
var CSRFToken = csrfToken

// CrossSiteAncestor is crossSiteAncestor, for its table test.
var CrossSiteAncestor = crossSiteAncestor

// Routes lists the portal's routes, for tests that must cover every route of a kind.
func Routes(s *Server) []*echo.Route { return s.echo.Routes() }

// Assets is the handler of Prefix+"static/*", for a test with a file system that has directories.
var Assets = assets
