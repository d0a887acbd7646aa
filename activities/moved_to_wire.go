package activities

import "github.com/webhookd/webhookd/wire"

// The wire format moved to package wire (issue 19, item 4). These forwarders exist only because the
// system tests in worker/, which call them, belong to another part of that issue and were not to be
// edited on this branch. Once merged, replace activities.X with wire.X in those tests and delete this
// file; nothing else uses it. activities/testdata/verify-signature.mjs is a symbolic link to wire's
// for the same tests, which run it by that path; point them at wire/testdata and delete it too.
var (
	BodyA             = wire.BodyA
	BodyB             = wire.BodyB
	MessageID         = wire.MessageID
	StandardSignature = wire.StandardSignature
)
