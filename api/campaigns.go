package api

import (
	"errors"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/webhookd/webhookd/input"
	"github.com/webhookd/webhookd/sources"
)

// campaignHandlers serves variant A's campaigns: the domain whose changes emit campaign events
// (spec 3.4 and 6.1). Each change and its event commit in one transaction.
type campaignHandlers struct {
	*Server
}

type campaignJSON struct {
	ID        int64   `json:"id"`
	Name      string  `json:"name"`
	Platform  string  `json:"platform"`
	Status    string  `json:"status"`
	StartDate isoTime `json:"startDate"`
	EndDate   isoTime `json:"endDate"`
	Budget    float64 `json:"budget"`
	CreatedAt isoTime `json:"createdAt"`
	UpdatedAt isoTime `json:"updatedAt"`
}

func presentCampaign(c *sources.Campaign) campaignJSON {
	return campaignJSON{ID: c.ID, Name: c.Name, Platform: c.Platform, Status: c.Status, StartDate: isoTime(c.StartDate),
		EndDate: isoTime(c.EndDate), Budget: c.Budget, CreatedAt: isoTime(c.CreatedAt), UpdatedAt: isoTime(c.UpdatedAt)}
}

type createCampaignRequest struct {
	Name      *string  `json:"name"`
	Platform  *string  `json:"platform"`
	Budget    *float64 `json:"budget"`
	StartDate *string  `json:"startDate"`
	EndDate   *string  `json:"endDate"`
}

type patchCampaignRequest struct {
	Name    *string  `json:"name"`
	Budget  *float64 `json:"budget"`
	EndDate *string  `json:"endDate"`
	Paused  *bool    `json:"paused"`
}

func (h *campaignHandlers) create(c echo.Context) error {
	var req createCampaignRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if err := checkCampaignName(req.Name, true); err != nil {
		return err
	}
	if req.Platform == nil || !slices.Contains(sources.CampaignPlatforms, *req.Platform) {
		return validationFailed("platform", "platform is required and one of %s", strings.Join(sources.CampaignPlatforms, ", "))
	}
	if err := checkBudget(req.Budget, true); err != nil {
		return err
	}
	start, err := parseCampaignDate("startDate", req.StartDate, true)
	if err != nil {
		return err
	}
	end, err := parseCampaignDate("endDate", req.EndDate, true)
	if err != nil {
		return err
	}
	camp, err := h.sources.CreateCampaign(c.Request().Context(), accountOf(c).ID, sources.NewCampaign{
		Name: *req.Name, Platform: *req.Platform, Budget: *req.Budget, StartDate: start, EndDate: end})
	if err != nil {
		return campaignError(err)
	}
	return c.JSON(http.StatusCreated, variantA.success(presentCampaign(camp), "Campaign created"))
}

func (h *campaignHandlers) patch(c echo.Context) error {
	id, err := pathID(c, "campaign")
	if err != nil {
		return err
	}
	var req patchCampaignRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if err := checkCampaignName(req.Name, false); err != nil {
		return err
	}
	if err := checkBudget(req.Budget, false); err != nil {
		return err
	}
	ch := sources.CampaignChange{Name: req.Name, Budget: req.Budget, Paused: req.Paused}
	if req.EndDate != nil {
		end, err := parseCampaignDate("endDate", req.EndDate, false)
		if err != nil {
			return err
		}
		ch.EndDate = &end
	}
	camp, err := h.sources.ChangeCampaign(c.Request().Context(), accountOf(c).ID, id, ch)
	if err != nil {
		return campaignError(err)
	}
	return c.JSON(http.StatusOK, variantA.success(presentCampaign(camp), "Campaign updated"))
}

// campaignError words the refusals of a campaign's change.
func campaignError(err error) error {
	if errors.Is(err, sources.ErrEndBeforeStart) {
		return validationFailed("endDate", "endDate must be after startDate")
	}
	return notFoundAs(err, "campaign")
}

func (h *campaignHandlers) get(c echo.Context) error {
	id, err := pathID(c, "campaign")
	if err != nil {
		return err
	}
	camp, err := h.sources.Campaign(c.Request().Context(), accountOf(c).ID, id)
	if err != nil {
		return notFoundAs(err, "campaign")
	}
	return c.JSON(http.StatusOK, variantA.success(presentCampaign(camp), "Campaign retrieved"))
}

func (h *campaignHandlers) list(c echo.Context) error {
	limit, after, err := pageParams(c)
	if err != nil {
		return err
	}
	cs, err := h.sources.Campaigns(c.Request().Context(), accountOf(c).ID, after, limit+1)
	if err != nil {
		return err
	}
	cs = trimPage(c, cs, limit, func(cp *sources.Campaign) int64 { return cp.ID })
	out := make([]campaignJSON, len(cs))
	for i := range cs {
		out[i] = presentCampaign(&cs[i])
	}
	return c.JSON(http.StatusOK, variantA.success(out, "Campaigns retrieved"))
}

func checkCampaignName(name *string, required bool) error {
	switch {
	case name == nil && required:
		return validationFailed("name", "name is required")
	case name == nil:
		return nil
	case strings.TrimSpace(*name) == "" || len(*name) > 200:
		return validationFailed("name", "name must be 1 to 200 characters")
	case !input.SafeText(*name):
		return validationFailed("name", "name must not contain U+0000 (NUL)")
	}
	return nil
}

func checkBudget(b *float64, required bool) error {
	switch {
	case b == nil && required:
		return validationFailed("budget", "budget is required")
	case b == nil:
		return nil
	case *b < 0 || math.IsInf(*b, 0) || math.IsNaN(*b):
		return validationFailed("budget", "budget must be a non-negative number")
	}
	return nil
}

// parseCampaignDate accepts an ISO 8601 timestamp as intake reads every one (sources.ParseTime) in
// the years 0001 to 9999 (UTC); it is stored to the millisecond in UTC, as CampaignData carries it.
func parseCampaignDate(field string, s *string, required bool) (time.Time, error) {
	if s == nil {
		if required {
			return time.Time{}, validationFailed(field, "%s is required", field)
		}
		return time.Time{}, nil
	}
	t, ok := sources.ParseTime(*s)
	if !ok {
		return time.Time{}, validationFailed(field, "%s must be an ISO 8601 timestamp such as 2026-03-01T00:00:00.000Z", field)
	}
	t = t.UTC().Truncate(time.Millisecond)
	if !input.TimeInRange(t) {
		return time.Time{}, validationFailed(field, "%s must be in the years 0001 to 9999 (UTC)", field)
	}
	return t, nil
}
