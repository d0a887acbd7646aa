package portal

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/webhookd/webhookd/destination"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/webhooks"
)

// destinationForm is what the endpoint page shows of a destination beyond HTTP
// (docs/destinations.md): the stored settings with their secrets masked, and the members of the
// edit form, which are the stored ones or, after a refusal, the ones sent. The form never holds a
// secret.
type destinationForm struct {
	Stored *webhooks.DestinationInfo
	Form   destination.Settings
}

// destinationOf reads w's destination for its page, nil for an HTTPS endpoint; sent, when not
// nil, is what a refused form sent.
func (h *endpointHandlers) destinationOf(w *model.Webhook, sent *destination.Settings) (*destinationForm, error) {
	info, err := h.webhooks.RedactedDestination(w)
	if err != nil || info == nil {
		return nil, err
	}
	d := &destinationForm{Stored: info, Form: info.Settings}
	if sent != nil {
		d.Form = *sent
	}
	return d, nil
}

// destination is POST <collection>/<id>/destination: the members of the endpoint's destination
// beyond HTTP, of its kind, changed as PATCH {"destination": {...}} does, through the same use
// case. A secret field left empty keeps the stored secret (webhooks.DestinationEdit.KeepSecrets),
// a secret's remove box removes it. The kind and the URL stay: changing them is PUT's, since the
// URL names the broker. A refusal shows the members as sent and never a secret.
func (h *endpointHandlers) destination(c echo.Context) error {
	w, err := h.load(c)
	if err != nil {
		return err
	}
	stored, err := destination.Of(w.Destination)
	if err != nil {
		return err
	}
	if stored == nil {
		return &pageError{status: http.StatusBadRequest, title: "Form not valid",
			message: "This is an HTTPS endpoint: it has no destination to change. Pointing it at a broker changes its URL, which the API's PUT does."}
	}
	if c.FormValue("do") != "save" {
		return &pageError{status: http.StatusBadRequest, title: "Form not valid", message: "Save the destination with the form's button."}
	}
	members := map[string]string{"type": stored.Type}
	for _, name := range destination.Members[stored.Type] {
		v := strings.TrimSpace(c.FormValue(name))
		switch {
		case !slices.Contains(destination.SecretMembers, name):
			members[name] = v
		case c.FormValue("remove-"+name) != "":
			members[name] = "" // removed
		case v != "":
			members[name] = v
		}
	}
	raw, err := json.Marshal(members)
	if err != nil {
		return err
	}
	sent := destination.Settings{Type: stored.Type, Subject: members["subject"], Exchange: members["exchange"], RoutingKey: members["routingKey"],
		Topic: members["topic"], Region: members["region"], AccessKeyID: members["accessKeyId"], MessageGroupID: members["messageGroupId"]}
	return h.change(c, w, webhooks.Settings{Destination: webhooks.DestinationEdit{Set: true, JSON: raw, KeepSecrets: true}},
		func(reason string) detailView {
			return detailView{destinationSent: &sent,
				destinationError: "The destination cannot be used: " + reason + ". Nothing was changed; enter again any secret you typed."}
		},
		func(*model.Webhook) detailView {
			return detailView{destinationNotice: "The destination was saved: every attempt from now on publishes with it."}
		})
}
