package api

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/webhookd/webhookd/docs"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/sources"
)

// The contracts a receiver or an integrator generates code from (docs/events.md, "Schemas"): public
// like /openapi.yaml, since they say nothing of an account.

// schemaRoutes adds the deliveries' OpenAPI 3.1 document and the JSON Schemas' stable URLs.
func (s *Server) schemaRoutes(e *echo.Echo) {
	e.GET("/openapi-webhooks.yaml", func(c echo.Context) error {
		return c.Blob(http.StatusOK, "application/yaml", docs.Webhooks)
	})
	e.GET("/schemas/events/:type/:version", s.eventSchema)
	e.GET("/schemas/deliveries/:variant", s.envelopeSchema)
}

// eventSchema is GET /schemas/events/<type>/v<n>.json: the JSON Schema of version n of that event
// type's data, with its own URL as $id.
func (s *Server) eventSchema(c echo.Context) error {
	typ := c.Param("type")
	digits, ok := strings.CutPrefix(c.Param("version"), "v")
	digits, json := strings.CutSuffix(digits, ".json")
	version, err := strconv.Atoi(digits)
	if !ok || !json || err != nil || strconv.Itoa(version) != digits {
		return echo.ErrNotFound
	}
	schema, ok := sources.DataSchema(typ, version, sources.JSONSchema)
	if !ok {
		return echo.ErrNotFound
	}
	return s.serveSchema(c, schema, sources.SchemaPath(typ, version))
}

// envelopeSchema is GET /schemas/deliveries/a.json or b.json: the JSON Schema of a variant's
// delivery body, whatever the event type.
func (s *Server) envelopeSchema(c echo.Context) error {
	name, ok := strings.CutSuffix(c.Param("variant"), ".json")
	v := model.Variant(strings.ToUpper(name))
	if !ok || !v.Valid() || name != strings.ToLower(name) {
		return echo.ErrNotFound
	}
	schema, err := sources.EnvelopeSchema(v.Spec().Body, "", sources.JSONSchema)
	if err != nil {
		return err
	}
	return s.serveSchema(c, schema, "/schemas/deliveries/"+name+".json")
}

func (s *Server) serveSchema(c echo.Context, schema map[string]any, path string) error {
	schema["$id"] = strings.TrimSuffix(s.publicURL, "/") + path
	raw, err := json.Marshal(schema)
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "public, max-age=300")
	return c.Blob(http.StatusOK, "application/schema+json", raw)
}
