package api

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/webhooks"
)

// Error codes of the management API (DESIGN.md, "Errors").
const (
	codeInvalidRequest   = "invalid_request"
	codeUnauthorized     = "unauthorized"
	codeNotFound         = "not_found"
	codeConflict         = "conflict"
	codePayloadTooLarge  = "payload_too_large"
	codeValidationFailed = "validation_failed"
	codeLimitExceeded    = "limit_exceeded"
	codeRateLimited      = "rate_limited"
	codeUnavailable      = "unavailable"
	codeInternal         = "internal_error"
)

// apiError is an error a client may see: its message is written for the client and names the field
// at fault. Anything that is not an apiError is internal and reaches the client only as a generic
// message with the request id.
type apiError struct {
	status  int
	code    string
	message string
	field   string
	// retryAfter, when set, is the Retry-After of a 429 in seconds (else the rate limiter's).
	retryAfter int
}

func (e *apiError) Error() string { return fmt.Sprintf("%d %s: %s", e.status, e.code, e.message) }

// The constructors below quote at most maxEchoed characters of any value they format with %q, and
// of the field they name (a field can be a caller's key, as in data.customFields.<key>).

func invalidRequest(format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, code: codeInvalidRequest, message: fmt.Sprintf(format, clipQuoted(format, args)...)}
}

func invalidField(field, format string, args ...any) *apiError {
	return fieldError(http.StatusBadRequest, codeInvalidRequest, field, format, args)
}

func validationFailed(field, format string, args ...any) *apiError {
	return fieldError(http.StatusUnprocessableEntity, codeValidationFailed, field, format, args)
}

func fieldError(status int, code, field, format string, args []any) *apiError {
	message := fmt.Sprintf(format, clipQuoted(format, args)...)
	if short := clip(field); short != field {
		// Messages name their field with %s ("data.<key> is not a field of this event").
		message = strings.ReplaceAll(message, field, short)
		field = short
	}
	return &apiError{status: status, code: code, field: field, message: message}
}

func unauthorized(message string) *apiError {
	return &apiError{status: http.StatusUnauthorized, code: codeUnauthorized, message: message}
}

// notFoundAs names the resource a model.ErrNotFound was about, as a 404; other errors pass.
func notFoundAs(err error, what string) error {
	if errors.Is(err, model.ErrNotFound) {
		return &apiError{status: http.StatusNotFound, code: codeNotFound, message: what + " not found"}
	}
	return err
}

func notFoundAsWebhook(err error) error { return notFoundAs(err, "webhook") }

var (
	errNotFound    = &apiError{status: http.StatusNotFound, code: codeNotFound, message: "no such resource"}
	errRateLimited = &apiError{status: http.StatusTooManyRequests, code: codeRateLimited, message: "too many requests for this API key; retry after the time in Retry-After"}
	errUnavailable = &apiError{status: http.StatusServiceUnavailable, code: codeUnavailable, message: "the service is temporarily unavailable; nothing was changed, retry later"}
	errInternal    = &apiError{status: http.StatusInternalServerError, code: codeInternal, message: "internal error"}
)

// handleError is Echo's HTTPErrorHandler: every error leaves through here, shaped as the envelope of
// the variant whose path was called.
func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	ae := s.toAPIError(c, err)
	if ae.status == http.StatusServiceUnavailable {
		c.Response().Header().Set("Retry-After", "5")
	}
	if ae.status == http.StatusTooManyRequests && c.Response().Header().Get("Retry-After") == "" {
		seconds := s.retryAfterSeconds
		if ae.retryAfter > 0 {
			seconds = ae.retryAfter
		}
		c.Response().Header().Set("Retry-After", strconv.Itoa(seconds))
	}
	var body any = map[string]any{"message": ae.message, "code": ae.code}
	if v, ok := variantOf(c); ok {
		body = v.errorBody(ae)
	} else if ae.field != "" {
		body.(map[string]any)["field"] = ae.field
	}
	if c.Request().Method == http.MethodHead {
		err = c.NoContent(ae.status)
	} else {
		err = c.JSON(ae.status, body)
	}
	if err != nil {
		s.log.Error("write error response", "request_id", requestID(c), "err", err)
	}
}

// toAPIError maps any error to what the client may see, logging what it may not.
func (s *Server) toAPIError(c echo.Context, err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	var he *echo.HTTPError
	if errors.As(err, &he) {
		switch he.Code {
		case http.StatusNotFound:
			return errNotFound
		case http.StatusRequestEntityTooLarge:
			// The route's bodyLimit said 413, for the Content-Length or while a handler read the body.
			message := "request body is too large"
			if limit, ok := c.Get(contextBodyLimit).(string); ok {
				message = "request body is larger than " + limit
			}
			return &apiError{status: he.Code, code: codePayloadTooLarge, message: message}
		case http.StatusTooManyRequests:
			return errRateLimited
		case http.StatusMethodNotAllowed:
			return &apiError{status: he.Code, code: codeInvalidRequest, message: "method not allowed on this path"}
		}
		if he.Code < 500 {
			return &apiError{status: he.Code, code: codeInvalidRequest, message: http.StatusText(he.Code)}
		}
	}
	if ae := useCaseError(err); ae != nil {
		return ae
	}
	switch {
	case errors.Is(err, model.ErrNotFound):
		return errNotFound
	case errors.Is(err, model.ErrUnauthorized):
		return unauthorized("invalid API key")
	case errors.Is(err, context.Canceled) && c.Request().Context().Err() != nil:
		// The client went away; nothing useful can be sent, but keep the log quiet and honest.
		s.log.Info("client canceled request", "request_id", requestID(c))
		return errUnavailable
	case model.IsBusy(err):
		// Locks held by other work (SQLite's single writer, a PostgreSQL lock timeout, deadlock or
		// serialization failure): the transaction rolled back and a retry can succeed.
		s.log.Warn("database busy", "request_id", requestID(c), "err", err)
		return errUnavailable
	}
	if !s.dependenciesUp(c.Request().Context()) {
		s.log.Warn("dependency unavailable", "request_id", requestID(c), "err", err)
		return errUnavailable
	}
	s.log.Error("internal error", "request_id", requestID(c), "method", c.Request().Method, "path", c.Path(), "err", err)
	return errInternal
}

// useCaseError words the refusals of the use cases (package webhooks) as the API answers them; nil
// for any other error.
func useCaseError(err error) *apiError {
	var invalid *webhooks.InvalidError
	var limit *webhooks.LimitError
	var rotation *webhooks.RotationLimitError
	var busy *webhooks.BusyError
	switch {
	case errors.As(err, &invalid) && invalid.Malformed:
		return invalidField(invalid.Field, invalid.Format, invalid.Args...)
	case errors.As(err, &invalid):
		return validationFailed(invalid.Field, invalid.Format, invalid.Args...)
	case errors.As(err, &limit):
		return &apiError{status: http.StatusUnprocessableEntity, code: codeLimitExceeded, message: limit.Error()}
	case errors.As(err, &rotation):
		return &apiError{status: http.StatusConflict, code: codeConflict, message: fmt.Sprintf(
			"the secret was rotated %d times within 24 hours and every previous secret still signs; rotate again after %s, when the oldest expires",
			webhooks.MaxPreviousSecrets, rotation.RetryAt.UTC().Format("2006-01-02T15:04:05.000Z"))}
	case errors.As(err, &busy):
		// As the rate limiter answers, with the time by which a running one has ended.
		return &apiError{status: http.StatusTooManyRequests, code: codeRateLimited, retryAfter: int(math.Ceil(busy.RetryAfter.Seconds())),
			message: fmt.Sprintf("this account already runs %d %s at once; retry after the time in Retry-After", busy.Max, busy.Work)}
	case errors.Is(err, webhooks.ErrReplaysBusy):
		return &apiError{status: http.StatusConflict, code: codeConflict, message: fmt.Sprintf(
			"this account already runs %d replays; start another when one has ended, or cancel one (DELETE <prefix>/replays/<id>)", webhooks.MaxRunningReplays)}
	case errors.Is(err, webhooks.ErrCanceled):
		return &apiError{status: http.StatusConflict, code: codeConflict, message: "the delivery was canceled with its webhook and cannot be sent again"}
	case errors.Is(err, webhooks.ErrLaneMoved):
		return &apiError{status: http.StatusConflict, code: codeConflict, field: "head",
			message: "the lane's head is no longer that delivery: it was delivered or skipped meanwhile, and nothing was skipped"}
	case errors.Is(err, webhooks.ErrLaneIdle):
		return &apiError{status: http.StatusConflict, code: codeConflict,
			message: "the lane has no delivery at its head: nothing waits to be retried or skipped"}
	case errors.Is(err, webhooks.ErrIdempotencyConflict):
		return &apiError{status: http.StatusConflict, code: codeConflict, field: "Idempotency-Key",
			message: "this Idempotency-Key was already used with a different request"}
	case errors.Is(err, webhooks.ErrUnavailable):
		return errUnavailable
	}
	return nil
}

// dependenciesUp tells an outage (503, retry later) from a defect (500): an unexpected error while
// the database still answers is ours to fix.
func (s *Server) dependenciesUp(ctx context.Context) bool {
	return s.readiness.DatabaseUp(ctx)
}
