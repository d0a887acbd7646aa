package api

import (
	"strconv"
	"unicode/utf8"
)

// maxEchoed bounds how much of a caller's value an error message quotes: enough to recognise it,
// never the megabyte someone sent.
const maxEchoed = 64

// clip shortens s to maxEchoed characters, marking the cut with "...", so an error message that
// echoes input stays small. It never splits a UTF-8 sequence.
func clip(s string) string {
	if utf8.RuneCountInString(s) <= maxEchoed {
		return s
	}
	n := 0
	for i := range s {
		if n == maxEchoed {
			return s[:i] + "..."
		}
		n++
	}
	return s
}

// clipQuoted clips every string argument that format quotes with %q: the one place where echoed
// input is capped, for every message the error constructors build. Other verbs are left alone, since
// they carry the service's own words (a URL rule, a data rule's reason).
func clipQuoted(format string, args []any) []any {
	var out []any
	n := 0
	for i := 0; i < len(format); i++ {
		if format[i] != '%' {
			continue
		}
		i++
		// Flags, width and precision come between % and the verb.
		for i < len(format) && (format[i] == '+' || format[i] == '-' || format[i] == '#' || format[i] == ' ' || format[i] == '0' ||
			format[i] == '.' || (format[i] >= '1' && format[i] <= '9')) {
			i++
		}
		if i >= len(format) || format[i] == '%' {
			continue
		}
		if format[i] == 'q' && n < len(args) {
			if s, ok := args[n].(string); ok && clip(s) != s {
				if out == nil {
					out = append([]any(nil), args...)
				}
				out[n] = clip(s)
			}
		}
		n++
	}
	if out == nil {
		return args
	}
	return out
}

// parseID reads an id as the API writes it: decimal digits with no sign, no leading zero and no
// space, so that "+2", "02" and " 2" are not read as 2. It returns false for anything else,
// including values beyond int64. Callers check the range (ids from 1, ?after= from 0).
func parseID(s string) (int64, bool) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || strconv.FormatInt(n, 10) != s || n < 0 {
		return 0, false
	}
	return n, true
}
