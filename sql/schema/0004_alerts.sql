-- Alerts and their webhook delivery state (analytics/alerts.py).
-- One row per alert, keyed by a dedupe key built from what the alert is about
-- (rule, cluster, job, window ...): evaluating the same facts again finds the
-- row and adds nothing. A row is marked sent only after the receiver answered
-- 2xx; until then it is retried with backoff, across restarts. The target is
-- the configured name of a webhook, never its URL, and last_error is written
-- with secrets removed.
CREATE TABLE alerts (
    dedupe_key       VARCHAR PRIMARY KEY,
    rule             VARCHAR NOT NULL,
    target           VARCHAR NOT NULL,      -- 'platform' or 'team:<team>'
    title            VARCHAR NOT NULL,
    payload          VARCHAR NOT NULL,      -- JSON: the alert's facts, whatever the wire format
    created_at       TIMESTAMPTZ NOT NULL,
    state            VARCHAR NOT NULL,      -- pending | failed (retried at next_attempt_at) | sent
    attempts         INTEGER NOT NULL DEFAULT 0,
    next_attempt_at  TIMESTAMPTZ NOT NULL,
    last_error       VARCHAR,
    sent_at          TIMESTAMPTZ
);
