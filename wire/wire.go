// Package wire is what goes over the wire to receivers: event data in JavaScript's canonical JSON,
// the delivery bodies of both variants, their signatures and the Standard Webhooks message id.
// Receivers check these bytes, so they change only on purpose, and the tests pin them to fixed
// vectors and to what Node.js computes. It imports nothing of webhookd's, so every layer (the API
// at intake, the activities at delivery) reads the same definition.
package wire

import "strconv"

// MessageID is the Standard Webhooks webhook-id, stable across retries of one delivery: "msg_<eventID>_<webhookID>".
func MessageID(eventID, webhookID int64) string {
	return "msg_" + strconv.FormatInt(eventID, 10) + "_" + strconv.FormatInt(webhookID, 10)
}
