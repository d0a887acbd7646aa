package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v4"
)

// TestWriteListMatchesJSON: a list written item by item is, byte for byte, what c.JSON writes for
// the whole envelope, in both variants, for no item, one, and several whose data needs escaping.
func TestWriteListMatchesJSON(t *testing.T) {
	type item struct {
		ID   int64           `json:"id"`
		Data json.RawMessage `json:"data"`
		Note *string         `json:"note"`
	}
	note := "<b>&</b> é \u2028"
	all := []item{
		{ID: 1, Data: json.RawMessage(`{"a":"<script>","b":[1, 2]}`)},
		{ID: 2, Data: json.RawMessage(`{"c":"é\u2028"}`), Note: &note},
		{ID: 3, Data: json.RawMessage(`null`)},
	}
	e := echo.New()
	for _, v := range []*variant{variantA, variantB} {
		for _, n := range []int{0, 1, len(all)} {
			h := &deliveryHandlers{Server: &Server{log: slog.New(slog.NewTextHandler(io.Discard, nil))}, v: v}
			want := httptest.NewRecorder()
			if err := e.NewContext(httptest.NewRequest("GET", "/", nil), want).JSON(http.StatusOK, v.success(all[:n], "Items retrieved")); err != nil {
				t.Fatal(err)
			}
			got := httptest.NewRecorder()
			items := append([]item(nil), all[:n]...)
			if err := writeList(e.NewContext(httptest.NewRequest("GET", "/", nil), got), h, items, func(it *item) any { return *it }, "Items retrieved"); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Body.Bytes(), want.Body.Bytes()) || got.Code != want.Code || got.Header().Get("Content-Type") != want.Header().Get("Content-Type") {
				t.Fatalf("variant %s, %d items:\n got %d %s %s\nwant %d %s %s", v.prefix, n,
					got.Code, got.Header().Get("Content-Type"), got.Body, want.Code, want.Header().Get("Content-Type"), want.Body)
			}
			for i := range items {
				if items[i].Data != nil {
					t.Fatalf("item %d still held after it was written", i)
				}
			}
		}
	}
}

// failingWriter is a client that goes away after the first write.
type failingWriter struct {
	*httptest.ResponseRecorder
	writes int
}

func (w *failingWriter) Write(b []byte) (int, error) {
	if w.writes++; w.writes > 1 {
		return 0, errors.New("connection reset by peer")
	}
	return w.ResponseRecorder.Write(b)
}

// TestWriteListClientGone: a write that fails once the status is sent is returned (and logged), not
// swallowed.
func TestWriteListClientGone(t *testing.T) {
	var logged bytes.Buffer
	h := &deliveryHandlers{Server: &Server{log: slog.New(slog.NewTextHandler(&logged, nil))}, v: variantA}
	c := echo.New().NewContext(httptest.NewRequest("GET", "/", nil), &failingWriter{ResponseRecorder: httptest.NewRecorder()})
	err := writeList(c, h, []int{1, 2}, func(i *int) any { return *i }, "Items retrieved")
	if err == nil || !bytes.Contains(logged.Bytes(), []byte("connection reset by peer")) {
		t.Fatalf("err = %v, log %q", err, logged.String())
	}
}
