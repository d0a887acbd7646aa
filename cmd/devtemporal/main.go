// Command devtemporal prepares the Temporal dev server's SQLite file that `make run` and the
// benchmarks keep (deployments/dev/temporal-dev.sh runs it once the server answers):
//
//	devtemporal trim-visibility [-cli <path of the Temporal CLI>] <database file>
//
// The dev server's visibility table carries an index for every column an operator might filter
// or sort on, about 45, each of which leads with the close time: a workflow's start writes them
// all and its close moves every one. That was about 40% of the dev server's CPU per delivery
// (issue 33, docs/performance-history.md). trim-visibility drops all but the indexes of the Web
// UI's list (newest first), of the workflow id, type and status, and of the columns that hold the
// namespaces' custom search attributes (webhookd's WebhookId, EventType, Variant, DeliveryState). A
// query on another column still answers, by reading the namespace's rows. Dropping is idempotent;
// the server keeps running, and a production cluster's schema is not touched (make cluster runs the
// server's own). It names every index it drops. With -cli it first reads the CLI's build
// information and refuses (exit status 3, nothing touched) a CLI other than the pinned one, whose
// dev server may lay out its visibility table otherwise.
//
// Its callers never depend on it: make run warns and goes on when it fails or refuses
// (deployments/dev/run.sh); the server then keeps its indexes and only costs more CPU.
package main

import (
	"context"
	"database/sql"
	"debug/buildinfo"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
	_ "modernc.org/sqlite"
)

// kept are the visibility indexes that serve the Web UI's list and its common filters.
var kept = []string{"default_idx", "by_workflow_id", "by_workflow_type", "by_status"}

// pinnedCLI is the Temporal CLI whose dev server's visibility table the trim was written for: the
// Makefile's TEMPORAL_CLI_VERSION (TestPinnedCLIIsTheMakefiles keeps the two equal).
const pinnedCLI = "v1.5.1"

func main() {
	usage := func() {
		fmt.Fprintln(os.Stderr, "usage: devtemporal trim-visibility [-cli <Temporal CLI>] <Temporal dev server database file>")
		os.Exit(2)
	}
	if len(os.Args) < 2 || os.Args[1] != "trim-visibility" {
		usage()
	}
	fs := flag.NewFlagSet("trim-visibility", flag.ExitOnError)
	cli := fs.String("cli", "", "the Temporal CLI that runs the dev server: refuse any but "+pinnedCLI)
	_ = fs.Parse(os.Args[2:]) // ExitOnError
	if fs.NArg() != 1 {
		usage()
	}
	path := fs.Arg(0)
	if *cli != "" {
		if err := checkCLI(*cli); err != nil {
			fmt.Fprintf(os.Stderr, "devtemporal: not trimming %s: %v\n", path, err)
			os.Exit(3)
		}
	}
	dropped, err := trimVisibility(context.Background(), path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "devtemporal:", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "devtemporal: %s: dropped %d visibility indexes: %s\n", path, len(dropped), strings.Join(dropped, ", "))
}

// checkCLI refuses a Temporal CLI other than pinnedCLI, read from the binary's Go build
// information (the version `go install ...@v1.5.1` records; `temporal --version` of such a build
// says 0.0.0-DEV).
func checkCLI(path string) error {
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read the build information of %s: %w", path, err)
	}
	if info.Main.Path != "github.com/temporalio/cli" || info.Main.Version != pinnedCLI {
		return fmt.Errorf("%s is %s %s, not the pinned Temporal CLI github.com/temporalio/cli %s, whose dev server's visibility table the trim knows",
			path, info.Main.Path, info.Main.Version, pinnedCLI)
	}
	return nil
}

// trimVisibility drops the visibility indexes that serve neither the Web UI's list nor a custom
// search attribute, and returns their names.
func trimVisibility(ctx context.Context, path string) ([]string, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, err
	}
	// The server holds the file open: wait for its write lock rather than fail.
	db, err := sql.Open("sqlite", "file:"+path+"?mode=rw&_pragma=busy_timeout(10000)")
	if err != nil {
		return nil, err
	}
	defer func() { _ = db.Close() }()
	keep, err := searchAttributeIndexes(ctx, db)
	if err != nil {
		return nil, err
	}
	keep = append(keep, kept...)
	rows, err := db.QueryContext(ctx, `SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'executions_visibility' AND sql IS NOT NULL ORDER BY name`)
	if err != nil {
		return nil, err
	}
	var drop []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, errors.Join(err, rows.Close())
		}
		if !slices.Contains(keep, name) {
			drop = append(drop, name)
		}
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, err
	}
	for _, name := range drop {
		if _, err := db.ExecContext(ctx, `DROP INDEX IF EXISTS "`+name+`"`); err != nil {
			return nil, fmt.Errorf("drop index %s: %w", name, err)
		}
	}
	return drop, nil
}

// searchAttributeIndexes names the indexes of the columns (Keyword01, Int01, ...) that hold the
// custom search attributes of every namespace in the file, from each namespace's record: a
// persistence NamespaceDetail whose config (field 2) maps column to alias in field 8.
func searchAttributeIndexes(ctx context.Context, db *sql.DB) ([]string, error) {
	rows, err := db.QueryContext(ctx, `SELECT name, data, data_encoding FROM namespaces`)
	if err != nil {
		return nil, err
	}
	var out []string
	for rows.Next() {
		var name, encoding string
		var data []byte
		if err := rows.Scan(&name, &data, &encoding); err != nil {
			return nil, errors.Join(err, rows.Close())
		}
		if !strings.EqualFold(encoding, "proto3") {
			return nil, errors.Join(fmt.Errorf("namespace %s: encoding %q, want Proto3", name, encoding), rows.Close())
		}
		columns, err := aliasedColumns(data)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("namespace %s: %w", name, err), rows.Close())
		}
		for _, c := range columns {
			// Keyword01 is indexed as by_keyword_01, Int02 as by_int_02.
			i := strings.IndexAny(c, "0123456789")
			if i <= 0 {
				return nil, errors.Join(fmt.Errorf("namespace %s: unexpected search attribute column %q", name, c), rows.Close())
			}
			out = append(out, "by_"+strings.ToLower(c[:i])+"_"+c[i:])
		}
	}
	return out, errors.Join(rows.Err(), rows.Close())
}

// aliasedColumns reads the keys of NamespaceConfig.custom_search_attribute_aliases (field 8, a
// map of column to alias, each entry a message whose key is field 1) in NamespaceDetail.config
// (field 2).
func aliasedColumns(detail []byte) ([]string, error) {
	configs, err := values(detail, 2)
	if err != nil || len(configs) == 0 {
		return nil, err
	}
	entries, err := values(configs[len(configs)-1], 8)
	if err != nil {
		return nil, err
	}
	var columns []string
	for _, entry := range entries {
		keys, err := values(entry, 1)
		if err != nil {
			return nil, err
		}
		if len(keys) > 0 {
			columns = append(columns, string(keys[len(keys)-1]))
		}
	}
	return columns, nil
}

// values returns the length-delimited values of field num in a protobuf message, in order.
func values(msg []byte, num protowire.Number) ([][]byte, error) {
	var out [][]byte
	for len(msg) > 0 {
		n, typ, k := protowire.ConsumeTag(msg)
		if k < 0 {
			return nil, protowire.ParseError(k)
		}
		msg = msg[k:]
		m := protowire.ConsumeFieldValue(n, typ, msg)
		if m < 0 {
			return nil, protowire.ParseError(m)
		}
		if n == num && typ == protowire.BytesType {
			v, _ := protowire.ConsumeBytes(msg)
			out = append(out, v)
		}
		msg = msg[m:]
	}
	return out, nil
}
