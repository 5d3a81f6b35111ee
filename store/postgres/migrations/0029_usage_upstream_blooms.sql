-- SQLite keeps bloom filters of each usage batch's upstream request ids
-- from this step on (store/sqlite/migrations/0029_usage_upstream_blooms.sql);
-- PostgreSQL has had them as BRIN bloom indexes since 0028, and this step
-- keeps the two stores' versions one for one.
SELECT 1;
