package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/sdk/client"
	temporallog "go.temporal.io/sdk/log"

	"github.com/webhookd/webhookd/destination"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/secretbox"
	"github.com/webhookd/webhookd/webhooks"
)

const webhooksUsage = `usage: webhookd webhooks list --owner-email E [--variant A|B]
       webhookd webhooks retry ID [--delivery D]
       webhookd webhooks recover ID --since T [--until T]`

// webhooksCommand lets an operator on the server do what the API's retry, resend and recover calls
// do, through the same functions (package dispatch), without an API key or curl. Webhooks are
// found by id across accounts: the operator is not a tenant.
func webhooksCommand(ctx context.Context, cfg Config, args []string, stdout, stderr io.Writer, logger *slog.Logger) error {
	if len(args) == 0 {
		return errors.New(webhooksUsage)
	}
	fs := flag.NewFlagSet("webhooks "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		email    = fs.String("owner-email", "", "the account's owner e-mail (list: required)")
		variant  = fs.String("variant", "", "A or B: only that variant's webhooks (list)")
		delivery = fs.Int64("delivery", 0, "send this delivery of the webhook again, whatever its state (retry)")
		since    = fs.String("since", "", "ISO 8601 time: recover the deliveries created from then on (recover: required)")
		until    = fs.String("until", "", "ISO 8601 time: ... and before then (recover; default now)")
	)
	// The id comes first (webhooks retry 12 --delivery 40), and the flag package stops at it.
	var id int64
	rest := args[1:]
	if args[0] == "retry" || args[0] == "recover" {
		if len(rest) == 0 {
			return errors.New(webhooksUsage)
		}
		n, err := strconv.ParseInt(rest[0], 10, 64)
		if err != nil || n < 1 {
			return fmt.Errorf("webhooks %s: %q is not a webhook id (webhooks list shows them)", args[0], rest[0])
		}
		id, rest = n, rest[1:]
	}
	if err := fs.Parse(rest); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return errors.New(webhooksUsage)
	}
	var r webhooks.Recovery
	switch args[0] {
	case "list":
		if *email == "" {
			return errors.New("--owner-email is required")
		}
		if *variant != "" && !model.Variant(*variant).Valid() {
			return fmt.Errorf("--variant: %q is not A or B", *variant)
		}
	case "retry":
		// A delivery id is positive: 0 or less would otherwise read as "no --delivery", a retry of
		// the whole webhook.
		var given bool
		fs.Visit(func(f *flag.Flag) { given = given || f.Name == "delivery" })
		if given && *delivery < 1 {
			return fmt.Errorf("--delivery: %d is not a delivery id (webhooks retry %d without --delivery retries them all)", *delivery, id)
		}
	case "recover":
		var err error
		if r, err = recoveryFlags(*since, *until); err != nil {
			return err
		}
	default:
		return errors.New(webhooksUsage)
	}
	db, err := openDB(ctx, cfg)
	if err != nil {
		return err
	}
	defer db.Close()
	// Reading needs no Temporal: the use cases without a dispatcher serve the list and the lookup.
	reads, err := operatorReads(cfg, db, logger)
	if err != nil {
		return err
	}
	if args[0] == "list" {
		access, err := newAccounts(cfg, db)
		if err != nil {
			return err
		}
		account, err := ownerAccount(ctx, access, *email)
		if err != nil {
			return err
		}
		return listWebhooks(ctx, reads, account, model.Variant(*variant), cfg.headerNames, cfg.authType, cfg.tlsKind, stdout)
	}
	w, err := reads.Find(ctx, id)
	if errors.Is(err, model.ErrNotFound) {
		return fmt.Errorf("no webhook with id %d", id)
	}
	if err != nil {
		return err
	}
	uses, closeTemporal, err := operatorUseCases(ctx, cfg, db, logger)
	if err != nil {
		return err
	}
	defer closeTemporal()
	switch {
	case args[0] == "retry" && *delivery != 0:
		if _, err := uses.Resend(ctx, w, *delivery, model.Now()); errors.Is(err, webhooks.ErrNotFound) {
			return fmt.Errorf("webhook %d has no delivery %d", w.ID, *delivery)
		} else if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "delivery %d of webhook %d queued to be sent again\n", *delivery, w.ID)
		fmt.Fprintln(stdout, *delivery)
	case args[0] == "retry":
		// As the API's retry: the count now, the signals in the background (RetryWebhookWorkflow).
		r, err := uses.RetryExhausted(ctx, w)
		if err != nil {
			return err
		}
		if r.Count == 0 {
			fmt.Fprintf(stdout, "webhook %d: no exhausted delivery to retry\n", w.ID)
		} else {
			fmt.Fprintf(stdout, "webhook %d: %d exhausted delivery(ies) being retried by workflow %s\n", w.ID, r.Count, r.WorkflowID)
		}
		fmt.Fprintln(stdout, r.Count)
	default:
		rec, err := uses.Recover(ctx, w, r)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "webhook %d: %d delivery(ies) created from %s to %s that did not succeed are being retried (workflow %q)\n",
			w.ID, rec.Queued, r.Since.Format(time.RFC3339), rec.Until.Format(time.RFC3339), rec.WorkflowID)
		fmt.Fprintln(stdout, rec.Queued)
	}
	return nil
}

// recoveryFlags reads recover's --since and --until, as the API reads its body; the use case
// checks the window.
func recoveryFlags(since, until string) (webhooks.Recovery, error) {
	var r webhooks.Recovery
	if since == "" {
		return r, errors.New("--since is required")
	}
	var err error
	if r.Since, err = time.Parse(time.RFC3339Nano, since); err != nil {
		return r, fmt.Errorf("--since: %q is not an ISO 8601 time such as 2026-11-23T10:00:00Z", since)
	}
	r.Since = r.Since.UTC()
	if until != "" {
		t, err := time.Parse(time.RFC3339Nano, until)
		if err != nil {
			return r, fmt.Errorf("--until: %q is not an ISO 8601 time such as 2026-11-23T10:00:00Z", until)
		}
		t = t.UTC()
		r.Until = &t
	}
	var invalid *webhooks.InvalidError
	if err := r.Check(model.Now()); errors.As(err, &invalid) {
		return r, fmt.Errorf("--%s: %s", invalid.Field, invalid.Detail())
	} else if err != nil {
		return r, err
	}
	return r, nil
}

// operatorUseCases are the use cases the operator's commands run, on a Temporal client of their
// own (closed by the function returned) and serve's dispatcher settings. They seal and open no
// secret, so WEBHOOKD_SECRET_KEY is not needed.
func operatorUseCases(ctx context.Context, cfg Config, db *model.DB, logger *slog.Logger) (*webhooks.Service, func(), error) {
	topts := cfg.Temporal
	topts.Logger = temporallog.NewStructuredLogger(logger.With("component", "temporal"))
	tc, err := client.DialContext(ctx, topts)
	if err != nil {
		//lint:ignore ST1005 Temporal is a name
		return nil, nil, fmt.Errorf("Temporal at %s: %w", topts.HostPort, err)
	}
	c := operatorConfig(cfg, db, logger)
	c.Dispatcher = newDispatcher(cfg, tc, dispatchServing{})
	uses, err := webhooks.New(c)
	if err != nil {
		tc.Close()
		return nil, nil, err
	}
	return uses, tc.Close, nil
}

// listWebhooks prints the live webhooks of an account, of one variant or both. The limits, the
// filter, the names of the custom headers and the authentication's type come after the URL, so
// scripts that cut the first five columns read what they always read. headers names a webhook's
// custom headers, auth the type of its authentication to the receiver, tlsKind what its TLS
// settings hold; the ordering key (docs/ordering.md) comes next, and the destination's type
// (nats, rabbitmq, kafka, sqs; https for an HTTPS endpoint) is the last column.
func listWebhooks(ctx context.Context, uses *webhooks.Service, account *model.Account, only model.Variant, headers, auth, tlsKind func(*model.Webhook) string, stdout io.Writer) error {
	fmt.Fprintln(stdout, "ID\tVARIANT\tEVENT TYPE\tVERSION\tSTATUS\tURL\tRATE LIMIT\tMAX IN FLIGHT\tFILTER\tHEADERS\tAUTH\tTLS\tORDERING\tDESTINATION")
	for _, v := range model.Variants {
		if only != "" && v != only {
			continue
		}
		f := model.WebhookFilter{Limit: 200}
		for {
			hooks, err := uses.List(ctx, model.WebhookScope{AccountID: account.ID, Variant: v}, f)
			if err != nil {
				return err
			}
			for _, w := range hooks {
				status := w.Status
				if w.Disabled() {
					status += " (disabled)"
				}
				filter := "-"
				if w.Filter != nil {
					filter = *w.Filter
				}
				ordering := "-"
				if w.OrderingKey != nil {
					ordering = *w.OrderingKey
				}
				fmt.Fprintf(stdout, "%d\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", w.ID, w.Variant, w.EventType, w.Version, status, w.URL,
					limit(w.RateLimit), limit(w.MaxInFlight), filter, headers(&w), auth(&w), tlsKind(&w), ordering, destinationType(&w))
			}
			if int64(len(hooks)) < f.Limit {
				break
			}
			f.After = hooks[len(hooks)-1].ID
		}
	}
	return nil
}

// destinationType shows the type of a webhook's destination (docs/destinations.md): https for an
// HTTPS endpoint, "?" for a stored destination that cannot be read.
func destinationType(w *model.Webhook) string {
	s, err := destination.Of(w.Destination)
	if err != nil {
		return "?"
	}
	if s == nil {
		return "https"
	}
	return s.Type
}

// headerNames shows the names of a webhook's custom headers, never their values: "-" for none, and
// "sealed" when the server key that opens them is not at hand (WEBHOOKD_SECRET_KEY unset, or in
// development no key file yet: the list does not make one).
func (c Config) headerNames(w *model.Webhook) string {
	if w.Headers == nil {
		return "-"
	}
	box, err := c.listBox()
	if err != nil {
		return "sealed"
	}
	headers, err := box.WebhookHeaders(w)
	if err != nil {
		return "sealed"
	}
	return strings.Join(slices.Sorted(maps.Keys(headers)), ",")
}

// authType shows the type of a webhook's authentication to its receiver (basic, oauth2), never
// its settings: "-" for none, "sealed" when the server key is not at hand (headerNames).
func (c Config) authType(w *model.Webhook) string {
	if w.Auth == nil {
		return "-"
	}
	box, err := c.listBox()
	if err != nil {
		return "sealed"
	}
	auth, err := box.WebhookAuth(w)
	if err != nil {
		return "sealed"
	}
	return auth.Type
}

// tlsKind shows what a webhook's TLS settings hold, never their PEMs: "mtls" (a client
// certificate), "ca" (a CA bundle), "mtls+ca" (both), empty for none, "sealed" when the server key
// is not at hand (headerNames).
func (c Config) tlsKind(w *model.Webhook) string {
	if w.TLS == nil {
		return ""
	}
	box, err := c.listBox()
	if err != nil {
		return "sealed"
	}
	t, err := box.WebhookTLS(w)
	if err != nil {
		return "sealed"
	}
	var kinds []string
	if t.ClientCert != "" {
		kinds = append(kinds, "mtls")
	}
	if t.CACert != "" {
		kinds = append(kinds, "ca")
	}
	return strings.Join(kinds, "+")
}

// listBox is the SecretBox of the server key, for the list's sealed columns; it makes no key.
func (c Config) listBox() (*secretbox.Box, error) {
	key := c.SecretKey
	if key == nil && strings.HasPrefix(c.DatabaseURL, "sqlite:") {
		if _, err := os.Stat(filepath.Join(c.DataDir, "secret.key")); err == nil {
			key, _ = c.secretKey() // unreadable: shown sealed
		}
	}
	return secretbox.New(key)
}

// limit shows a webhook's own limit, or "-" when the worker's default applies.
func limit(n *int) string {
	if n == nil {
		return "-"
	}
	return strconv.Itoa(*n)
}
