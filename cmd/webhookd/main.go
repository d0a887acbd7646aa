// Command webhookd is the webhook delivery service: `serve` runs the API and the Temporal worker,
// `migrate` applies database migrations, `apikey create` issues API keys, `version` prints the build.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/uptrace/bun"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/workflows"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

const usage = `webhookd: webhook delivery service

Usage:
  webhookd serve [--role api|worker|all]   run the API and/or the Temporal worker
  webhookd migrate                         apply database migrations
  webhookd apikey create --owner-email E [--name N]
                                           issue an API key (printed alone on the last line)
  webhookd threshold set --website ID --metric M --value N
                                           set an analytics threshold (operators only)
  webhookd threshold list [--website ID]   list thresholds
  webhookd search-attributes               print the Temporal search attributes webhookd needs,
                                           one "Name Type" per line
  webhookd version                         print the version

Configuration comes from the environment; see docs/configuration.md.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Environ(), os.Stdout, os.Stderr)
	stop()
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "webhookd:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args, environ []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return flag.ErrHelp
	}
	switch args[0] {
	case "version", "--version", "-v":
		fmt.Fprintln(stdout, "webhookd", version)
		return nil
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	case "search-attributes":
		// For scripts that prepare a namespace:
		//   webhookd search-attributes | while read -r name type; do
		//     temporal operator search-attribute create --name "$name" --type "$type"; done
		for _, key := range workflows.SearchAttributes {
			fmt.Fprintln(stdout, key.GetName(), key.GetValueType())
		}
		return nil
	}
	cfg, err := loadConfig(environ)
	if err != nil {
		return fmt.Errorf("configuration:\n%w", err)
	}
	logger := newLogger(cfg, stderr)
	switch args[0] {
	case "serve":
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		fs.SetOutput(stderr)
		role := fs.String("role", "all", "which part to run: api, worker or all")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if *role != "api" && *role != "worker" && *role != "all" {
			return fmt.Errorf("--role: %q is not api, worker or all", *role)
		}
		return serve(ctx, cfg, *role, logger)
	case "migrate":
		db, err := openDB(ctx, cfg)
		if err != nil {
			return err
		}
		defer db.Close()
		logger.Info("migrations applied")
		return nil
	case "apikey":
		return apikeyCommand(ctx, cfg, args[1:], stdout, stderr)
	case "threshold":
		return thresholdCommand(ctx, cfg, args[1:], stdout, stderr)
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("unknown command %q", args[0])
}

func newLogger(cfg Config, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.LogLevel}
	if cfg.LogJSON {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// openDB connects and migrates: every command that touches the database first brings it up to date.
func openDB(ctx context.Context, cfg Config) (*bun.DB, error) {
	db, err := model.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		return nil, err
	}
	if err := model.Migrate(ctx, db); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("migrate: %w", err)
	}
	return db, nil
}

func apikeyCommand(ctx context.Context, cfg Config, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "create" {
		return errors.New("usage: webhookd apikey create --owner-email E [--name N]")
	}
	fs := flag.NewFlagSet("apikey create", flag.ContinueOnError)
	fs.SetOutput(stderr)
	email := fs.String("owner-email", "", "e-mail of the account owner; failure alerts go there (required)")
	name := fs.String("name", "", "a label for the key")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if *email == "" {
		return errors.New("--owner-email is required")
	}
	db, err := openDB(ctx, cfg)
	if err != nil {
		return err
	}
	defer db.Close()
	key, account, err := model.CreateAPIKey(ctx, db, *email, *name)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "account %d (%s): new API key, shown once; store it now\n", account.ID, account.OwnerEmail)
	fmt.Fprintln(stdout, key)
	return nil
}

// thresholdCommand sets and lists analytics thresholds. Thresholds are an operator's business
// (spec 6.2: set through a partnership manager or support), so they have no API.
func thresholdCommand(ctx context.Context, cfg Config, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || (args[0] != "set" && args[0] != "list") {
		return errors.New("usage: webhookd threshold set --website ID --metric M --value N | webhookd threshold list [--website ID]")
	}
	fs := flag.NewFlagSet("threshold "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	website := fs.Int64("website", 0, "website id")
	metric := fs.String("metric", "", "pageViews, uniqueVisitors, totalClicks or signups")
	value := fs.Int64("value", 0, "threshold value (a positive integer)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	db, err := openDB(ctx, cfg)
	if err != nil {
		return err
	}
	defer db.Close()
	if args[0] == "set" {
		if *website < 1 || !slices.Contains(model.AnalyticsMetrics, *metric) || *value < 1 || !model.SafeInteger(*value) {
			return fmt.Errorf("--website must be a website id, --metric one of %s, --value a positive integer of at most 2^53-1", strings.Join(model.AnalyticsMetrics, ", "))
		}
		th, err := model.SetThreshold(ctx, db, *website, *metric, *value)
		if errors.Is(err, model.ErrNotFound) {
			return fmt.Errorf("website %d not found", *website)
		}
		if err != nil {
			return err
		}
		note := ""
		if th.CrossedAt != nil {
			note = " (the counter is already past it: it will not fire)"
		}
		fmt.Fprintf(stdout, "threshold set: website %d, %s reaching %d%s\n", *website, *metric, *value, note)
		return nil
	}
	ths, err := model.ListThresholds(ctx, db, *website)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, "WEBSITE\tMETRIC\tVALUE\tCROSSED")
	for _, th := range ths {
		crossed := "-"
		if th.CrossedAt != nil {
			crossed = th.CrossedAt.UTC().Format("2006-01-02T15:04:05Z")
		}
		fmt.Fprintf(stdout, "%d\t%s\t%d\t%s\n", th.WebsiteID, th.Metric, th.Value, crossed)
	}
	return nil
}
