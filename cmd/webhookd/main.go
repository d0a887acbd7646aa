// Command webhookd is the webhook delivery service: `serve` runs the API and the Temporal worker,
// `migrate` applies database migrations, `apikey` issues, lists and revokes API keys, `webhooks`
// lists, retries and recovers webhooks for an operator, `portal-link` makes and revokes links to
// the owner's portal, `listen` forwards a webhook's events to a receiver under development,
// `version` prints the build.
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
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/webhookd/webhookd/accounts"
	"github.com/webhookd/webhookd/audit"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/sources"
	"github.com/webhookd/webhookd/webhooks"
	"github.com/webhookd/webhookd/workflows"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

const usage = `webhookd: webhook delivery service

Usage:
  webhookd serve [--role api|worker|all]   run the API and/or the Temporal worker
  webhookd migrate                         apply database migrations
  webhookd apikey create --owner-email E [--name N] [--scope read|publish|manage]
                                           issue an API key (printed alone on the last line): read
                                           may only read, publish may publish events and read the
                                           event log, manage (the default) may do everything
  webhookd apikey list --owner-email E     list an account's keys: id, prefix, name, scope, created,
                                           revoked
  webhookd apikey revoke ID                revoke a key: its next request answers 401, its portal
                                           links no longer open, their sessions end
  webhookd webhooks list --owner-email E [--variant A|B]
                                           list an account's webhooks: id, variant, type, status, URL,
                                           rate limit, max in flight ("-": the worker's default)
  webhookd webhooks retry ID [--delivery D]
                                           retry a webhook's exhausted deliveries, or send one
                                           delivery again (the count or id on the last line)
  webhookd webhooks recover ID --since T [--until T]
                                           retry every delivery created in [T, until) that did not
                                           succeed, in the background (the count on the last line)
  webhookd portal-link --owner-email E [--variant A|B] [--read-only] [--ttl D]
                                           a link to the owner's portal that opens once (the URL
                                           on the last line; variant B unless --variant, ttl 1h)
  webhookd portal-link --revoke-all --owner-email E
                                           end the account's portal sessions, revoke unused links
  webhookd threshold set --website ID --metric M --value N
                                           set an analytics threshold (operators only)
  webhookd threshold list [--website ID]   list thresholds
  webhookd listen --webhook ID --forward-to URL [--api URL] [--key KEY] [--variant A|B] [--since T]
                                           forward a webhook's new events, signed as deliveries, to a
                                           receiver on this machine (API and key also from
                                           WEBHOOKD_API_URL and WEBHOOKD_API_KEY; docs/signatures.md)
  webhookd search-attributes               print the Temporal search attributes webhookd needs,
                                           one "Name Type" per line
  webhookd version                         print the version

Configuration comes from the environment; see docs/configuration.md.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Environ(), os.Stdout, os.Stderr)
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "webhookd:", err)
	}
	if err != nil {
		os.Exit(exitCode(err))
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
	case "listen":
		// A client of the API on the developer's machine: none of the service's configuration.
		return listenCommand(ctx, args[1:], environ, stdout, stderr)
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
		return apikeyCommand(operator(ctx, args), cfg, args[1:], stdout, stderr)
	case "threshold":
		return thresholdCommand(ctx, cfg, args[1:], stdout, stderr)
	case "webhooks":
		return webhooksCommand(operator(ctx, args), cfg, args[1:], stdout, stderr, logger)
	case "portal-link":
		return portalLinkCommand(operator(ctx, args), cfg, args[1:], stdout, stderr)
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("unknown command %q", args[0])
}

// operator is ctx of an operator's command that may change an account: the audit log names the
// CLI and the command (its first two words: webhookd apikey create) as who made the change.
func operator(ctx context.Context, args []string) context.Context {
	command := "webhookd " + args[0]
	if len(args) > 1 && !strings.HasPrefix(args[1], "-") && args[0] != "portal-link" {
		command += " " + args[1]
	}
	return audit.WithActor(ctx, audit.CLI(command))
}

func newLogger(cfg Config, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.LogLevel}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// openDB connects and migrates: every command that touches the database first brings it up to date.
func openDB(ctx context.Context, cfg Config) (*model.DB, error) {
	db, err := model.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		return nil, err
	}
	if err := model.Migrate(ctx, db.DB); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("migrate: %w", err)
	}
	return db, nil
}

// newAccounts builds the use cases of accounts, API keys and portal access on db, for serve and
// for the operator's commands alike.
// operatorSources are the sources' use cases for the operator's commands, which publish nothing
// and need no Temporal.
func operatorSources(cfg Config, db *model.DB) (*sources.Service, error) {
	uses, err := operatorReads(cfg, db, nil)
	if err != nil {
		return nil, err
	}
	return sources.New(sources.Config{DB: db, Publisher: uses, SiteBaseURL: cfg.SiteBaseURL, RequestTimeout: cfg.TemporalRequestTimeout})
}

// operatorReads are the webhooks' use cases without Temporal, for the operator's commands that
// read, or change only the database: no dispatcher, so nothing that needs Temporal is served.
func operatorReads(cfg Config, db *model.DB, logger *slog.Logger) (*webhooks.Service, error) {
	return webhooks.New(operatorConfig(cfg, db, logger))
}

// operatorConfig is the configuration of the operator's use cases, with sources' table of event
// versions (docs/events.md, "Versions"); those that need Temporal add a dispatcher.
func operatorConfig(cfg Config, db *model.DB, logger *slog.Logger) webhooks.Config {
	return webhooks.Config{DB: db, Logger: logger, MaxWebhooks: cfg.MaxWebhooks,
		RequestTimeout: cfg.TemporalRequestTimeout, Notices: cfg.noticeRules(), Versions: sources.Versions()}
}

// ownerAccount is the account whose owner's e-mail is email, for the operator's commands that name
// an account by it; an unknown e-mail is an error that says how to make the account.
func ownerAccount(ctx context.Context, access *accounts.Service, email string) (*model.Account, error) {
	account, err := access.Account(ctx, email)
	if errors.Is(err, accounts.ErrNotFound) {
		return nil, fmt.Errorf("no account with owner e-mail %s (webhookd apikey create makes one)", email)
	}
	return account, err
}

func newAccounts(cfg Config, db *model.DB) (*accounts.Service, error) {
	return accounts.New(accounts.Config{DB: db, PublicURL: cfg.PublicURL, PortalOff: !cfg.Portal})
}

const apikeyUsage = "usage: webhookd apikey create --owner-email E [--name N] [--scope read|publish|manage] | webhookd apikey list --owner-email E | webhookd apikey revoke ID"

// apikeyCommand issues, lists and revokes API keys. A key is shown in full once, when issued;
// afterwards by its id and its public prefix (whk_ and the lookup id).
func apikeyCommand(ctx context.Context, cfg Config, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || !slices.Contains([]string{"create", "list", "revoke"}, args[0]) {
		return errors.New(apikeyUsage)
	}
	fs := flag.NewFlagSet("apikey "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	email := fs.String("owner-email", "", "e-mail of the account owner; failure alerts go there (create, list: required)")
	name := fs.String("name", "", "a label for the key (create)")
	scope := fs.String("scope", string(model.ScopeManage), "what the key may do: read, publish or manage (create)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if !model.KeyScope(*scope).Valid() {
		return fmt.Errorf("--scope %q is not a scope: read, publish or manage", *scope)
	}
	var revokeID int64
	switch args[0] {
	case "revoke":
		if fs.NArg() != 1 {
			return errors.New("usage: webhookd apikey revoke ID (the id apikey list shows)")
		}
		id, err := strconv.ParseInt(fs.Arg(0), 10, 64)
		if err != nil || id < 1 {
			return fmt.Errorf("apikey revoke: %q is not a key id (apikey list shows them)", fs.Arg(0))
		}
		revokeID = id
	default:
		if *email == "" {
			return errors.New("--owner-email is required")
		}
		if fs.NArg() != 0 {
			return errors.New(apikeyUsage)
		}
	}
	db, err := openDB(ctx, cfg)
	if err != nil {
		return err
	}
	defer db.Close()
	access, err := newAccounts(cfg, db)
	if err != nil {
		return err
	}
	switch args[0] {
	case "create":
		key, account, err := access.CreateAPIKey(ctx, *email, *name, model.KeyScope(*scope))
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "account %d (%s): new API key, scope %s, shown once; store it now\n", account.ID, account.OwnerEmail, *scope)
		fmt.Fprintln(stdout, key)
	case "list":
		keys, err := access.APIKeys(ctx, *email)
		if errors.Is(err, accounts.ErrNotFound) {
			return fmt.Errorf("no account with owner e-mail %s", *email)
		}
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, "ID\tKEY\tNAME\tSCOPE\tCREATED\tREVOKED")
		for _, k := range keys {
			revoked := "-"
			if k.RevokedAt != nil {
				revoked = k.RevokedAt.UTC().Format(time.RFC3339)
			}
			fmt.Fprintf(stdout, "%d\t%s...\t%s\t%s\t%s\t%s\n", k.ID, k.KeyID(), k.Name, k.Scope, k.CreatedAt.UTC().Format(time.RFC3339), revoked)
		}
	case "revoke":
		key, ended, err := access.RevokeAPIKey(ctx, revokeID)
		if errors.Is(err, accounts.ErrNotFound) {
			return fmt.Errorf("no API key with id %d", revokeID)
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "API key %d (%s..., account %d) revoked at %s: it answers 401 from its next request\n",
			key.ID, key.KeyID(), key.AccountID, key.RevokedAt.UTC().Format(time.RFC3339))
		fmt.Fprintf(stdout, "revoked key %d; refused %d unused portal links and ended %d portal sessions made with it\n",
			key.ID, ended.Links, ended.Sessions)
		fmt.Fprintln(stdout, key.ID)
	}
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
	sites, err := operatorSources(cfg, db)
	if err != nil {
		return err
	}
	if args[0] == "set" {
		th, err := sites.SetThreshold(ctx, *website, *metric, *value)
		if errors.Is(err, model.ErrNotFound) {
			return fmt.Errorf("website %d not found", *website)
		}
		if errors.Is(err, sources.ErrInvalidThreshold) {
			return fmt.Errorf("--website must be a website id, --metric one of %s, --value a positive integer of at most 2^53-1", strings.Join(sources.AnalyticsMetrics, ", "))
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
	ths, err := sites.Thresholds(ctx, *website)
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

// usageError is a command line that cannot run: main exits 2 on it, as for -h.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{fmt.Sprintf(format, args...)} }

// exitCode is main's exit code for run's error: 2 for a command line that cannot run, 1 otherwise.
func exitCode(err error) int {
	var ue *usageError
	if errors.Is(err, flag.ErrHelp) || errors.As(err, &ue) {
		return 2
	}
	return 1
}
