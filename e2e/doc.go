// Package e2e holds webhookd's system tests: they run the real binary, or the worker and API in
// process, on a real stack (a Temporal dev server or make cluster's Temporal server, PostgreSQL,
// HTTPS receivers, an SMTP server, deployments/dev/run.sh, Chromium driving the Temporal Web UI)
// and check what a client, a receiver or an operator sees. The package has no code of its own.
//
// The tests carry the e2e build tag, so that go test ./... stays quick while editing; make test
// (and so CI) passes the tag and runs them all:
//
//	go test -tags e2e -race -count=1 -timeout 20m ./e2e/    # every system test
//	go test -tags e2e -race -count=1 -run TestWebUI ./e2e/  # one
//
// They need what make test installs first: bin/temporal, the Temporal server binaries of make
// cluster, PostgreSQL, promtool and Chromium.
package e2e
