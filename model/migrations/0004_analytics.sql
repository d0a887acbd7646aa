-- Analytics counters and operator-set thresholds of websites (issue 4): crossing a threshold emits
-- analytics.threshold once.

CREATE TABLE analytics_counters (
    website_id BIGINT NOT NULL REFERENCES websites (id),
    metric TEXT NOT NULL,
    value BIGINT NOT NULL,
    PRIMARY KEY (website_id, metric)
);

CREATE TABLE thresholds (
    id {{id}},
    website_id BIGINT NOT NULL REFERENCES websites (id),
    metric TEXT NOT NULL,
    value BIGINT NOT NULL,
    -- crossed_at is set once, by the increment that reaches the value (or at creation when the
    -- counter is already past it): the compare-and-set that makes the event fire exactly once.
    crossed_at {{ts}},
    created_at {{ts}} NOT NULL
);
CREATE UNIQUE INDEX thresholds_website_metric_value ON thresholds (website_id, metric, value);
