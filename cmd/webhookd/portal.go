package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/webhookd/webhookd/accounts"
	"github.com/webhookd/webhookd/model"
)

const portalLinkUsage = "usage: webhookd portal-link --owner-email E [--variant A|B] [--read-only] [--ttl D] | webhookd portal-link --revoke-all --owner-email E"

// portalLinkCommand prints a signed link to the owner's portal (the URL alone on the last line),
// or with --revoke-all ends every portal session of the account and revokes its unused links.
func portalLinkCommand(ctx context.Context, cfg Config, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("portal-link", flag.ContinueOnError)
	fs.SetOutput(stderr)
	email := fs.String("owner-email", "", "e-mail of the account owner (required)")
	variant := fs.String("variant", "B", "the variant whose webhooks the portal shows: A or B")
	readOnly := fs.Bool("read-only", false, "a session that sees everything and changes nothing")
	ttl := fs.Duration("ttl", accounts.DefaultPortalLinkTTL, "how long the link may wait to be opened, at most 24h")
	revokeAll := fs.Bool("revoke-all", false, "end every portal session of the account and revoke its unused links")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 0 || *email == "" {
		return errors.New(portalLinkUsage)
	}
	v := model.Variant(strings.ToUpper(*variant))
	if !v.Valid() {
		return fmt.Errorf("--variant: %q is not A or B", *variant)
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
	account, err := ownerAccount(ctx, access, *email)
	if err != nil {
		return err
	}
	if *revokeAll {
		n, err := access.RevokePortalAccess(ctx, account.ID)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "account %d (%s): %d portal sessions ended, %d unused links revoked\n", account.ID, account.OwnerEmail, n.Sessions, n.Links)
		return nil
	}
	link, err := access.IssuePortalLink(ctx, accounts.PortalLinkRequest{AccountID: account.ID, Variant: v, ReadOnly: *readOnly, TTL: ttl})
	switch {
	case errors.Is(err, accounts.ErrPortalTTLOutOfRange):
		return fmt.Errorf("--ttl: %s is not more than 0 and at most %s", *ttl, accounts.MaxPortalLinkTTL)
	case errors.Is(err, accounts.ErrPortalOff):
		return errors.New("the portal is turned off (WEBHOOKD_PORTAL=false): a link would open nothing")
	case err != nil:
		return err
	}
	mode := "read-write"
	if *readOnly {
		mode = "read-only"
	}
	fmt.Fprintf(stdout, "account %d (%s), variant %s, %s: a portal link that opens once, until %s\n",
		account.ID, account.OwnerEmail, v, mode, link.Link.ExpiresAt.UTC().Format(time.RFC3339))
	fmt.Fprintln(stdout, link.URL)
	return nil
}
