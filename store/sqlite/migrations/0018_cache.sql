-- The response cache: a usage row answered from it says so, with what the
-- answer would have cost beyond what the hit was charged (the console's
-- hit rate and money saved per model and key).
ALTER TABLE usage_logs ADD COLUMN cache_hit INTEGER NOT NULL DEFAULT 0;
ALTER TABLE usage_logs ADD COLUMN cache_saved BIGINT NOT NULL DEFAULT 0;
