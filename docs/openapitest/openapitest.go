// Package openapitest lets tests check the HTTP exchanges they record against docs/openapi.yaml,
// so a handler whose answer drifts from the published reference fails its own test.
package openapitest

import (
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/webhookd/webhookd/docs"
)

// Validator checks recorded HTTP exchanges against docs/openapi.yaml.
// It is safe for concurrent use by parallel tests.
type Validator struct {
	router routers.Router
}

// The document is parsed and validated once per test binary, however many tests ask for it.
var (
	loadOnce   sync.Once
	loaded     *Validator
	errLoading error
)

// New returns the Validator for docs/openapi.yaml, failing t if the document does not load.
func New(t testing.TB) *Validator {
	t.Helper()
	loadOnce.Do(func() { loaded, errLoading = load() })
	if errLoading != nil {
		t.Fatalf("openapitest: %v", errLoading)
	}
	return loaded
}

func load() (*Validator, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(docs.OpenAPI)
	if err != nil {
		return nil, fmt.Errorf("load docs/openapi.yaml: %w", err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		return nil, fmt.Errorf("docs/openapi.yaml is not valid OpenAPI: %w", err)
	}
	// Tests reach the server at whatever address httptest picked, not at the documented server:
	// without servers the router matches on the path alone.
	doc.Servers = nil
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("route docs/openapi.yaml: %w", err)
	}
	return &Validator{router: router}, nil
}

// options validate the answer strictly. The request itself is never validated, its credentials
// included: tests send malformed requests and bad keys on purpose, and only the response they get
// must be documented. Schema errors leave out the schema dump: Check prints the body instead,
// which is what a reader of a failed test needs.
var options = &openapi3filter.Options{
	IncludeResponseStatus:   true,
	MultiError:              true,
	AuthenticationFunc:      openapi3filter.NoopAuthenticationFunc,
	SchemaValidationOptions: []openapi3.SchemaValidationOption{openapi3.DisableSchemaErrorDetails()},
}

// maxShownBody bounds how much of a failing response body a test failure quotes.
const maxShownBody = 2048

// Check fails t unless the response is documented for req: the route and method exist, the status
// code is listed for the operation, the documented headers are present and well-formed, and the
// body matches its schema for the response's Content-Type. body is the response body; nil means
// empty.
func (v *Validator) Check(t testing.TB, req *http.Request, status int, header http.Header, body []byte) {
	t.Helper()
	if err := v.validate(req, status, header, body); err != nil {
		shown := body
		if len(shown) > maxShownBody {
			shown = shown[:maxShownBody]
		}
		t.Errorf("%s %s -> %d: not as documented in docs/openapi.yaml: %v\nbody: %s", req.Method, req.URL.Path, status, err, shown)
	}
}

func (v *Validator) validate(req *http.Request, status int, header http.Header, body []byte) error {
	route, params, err := v.router.FindRoute(req)
	if err != nil {
		return fmt.Errorf("undocumented route: %w", err)
	}
	input := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{
			Request:    req,
			PathParams: params,
			Route:      route,
			Options:    options,
		},
		Status:  status,
		Header:  header,
		Options: options,
	}
	input.SetBodyBytes(body)
	return openapi3filter.ValidateResponse(req.Context(), input)
}
