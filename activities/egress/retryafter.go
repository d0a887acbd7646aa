package egress

import (
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// RetryAfter reads a reply's Retry-After header, either delay-seconds or an HTTP-date, as a delay
// from now. A date in the past or a negative number is 0, true; a missing or unreadable header is
// 0, false. Huge values saturate instead of overflowing.
func RetryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	// On overflow ParseInt returns the largest int64 of the sign with ErrRange: saturate.
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil || errors.Is(err, strconv.ErrRange) {
		return secondsDuration(secs), true
	}
	at, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	if d := at.Sub(now); d > 0 {
		return d, true
	}
	return 0, true
}

func secondsDuration(secs int64) time.Duration {
	switch {
	case secs <= 0:
		return 0
	case secs > int64(math.MaxInt64/time.Second):
		return math.MaxInt64
	}
	return time.Duration(secs) * time.Second
}
