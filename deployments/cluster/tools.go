//go:build tools

// The programs `make cluster` builds into bin/, imported here so go.mod pins their versions:
// the Temporal server, its SQL schema tool, and the Web UI server (the version Temporal CLI v1.5.1
// embeds).

package cluster

import (
	_ "github.com/temporalio/ui-server/v2/cmd/server"
	_ "go.temporal.io/server/cmd/server"
	_ "go.temporal.io/server/cmd/tools/sql"
)
