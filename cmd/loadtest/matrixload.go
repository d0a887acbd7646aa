package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// What account B does in the matrix scenario's rows, and the tools it does it with: counting its
// operations, running them in loops, and the heavy inputs (a filter of many substring tests, events
// near the intake's size limit, list pages followed to their end, portal pages).

// opCount counts the operations of B's load: how many, how long each took, and the failures
// with the last error. An operation that ends because the load was stopped is neither.
type opCount struct {
	what string // the operation, plural: "publishes"

	mu      sync.Mutex
	took    []obs
	failed  int
	lastErr error
	cut     int // operations under way when the load was stopped
	note    string
}

// record counts one operation that started at start and ended with err; ctx is the load's.
func (t *opCount) record(ctx context.Context, start time.Time, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err != nil && ctx.Err() != nil {
		t.cut++
		return
	}
	t.took = append(t.took, obs{d: time.Since(start)})
	if err != nil {
		t.failed++
		t.lastErr = err
	}
}

// err reports failed operations.
func (t *opCount) err() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.failed > 0 {
		return fmt.Errorf("%d of %d %s failed, the last with: %w", t.failed, len(t.took), t.what, t.lastErr)
	}
	return nil
}

// setNote adds a figure of the row's own to the opCount's text ("queued 10000").
func (t *opCount) setNote(format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.note = fmt.Sprintf(format, args...)
}

// String is "1234 publishes (p50 0.120 s, max 2.301 s), 3 failed (last: ...), 4 cut short when B
// stopped; queued 10000".
func (t *opCount) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := fmt.Sprintf("%d %s", len(t.took), t.what)
	if len(t.took) > 0 {
		sum := summarize(t.took)
		s += fmt.Sprintf(" (p50 %s, max %s)", sum.p50, sum.max)
	}
	if t.failed > 0 {
		last := t.lastErr.Error()
		if len(last) > 120 {
			last = last[:120] + "..."
		}
		s += fmt.Sprintf(", %d failed (last: %s)", t.failed, last)
	}
	if t.cut > 0 {
		s += fmt.Sprintf(", %d cut short when B stopped", t.cut)
	}
	if t.note != "" {
		s += "; " + t.note
	}
	return s
}

// repeat runs op in workers goroutines, each calling it again as soon as it returns, until ctx
// ends; t counts the calls. op is told which worker calls it, 0 to workers-1, so that each worker
// can keep a state of its own (a cursor, a session).
func repeat(ctx context.Context, workers int, t *opCount, op func(ctx context.Context, worker int) error) {
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				start := time.Now()
				t.record(ctx, start, op(ctx, w))
			}
		})
	}
	wg.Wait()
}

// repeatN calls op n times, from workers goroutines at once, or fewer when ctx ends first; t counts
// the calls.
func repeatN(ctx context.Context, n, workers int, t *opCount, op func(ctx context.Context) error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Go(func() {
			for ctx.Err() == nil && next.Add(1) <= int64(n) {
				start := time.Now()
				t.record(ctx, start, op(ctx))
			}
		})
	}
	wg.Wait()
}

// paced calls op rate times a second, each call in its own goroutine so that slow answers do not
// lower the rate (open loop), until ctx ends; it returns when the last call has.
func paced(ctx context.Context, rate float64, t *opCount, op func(ctx context.Context) error) {
	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer tick.Stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			wg.Go(func() {
				start := time.Now()
				t.record(ctx, start, op(ctx))
			})
		}
	}
}

// retryBusy calls op until it succeeds, waiting out the API's 429 and 503 (a busy database), for a
// minute at most: building a row's data set is not what is measured, and must not stop at the
// first refusal.
func retryBusy(ctx context.Context, op func() error) error {
	deadline := time.Now().Add(time.Minute)
	for {
		err := op()
		var se *statusError
		if !errors.As(err, &se) || (se.status != http.StatusTooManyRequests && se.status != http.StatusServiceUnavailable) ||
			time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(max(se.retryAfter, 200*time.Millisecond)):
		}
	}
}

// heavyFilter is a payload filter of tests substring tests ({"$in": "<string>"}) under one $or on
// data.name, as long as the API allows (maxBytes of JSON). Each string is a run of the letter a
// ended by digits, so that against a name of a alone every test fails, and fails late: the filter
// reads the whole name once per test and refuses the event.
func heavyFilter(tests, maxBytes int) (json.RawMessage, error) {
	for run := 64; run >= 1; run-- {
		or := make([]any, tests)
		for i := range or {
			or[i] = map[string]any{"$in": strings.Repeat("a", run) + strconv.Itoa(i)}
		}
		b, err := json.Marshal(map[string]any{"data": map[string]any{"name": map[string]any{"$or": or}}})
		if err != nil {
			return nil, err
		}
		if len(b) <= maxBytes {
			return b, nil
		}
	}
	return nil, fmt.Errorf("%d substring tests do not fit in a filter of %d bytes", tests, maxBytes)
}

// maxEventBody is the API's limit on a POST /events body (docs/api.md, 413).
const maxEventBody = 256 << 10

// bigCampaign is the data of a campaign.* event whose name is a run of the letter a, long enough
// that the event's body, of type eventType, is kib KiB; an error when that passes the API's limit.
func bigCampaign(eventType string, kib int) (json.RawMessage, error) {
	data := campaignData("")
	small, err := json.Marshal(map[string]any{"eventType": eventType, "data": data})
	if err != nil {
		return nil, err
	}
	n := kib<<10 - len(small)
	if n < 1 || kib<<10 > maxEventBody {
		return nil, fmt.Errorf("an event of %d KiB: want 1 to %d KiB", kib, maxEventBody>>10)
	}
	data["name"] = strings.Repeat("a", n)
	return json.Marshal(data)
}

// nextLink is the target of a Link header's rel="next", "" when there is none.
func nextLink(header string) string {
	for part := range strings.SplitSeq(header, ",") {
		target, params, ok := strings.Cut(part, ";")
		target = strings.TrimSpace(target)
		if !ok || !strings.HasPrefix(target, "<") || !strings.HasSuffix(target, ">") {
			continue
		}
		for p := range strings.SplitSeq(params, ";") {
			if strings.ReplaceAll(strings.TrimSpace(p), " ", "") == `rel="next"` {
				return target[1 : len(target)-1]
			}
		}
	}
	return ""
}

// pageWalker reads a list of the API page after page, following each page's Link, and starts
// again from the first page after the last: what a client that pages through long lists does.
type pageWalker struct {
	c     *apiClient
	first string // the first page's path and query
	next  string // the page to read next; "" is the first
	bytes atomic.Int64
}

// read reads one page to its end; a walker is used by one goroutine at a time.
func (w *pageWalker) read(ctx context.Context) error {
	path := w.next
	if path == "" {
		path = w.first
	}
	req, err := w.c.request(ctx, http.MethodGet, path, nil)
	if err != nil {
		return err
	}
	resp, err := w.c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	w.bytes.Add(n)
	if err != nil {
		return fmt.Errorf("GET %s: read the page: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %d", path, resp.StatusCode)
	}
	w.next = nextLink(resp.Header.Get("Link"))
	return nil
}

// portalReader is a session of the owner's portal that reads pages in turn.
type portalReader struct {
	base  string
	http  *http.Client
	pages []string
	i     int
}

// openPortal mints a portal link for c's account (POST /portal-sessions) and opens it: the session
// cookie it sets is kept for every page after.
func openPortal(ctx context.Context, c *apiClient, pages []string) (*portalReader, error) {
	var link struct {
		URL string `json:"url"`
	}
	if err := c.doPatiently(ctx, http.MethodPost, "/api/svc/v2/portal-sessions", map[string]any{}, &link); err != nil {
		return nil, fmt.Errorf("mint a portal link: %w", err)
	}
	jar, err := cookiejar.New(nil)
	if err != nil {
		return nil, err
	}
	p := &portalReader{base: c.base, http: &http.Client{Jar: jar, Timeout: time.Minute}, pages: pages}
	if err := p.get(ctx, link.URL); err != nil { // 303 to the endpoints page, which needs the cookie
		return nil, fmt.Errorf("open the portal link: %w", err)
	}
	return p, nil
}

// readNext reads the next of the pages, in turn; a reader is used by one goroutine at a time.
func (p *portalReader) readNext(ctx context.Context) error {
	page := p.pages[p.i%len(p.pages)]
	p.i++
	return p.get(ctx, p.base+page)
}

func (p *portalReader) get(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := p.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %d", resp.Request.URL.Path, resp.StatusCode)
	}
	return nil
}

// lineCounter counts the lines of a server's error log that contain substr (a refused TLS
// handshake), instead of printing them.
type lineCounter struct {
	substr string
	n      atomic.Int64
}

func (c *lineCounter) Write(p []byte) (int, error) {
	c.n.Add(int64(strings.Count(string(p), c.substr)))
	return len(p), nil
}
