package api

import "github.com/labstack/echo/v4"

// The parameters of a request's path.

// pathID reads the :id parameter of a resource: a positive integer written as the API writes ids
// (parseID), so "+2" and "02" are 400 rather than another name for 2.
func pathID(c echo.Context, what string) (int64, error) {
	id, ok := parseID(c.Param("id"))
	if !ok || id < 1 {
		return 0, invalidField("id", "%s id must be a positive integer", what)
	}
	return id, nil
}

func webhookID(c echo.Context) (int64, error) { return pathID(c, "webhook") }
