package api

import "github.com/labstack/echo/v4"

// Routes lists the server's routes, for tests that must cover every route of a kind.
func Routes(s *Server) []*echo.Route { return s.echo.Routes() }
