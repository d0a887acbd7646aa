package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"
	"github.com/nyaruka/phonenumbers"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/sources"
	"github.com/webhookd/webhookd/wire"
)

// Fan intake: the website platform's backend reports leads, pre-saves and analytics for a
// website; each emits its event (and counts toward analytics thresholds) in one transaction.

type leadRequest struct {
	CollectDataID string            `json:"collectDataId"`
	Email         string            `json:"email"`
	Phone         string            `json:"phone"`
	Name          string            `json:"name"`
	CustomFields  map[string]string `json:"customFields"`
	Source        struct {
		Referrer  string `json:"referrer"`
		UserAgent string `json:"userAgent"`
		IPAddress string `json:"ipAddress"`
		Country   string `json:"country"`
	} `json:"source"`
}

type presaveRequest struct {
	Platform    string  `json:"platform"`
	FanEmail    *string `json:"fanEmail"`
	ReleaseDate string  `json:"releaseDate"`
	ReleaseURL  string  `json:"releaseUrl"`
	Boosts      struct {
		FollowedArtist bool `json:"followedArtist"`
		SavedCatalog   bool `json:"savedCatalog"`
		EmailCollected bool `json:"emailCollected"`
	} `json:"boosts"`
}

// lead is POST /websites/<id>/leads: emits lead.captured at once.
func (h *websiteHandlers) lead(c echo.Context) error {
	var req leadRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if req.CustomFields == nil {
		req.CustomFields = map[string]string{}
	}
	phone, err := normalizePhone(req.Phone, req.Source.Country)
	if err != nil {
		return err
	}
	return h.fanEvent(c, "lead.captured", func(w *sources.Website) any {
		return struct {
			WebsiteID     int64             `json:"websiteId"`
			BrandID       int64             `json:"brandId"`
			CollectDataID string            `json:"collectDataId"`
			Email         string            `json:"email"`
			Phone         string            `json:"phone"`
			Name          string            `json:"name"`
			CustomFields  map[string]string `json:"customFields"`
			Source        any               `json:"source"`
		}{w.ID, w.BrandID, req.CollectDataID, req.Email, phone, req.Name, req.CustomFields, req.Source}
	})
}

// presave is POST /websites/<id>/presaves: emits presave.completed.
func (h *websiteHandlers) presave(c echo.Context) error {
	var req presaveRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	return h.fanEvent(c, "presave.completed", func(w *sources.Website) any {
		return struct {
			WebsiteID   int64   `json:"websiteId"`
			BrandID     int64   `json:"brandId"`
			Platform    string  `json:"platform"`
			FanEmail    *string `json:"fanEmail"`
			ReleaseDate string  `json:"releaseDate"`
			ReleaseURL  string  `json:"releaseUrl"`
			Boosts      any     `json:"boosts"`
		}{w.ID, w.BrandID, req.Platform, req.FanEmail, req.ReleaseDate, req.ReleaseURL, req.Boosts}
	})
}

// fanEvent validates the event data built from a website, then stores the event with a signup
// counted (and any threshold that crossed) in one transaction.
func (h *websiteHandlers) fanEvent(c echo.Context, eventType string, build func(*sources.Website) any) error {
	id, err := pathID(c, "website")
	if err != nil {
		return err
	}
	var first *model.PublishResult
	err = h.publisher.Change(c.Request().Context(), func(ctx context.Context, cs *model.ChangeSet) error {
		w, err := sources.GetWebsite(ctx, cs.Tx, accountOf(c).ID, id, true)
		if err != nil {
			return err
		}
		if w.Status != sources.WebsitePublished {
			return conflict("the website is " + w.Status + "; fans reach published websites only")
		}
		raw, err := json.Marshal(build(w))
		if err != nil {
			return err
		}
		data, err := wire.CanonicalJSON(raw)
		if err != nil {
			return err
		}
		if err := sources.ValidateEventData(eventType, raw); err != nil {
			var de *model.DataError
			if errors.As(err, &de) {
				field := strings.TrimPrefix(de.Field, "data.")
				return validationFailed(field, "%s %s", field, de.Reason)
			}
			return err
		}
		if first, err = cs.Emit(ctx, model.NewEvent{AccountID: w.AccountID, Variant: model.VariantB, EventType: eventType, Data: string(data)}); err != nil {
			return err
		}
		_, err = count(ctx, cs, w, sources.MetricSignups, 1)
		return err
	})
	if err != nil {
		return notFoundAs(err, "website")
	}
	// The same shape as POST <prefix>/events answers: one intake reply everywhere.
	return c.JSON(http.StatusAccepted, variantB.success(map[string]any{"id": first.Event.ID, variantB.spec.TypeField: first.Event.EventType, "matched": first.Event.Matched}, "Event accepted"))
}

// analytics is POST /websites/<id>/analytics {metric, increment}.
func (h *websiteHandlers) analytics(c echo.Context) error {
	id, err := pathID(c, "website")
	if err != nil {
		return err
	}
	var req struct {
		Metric    string   `json:"metric"`
		Increment *jsonInt `json:"increment"`
	}
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	counted := []string{"pageViews", "uniqueVisitors", "totalClicks"}
	switch {
	case req.Metric == sources.MetricSignups:
		return validationFailed("metric", "signups are counted by webhookd from leads and pre-saves")
	case !slices.Contains(counted, req.Metric):
		return validationFailed("metric", "metric must be one of %s", strings.Join(counted, ", "))
	case req.Increment == nil || *req.Increment < 1 || *req.Increment > 1_000_000:
		return validationFailed("increment", "increment must be an integer from 1 to 1000000")
	}
	var value int64
	err = h.publisher.Change(c.Request().Context(), func(ctx context.Context, cs *model.ChangeSet) error {
		w, err := sources.GetWebsite(ctx, cs.Tx, accountOf(c).ID, id, true)
		if err != nil {
			return err
		}
		value, err = count(ctx, cs, w, req.Metric, int64(*req.Increment))
		return err
	})
	if err != nil {
		return notFoundAs(err, "website")
	}
	return c.JSON(http.StatusOK, variantB.success(map[string]any{"metric": req.Metric, "value": value}, "Counted"))
}

// count adds to a counter and emits the threshold events it causes, in the change.
func count(ctx context.Context, cs *model.ChangeSet, w *sources.Website, metric string, n int64) (int64, error) {
	value, evs, err := sources.AddToCounter(ctx, cs.Tx, w, metric, n)
	if err != nil {
		return 0, err
	}
	for _, ev := range evs {
		if _, err := cs.Emit(ctx, ev); err != nil {
			return 0, err
		}
	}
	return value, nil
}

// normalizePhone brings a phone number to E.164; a national number needs the fan's country.
func normalizePhone(phone, country string) (string, error) {
	if strings.TrimSpace(phone) == "" {
		return "", validationFailed("phone", "phone is required")
	}
	num, err := phonenumbers.Parse(phone, strings.ToUpper(country))
	if err != nil || !phonenumbers.IsValidNumber(num) {
		return "", validationFailed("phone", "phone is not a valid number (international +CC form, or national with source.country)")
	}
	return phonenumbers.Format(num, phonenumbers.E164), nil
}
