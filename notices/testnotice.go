package notices

import (
	"encoding/json"
	"fmt"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/wire"
)

// TestNotice is the notice.test event to the notification endpoint c alone, about c itself: the
// owner's check that notices reach it. Published (webhooks.Service.TestChannel), its one delivery
// starts after the commit and is retried like any notice's.
func TestNotice(c *model.Webhook) (model.NewEvent, error) {
	d := model.NoticeData{
		AccountID: c.AccountID, Variant: c.Variant, WebhookID: c.ID, URL: c.URL, Status: c.Status, At: model.Now().UTC(),
		Channel: c.Kind, Message: "This is a test notice from webhookd: notices about this account's webhooks will arrive here.",
	}
	data, err := json.Marshal(d)
	if err != nil {
		return model.NewEvent{}, fmt.Errorf("encode test notice: %w", err)
	}
	canonical, err := wire.CanonicalJSON(data)
	if err != nil {
		return model.NewEvent{}, fmt.Errorf("encode test notice: %w", err)
	}
	return model.NewEvent{AccountID: c.AccountID, Variant: c.Variant, EventType: model.NoticeTest, Data: string(canonical), Notice: c.ID, Channels: []model.Webhook{*c}}, nil
}
