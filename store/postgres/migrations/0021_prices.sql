-- The price tier a usage row was billed at (issue 33): the prompt length
-- in tokens the tier applies above, 0 for the model's base prices.
ALTER TABLE usage_logs ADD COLUMN price_tier BIGINT NOT NULL DEFAULT 0;
