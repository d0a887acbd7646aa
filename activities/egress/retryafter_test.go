package egress

import (
	"math"
	"net/http"
	"testing"
	"time"
)

func TestRetryAfter(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name   string
		header string // "" leaves Retry-After out
		want   time.Duration
		ok     bool
	}{
		{"missing", "", 0, false},
		{"seconds", "120", 2 * time.Minute, true},
		{"seconds with spaces", " 7 ", 7 * time.Second, true},
		{"zero", "0", 0, true},
		{"negative", "-5", 0, true},
		{"date", now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second, true},
		{"past date", now.Add(-time.Hour).Format(http.TimeFormat), 0, true},
		{"RFC 850 date", "Wednesday, 02-Jan-30 03:05:05 GMT", time.Minute, true},
		{"huge seconds", "9223372036854775807", math.MaxInt64, true},
		{"seconds beyond int64", "99999999999999999999999", math.MaxInt64, true},
		{"hugely negative", "-99999999999999999999999", 0, true},
		{"far date", "Fri, 31 Dec 9999 23:59:59 GMT", math.MaxInt64, true},
		{"fraction", "1.5", 0, false},
		{"garbage", "soon", 0, false},
		{"blank", "   ", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			if tt.header != "" {
				h.Set("Retry-After", tt.header)
			}
			got, ok := RetryAfter(h, now)
			if got != tt.want || ok != tt.ok {
				t.Fatalf("RetryAfter(%q) = %s, %v; want %s, %v", tt.header, got, ok, tt.want, tt.ok)
			}
		})
	}
}
