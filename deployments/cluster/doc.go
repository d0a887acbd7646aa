// Package cluster holds `make cluster`: cluster.sh, the Temporal server and Web UI configuration it
// runs them with, and (in tools.go) the pinned programs that the Makefile builds into bin/. It is a
// module of its own so the service's go.mod does not carry the Temporal server's dependencies.
package cluster
