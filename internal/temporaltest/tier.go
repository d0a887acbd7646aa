//go:build !integration && !e2e && !record

package temporaltest

// serverTier is false in the plain unit run: no test process starts a Temporal server.
const serverTier = false
