package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"
)

// writeList answers 200 with items as the data of the variant's success envelope, bytes for bytes
// as c.JSON would, but written item by item as each is encoded: the response is never built whole
// in memory. It consumes items, letting each go once written, so that a slow client holds no more
// of the page than it has yet to receive.
//
// Once the first byte is written the status is sent, so a failure after that (most likely the
// client gone) cannot become an error response; it is logged with the request id and returned.
func writeList[T any](c echo.Context, h *deliveryHandlers, items []T, present func(*T) any, message string) error {
	// The envelope of either variant, with an empty list in place of the items: "data" comes first
	// in both (encoding/json sorts map keys), and no other "data":[] can appear outside a string.
	envelope, err := json.Marshal(h.v.success(json.RawMessage(`[]`), message))
	if err != nil {
		return fmt.Errorf("encode envelope: %w", err)
	}
	head, tail, ok := bytes.Cut(envelope, []byte(`"data":[]`))
	if !ok {
		return errors.New("the success envelope has no data")
	}
	res := c.Response()
	res.Header().Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
	res.WriteHeader(http.StatusOK)
	write := func(parts ...[]byte) error {
		for _, p := range parts {
			if _, err := res.Write(p); err != nil {
				return err
			}
		}
		return nil
	}
	err = write(head, []byte(`"data":[`))
	for i := 0; i < len(items) && err == nil; i++ {
		var b []byte
		if b, err = json.Marshal(present(&items[i])); err == nil {
			sep := []byte(",")
			if i == 0 {
				sep = nil
			}
			err = write(sep, b)
		}
		var zero T
		items[i] = zero
	}
	if err == nil {
		err = write([]byte("]"), tail, []byte("\n"))
	}
	if err != nil {
		h.log.Warn("list response cut short", "request_id", requestID(c), "route", c.Path(), "err", err)
		return fmt.Errorf("write list: %w", err)
	}
	return nil
}
