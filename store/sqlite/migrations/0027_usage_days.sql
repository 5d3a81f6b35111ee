-- Usage rows from this step on go to one table per UTC day
-- (usage_logs_YYYYMMDD, made by the first batch of a day: usagedays.go),
-- which retention drops whole. usage_days lists them. usage_logs keeps the
-- rows written before and takes no new ones; nothing is moved.
CREATE TABLE usage_days (
    day BIGINT PRIMARY KEY
);
