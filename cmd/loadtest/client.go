package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// apiClient calls webhookd's variant A API (x-api-key) as one account.
type apiClient struct {
	base string
	key  string
	http *http.Client
}

// newAPIClient keeps up to conns connections open, so that concurrent publishers do not pay a
// connection setup per event.
func newAPIClient(base, key string, conns int) *apiClient {
	return &apiClient{base: base, key: key, http: &http.Client{
		Timeout:   30 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: conns},
	}}
}

// statusError is a reply outside 2xx; it keeps the start of the body, which names the problem.
type statusError struct {
	method, path string
	status       int
	retryAfter   time.Duration
	body         string
}

func (e *statusError) Error() string {
	return fmt.Sprintf("%s %s: %d %s", e.method, e.path, e.status, e.body)
}

// published is what POST /events answers.
type published struct {
	ID      int64 `json:"id"`
	Matched int   `json:"matched"`
}

// publish sends one campaign.created event.
func (c *apiClient) publish(ctx context.Context) (published, error) {
	return c.publishEvent(ctx, "campaign.created", campaignData("Load"))
}

// publishEvent sends one event of a variant A type with its data.
func (c *apiClient) publishEvent(ctx context.Context, eventType string, data any) (published, error) {
	var out published
	err := c.do(ctx, http.MethodPost, "/api/svc/v2/events", map[string]any{"eventType": eventType, "data": data}, &out)
	return out, err
}

// campaignData is the data of a campaign.* event with this name.
func campaignData(name string) map[string]any {
	return map[string]any{"id": 1, "name": name, "platform": "meta", "status": "active",
		"startDate": "2026-01-01T00:00:00.000Z", "endDate": "2026-12-31T00:00:00.000Z", "budget": 100}
}

// createWebhook registers a campaign.created webhook and returns its id.
func (c *apiClient) createWebhook(ctx context.Context, url string) (int64, error) {
	return c.registerWebhook(ctx, map[string]any{"url": url, "eventType": "campaign.created"})
}

// registerWebhook registers the webhook that body describes (url, eventType, and any setting of
// POST /webhooks) and returns its id.
func (c *apiClient) registerWebhook(ctx context.Context, body map[string]any) (int64, error) {
	var out struct {
		ID int64 `json:"id"`
	}
	if err := c.doPatiently(ctx, http.MethodPost, "/api/svc/v2/webhooks", body, &out); err != nil {
		return 0, fmt.Errorf("register %v: %w", body["url"], err)
	}
	return out.ID, nil
}

// setRateLimit sets the webhook's own rate limit, deliveries per second (PATCH {"rateLimit": n}),
// and checks that the API answers with it.
func (c *apiClient) setRateLimit(ctx context.Context, id int64, perSecond int) error {
	var out struct {
		RateLimit *int `json:"rateLimit"`
	}
	path := fmt.Sprintf("/api/svc/v2/webhooks/%d", id)
	if err := c.doPatiently(ctx, http.MethodPatch, path, map[string]int{"rateLimit": perSecond}, &out); err != nil {
		return err
	}
	if out.RateLimit == nil || *out.RateLimit != perSecond {
		got := "null"
		if out.RateLimit != nil {
			got = strconv.Itoa(*out.RateLimit)
		}
		return fmt.Errorf("PATCH %s {\"rateLimit\": %d}: the webhook's rateLimit is %s", path, perSecond, got)
	}
	return nil
}

// setFilter sets the webhook's payload filter (PATCH {"filter": f}) and checks that the API
// answers with one.
func (c *apiClient) setFilter(ctx context.Context, id int64, f any) error {
	var out struct {
		Filter json.RawMessage `json:"filter"`
	}
	path := fmt.Sprintf("/api/svc/v2/webhooks/%d", id)
	if err := c.doPatiently(ctx, http.MethodPatch, path, map[string]any{"filter": f}, &out); err != nil {
		return err
	}
	if len(out.Filter) == 0 || string(out.Filter) == "null" {
		return fmt.Errorf("PATCH %s {\"filter\": ...}: the webhook has no filter", path)
	}
	return nil
}

func (c *apiClient) deleteWebhook(ctx context.Context, id int64) error {
	return c.doPatiently(ctx, http.MethodDelete, fmt.Sprintf("/api/svc/v2/webhooks/%d", id), nil, nil)
}

// webhookStatus is the webhook's status as GET /webhooks/<id> shows it: pending, processing, failed
// or finished (variant A).
func (c *apiClient) webhookStatus(ctx context.Context, id int64) (string, error) {
	var out struct {
		Status string `json:"status"`
	}
	err := c.doPatiently(ctx, http.MethodGet, fmt.Sprintf("/api/svc/v2/webhooks/%d", id), nil, &out)
	return out.Status, err
}

// delivery is one delivery of an event to a webhook as GET /webhooks/<id>/deliveries lists it,
// with the part of its attempt log a report needs.
type delivery struct {
	ID         int64     `json:"id"`
	EventID    int64     `json:"eventId"`
	State      string    `json:"state"`
	AttemptLog []attempt `json:"attemptLog"`
}

type attempt struct {
	StatusCode *int    `json:"statusCode"`
	ErrorClass *string `json:"errorClass"`
}

// failed reports an attempt that did not deliver: no answer (refused, timed out, unreachable) or an
// answer outside 2xx.
func (a attempt) failed() bool {
	return a.ErrorClass != nil || a.StatusCode == nil || *a.StatusCode < 200 || *a.StatusCode > 299
}

// deliveries lists every delivery of the webhook id with its attempts, newest first, following
// ?before= from page to page.
func (c *apiClient) deliveries(ctx context.Context, id int64) ([]delivery, error) {
	const limit = 200 // the API's largest page
	var all []delivery
	for {
		path := fmt.Sprintf("/api/svc/v2/webhooks/%d/deliveries?limit=%d", id, limit)
		if len(all) > 0 {
			path += fmt.Sprintf("&before=%d", all[len(all)-1].ID)
		}
		var page []delivery
		if err := c.doPatiently(ctx, http.MethodGet, path, nil, &page); err != nil {
			return nil, err
		}
		all = append(all, page...)
		if len(page) < limit {
			return all, nil
		}
	}
}

// doPatiently is do, waiting out the API's rate limit: setting up and tearing down many webhooks
// may exceed it on a stack with the default limit, and that is not what loadtest measures.
func (c *apiClient) doPatiently(ctx context.Context, method, path string, body, out any) error {
	for {
		err := c.do(ctx, method, path, body, out)
		var se *statusError
		if !errors.As(err, &se) || se.status != http.StatusTooManyRequests {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(max(se.retryAfter, 100*time.Millisecond)):
		}
	}
}

// do sends one request and decodes the data of the reply's envelope into out, unless out is nil.
func (c *apiClient) do(ctx context.Context, method, path string, body, out any) error {
	req, err := c.request(ctx, method, path, body)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("%s %s: read the reply: %w", method, path, err)
	}
	if resp.StatusCode >= 300 {
		secs, _ := strconv.Atoi(resp.Header.Get("Retry-After")) // absent or malformed: retry soon
		return &statusError{method: method, path: path, status: resp.StatusCode,
			retryAfter: time.Duration(secs) * time.Second, body: string(raw[:min(len(raw), 300)])}
	}
	if out == nil {
		return nil
	}
	var envelope struct {
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(raw, &envelope); err != nil {
		return fmt.Errorf("%s %s: %d with a body that is not JSON: %w", method, path, resp.StatusCode, err)
	}
	if err := json.Unmarshal(envelope.Data, out); err != nil {
		return fmt.Errorf("%s %s: unexpected data %s: %w", method, path, envelope.Data, err)
	}
	return nil
}

// request is a request to the API as the account, with body as JSON unless it is nil.
func (c *apiClient) request(ctx context.Context, method, path string, body any) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-api-key", c.key)
	return req, nil
}
