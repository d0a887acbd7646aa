package api

import (
	"github.com/labstack/echo/v4"
	"github.com/webhookd/webhookd/input"
)

// The parameters of a request's path and query.

// singleParameters refuses a query parameter given more than once with 400 naming it, on every
// route of both variants, as decodeBody refuses a JSON key sent twice (input.RepeatedParameter).
func singleParameters(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if name, ok := input.RepeatedParameter(c.QueryParams()); ok {
			return invalidField(name, "the query repeats the parameter %q; send each parameter once", name)
		}
		return next(c)
	}
}

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

// boolParam reads a query parameter that is true or false; absent, false.
func boolParam(c echo.Context, name string) (bool, error) {
	switch c.QueryParam(name) {
	case "", "false":
		return false, nil
	case "true":
		return true, nil
	}
	return false, invalidField(name, "%s must be true or false", name)
}
