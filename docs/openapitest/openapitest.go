// Package openapitest lets tests check the HTTP exchanges they record against docs/openapi.yaml,
// so a handler whose answer drifts from the published reference fails its own test.
package openapitest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
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
	// operations are the document's operation ids.
	operations []string
	mu         sync.Mutex
	// seen holds, per operation, the status classes (2 for 2xx...) of exchanges found documented.
	seen map[string]map[int]bool
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
	var operations []string
	for _, item := range doc.Paths.Map() {
		for _, op := range item.Operations() {
			operations = append(operations, op.OperationID)
		}
	}
	return &Validator{router: router, operations: operations}, nil
}

// options validate the answer strictly. Schema errors leave out the schema dump: Check prints the
// body instead, which is what a reader of a failed test needs.
var options = &openapi3filter.Options{
	IncludeResponseStatus:   true,
	MultiError:              true,
	AuthenticationFunc:      openapi3filter.NoopAuthenticationFunc,
	SchemaValidationOptions: []openapi3.SchemaValidationOption{openapi3.DisableSchemaErrorDetails()},
}

// requestOptions validate the request of an exchange the service accepted (2xx): its path, query,
// headers and body must be ones the document accepts. Its credentials are not checked: tests send
// bad keys on purpose, and which header a variant reads is the router's business, not the
// schema's. Requests the service refused are not validated at all: tests send malformed ones on
// purpose, and only the answer they get must be documented.
var requestOptions = &openapi3filter.Options{
	MultiError:              true,
	AuthenticationFunc:      openapi3filter.NoopAuthenticationFunc,
	SchemaValidationOptions: []openapi3.SchemaValidationOption{openapi3.DisableSchemaErrorDetails()},
}

// maxShownBody bounds how much of a failing response body a test failure quotes.
const maxShownBody = 2048

// Check fails t unless the exchange is documented. The response, always: the route and method
// exist, the status code is listed for the operation, the documented headers are present and
// well-formed, and the body matches its schema for the response's Content-Type. The request too
// when the response is 2xx (a request the service accepted must be one the document accepts):
// its path parameters, query, headers and body, read from req.Body (nil or empty means none).
// body is the response body; nil means empty.
func (v *Validator) Check(t testing.TB, req *http.Request, status int, header http.Header, body []byte) {
	t.Helper()
	var reqBody []byte
	if req.Body != nil && req.Body != http.NoBody {
		b, err := io.ReadAll(req.Body)
		if err != nil {
			t.Fatalf("openapitest: read the request body: %v", err)
		}
		reqBody = b
		req.Body = io.NopCloser(bytes.NewReader(b))
	}
	if err := v.validate(req, reqBody, status, header, body); err != nil {
		shown, shownReq := body, reqBody
		if len(shown) > maxShownBody {
			shown = shown[:maxShownBody]
		}
		if len(shownReq) > maxShownBody {
			shownReq = shownReq[:maxShownBody]
		}
		t.Errorf("%s %s -> %d: not as documented in docs/openapi.yaml: %v\nrequest body: %s\nbody: %s", req.Method, req.URL.RequestURI(), status, err, shownReq, shown)
	}
}

// Validate is Check's verdict as an error, for callers that are not tests (a validating proxy):
// nil when the exchange is documented. reqBody is the request body, body the response's.
func (v *Validator) Validate(req *http.Request, reqBody []byte, status int, header http.Header, body []byte) error {
	return v.validate(req, reqBody, status, header, body)
}

func (v *Validator) validate(req *http.Request, reqBody []byte, status int, header http.Header, body []byte) error {
	route, params, err := v.router.FindRoute(req)
	if errors.Is(err, routers.ErrMethodNotAllowed) && status == http.StatusMethodNotAllowed {
		// A 405 answers a method the path does not take, so no operation describes the request;
		// every operation of the path documents the same 405. It is checked as the first
		// operation's, and its Allow must list every method the path takes.
		route, params, err = v.anyOperation(req)
		if err == nil {
			if missing := missingMethods(route, header.Get("Allow")); len(missing) > 0 {
				return fmt.Errorf("405 whose Allow %q leaves out the documented %v", header.Get("Allow"), missing)
			}
		}
	}
	if err != nil {
		return fmt.Errorf("undocumented route: %w", err)
	}
	defer func() {
		if err == nil {
			v.record(route.Operation.OperationID, status)
		}
	}()
	var requestErr error
	if status >= 200 && status < 300 {
		// The validator reads the body from the request; it gets a copy, so the caller's stays.
		r := req.Clone(req.Context())
		r.Body = io.NopCloser(bytes.NewReader(reqBody))
		r.ContentLength = int64(len(reqBody))
		// The service reads a body of only white space as no body (docs/api.md), which a schema
		// cannot say: the document sees no body.
		if len(bytes.TrimSpace(reqBody)) == 0 {
			r.Body = http.NoBody
		}
		in := &openapi3filter.RequestValidationInput{Request: r, PathParams: params, Route: route, Options: requestOptions}
		if err := openapi3filter.ValidateRequest(req.Context(), in); err != nil {
			requestErr = fmt.Errorf("request accepted with %d but not as documented: %w", status, err)
		}
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
	err = errors.Join(requestErr, openapi3filter.ValidateResponse(req.Context(), input))
	return err
}

// record notes that an exchange of operation with status was found as documented.
func (v *Validator) record(operation string, status int) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.seen == nil {
		v.seen = map[string]map[int]bool{}
	}
	if v.seen[operation] == nil {
		v.seen[operation] = map[int]bool{}
	}
	v.seen[operation][status/100] = true
}

// Unexercised is the Validator's Unexercised for the whole test binary, nil when no test loaded
// the document.
func Unexercised() []string {
	if loaded == nil {
		return nil
	}
	return loaded.Unexercised()
}

// Unexercised lists, sorted, the documented operations that no exchange checked so far showed
// both accepted (a 2xx, its request validated too) and refused (a 4xx): what a test run that means
// to cover the whole document has left out, "<operationId> 2xx" or "<operationId> 4xx".
func (v *Validator) Unexercised() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	var out []string
	for _, op := range v.operations {
		for _, class := range []int{2, 4} {
			if !v.seen[op][class] {
				out = append(out, fmt.Sprintf("%s %dxx", op, class))
			}
		}
	}
	slices.Sort(out)
	return out
}

// anyOperation routes req as if it used a method its path takes.
func (v *Validator) anyOperation(req *http.Request) (*routers.Route, map[string]string, error) {
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		r := req.Clone(req.Context())
		r.Method = m
		if route, params, err := v.router.FindRoute(r); err == nil {
			return route, params, nil
		}
	}
	return nil, nil, routers.ErrPathNotFound
}

// missingMethods are the methods of route's path that allow does not list.
func missingMethods(route *routers.Route, allow string) []string {
	listed := map[string]bool{}
	for _, m := range strings.Split(allow, ",") {
		listed[strings.ToUpper(strings.TrimSpace(m))] = true
	}
	var missing []string
	for m := range route.PathItem.Operations() {
		if !listed[m] {
			missing = append(missing, m)
		}
	}
	slices.Sort(missing)
	return missing
}
