-- The account rule of notices (issue 41; docs/notifications.md, "The account rule"): the e-mail
-- and the chats, read by people, get at most one notice of each type per account, variant and
-- quiet period. notice_quiet is the period of each (account, variant, type) that has one: when it
-- ends, and how many notices it holds for the summary sent then. notice_holds names those notices
-- (an event each) and the webhook each is about, until the summary is recorded. Every change to
-- one period's holds is made under a write to its notice_quiet row, which orders them.
CREATE TABLE notice_quiet (
    account_id BIGINT NOT NULL,
    variant TEXT NOT NULL,
    event_type TEXT NOT NULL,
    quiet_until {{ts}} NOT NULL,
    held INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (account_id, variant, event_type)
);
CREATE INDEX notice_quiet_until ON notice_quiet (quiet_until);
CREATE TABLE notice_holds (
    event_id BIGINT PRIMARY KEY,
    account_id BIGINT NOT NULL,
    variant TEXT NOT NULL,
    event_type TEXT NOT NULL,
    webhook_id BIGINT NOT NULL
);
CREATE INDEX notice_holds_period ON notice_holds (account_id, variant, event_type, webhook_id);
CREATE INDEX notice_holds_webhook ON notice_holds (webhook_id, event_type);
