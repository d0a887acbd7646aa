package api

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/webhookd/webhookd/model"
)

// codeInsufficientScope is the code of a 403: the request is outside its API key's scope.
const codeInsufficientScope = "insufficient_scope"

// scopes is the set of API key scopes a route admits (docs/api.md, "Scoped API keys"). Every route
// of both variants is registered with one (New's route), so none can be forgotten; manage is in
// every set, since a manage key may do everything.
type scopes struct {
	admitted []model.KeyScope
}

// The sets the routes take. Reading is GET; the event log (the events and their types) is read by
// publishers too, who need it to publish; fan intake publishes events; a portal link is for
// readers, whose link opens a read-only session (createPortalSession).
var (
	forManage     = scopes{[]model.KeyScope{model.ScopeManage}}
	forRead       = scopes{[]model.KeyScope{model.ScopeRead, model.ScopeManage}}
	forPublish    = scopes{[]model.KeyScope{model.ScopePublish, model.ScopeManage}}
	forEventLog   = scopes{[]model.KeyScope{model.ScopeRead, model.ScopePublish, model.ScopeManage}}
	forPortalLink = forRead
)

// need refuses a request whose key's scope is not in set with 403 insufficient_scope, naming the
// key's scope and the scopes the request needs. It runs after authenticate, so a missing or bad
// key is 401 first, and before anything reads the request: the answer says nothing of the route
// beyond the scopes it takes.
func need(set scopes) echo.MiddlewareFunc {
	names := make([]string, len(set.admitted))
	for i, s := range set.admitted {
		names[i] = string(s)
	}
	needed := strings.Join(names, " or ")
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			key := keyOf(c)
			if !slices.Contains(set.admitted, key.Scope) {
				return &apiError{status: http.StatusForbidden, code: codeInsufficientScope,
					message: fmt.Sprintf("this API key's scope is %s; this request needs the %s scope", key.Scope, needed)}
			}
			return next(c)
		}
	}
}

// keyOf is the API key that authenticated the request: its id and scope.
func keyOf(c echo.Context) model.AuthenticatedKey {
	return c.Get(contextAPIKey).(model.AuthenticatedKey)
}
