-- The upstream request id filter (the vendor's id, looked for when the
-- gateway's own request id matches nothing) had no index: over a day it
-- read the whole day (555,555 rows: 190-260 ms), and a hash or a b-tree
-- on the column would cost 35 to 78 bytes on every row. A BRIN index keeps a
-- bloom filter of the ids of every 32 pages (about 900 rows): 1.3 bytes a
-- row, and a lookup reads the few ranges whose filter says "maybe" (about
-- 1 % of them wrongly). created_at leads as a min/max column: the planner
-- takes a BRIN index's selectivity from the best correlation among the
-- columns a query names, and a random id has none, so without it the
-- index looks as dear as a scan; listUsage always names created_at with
-- the upstream id (bench/README.md, "PostgreSQL: the upstream request id
-- over a day").
--
-- The range a day's rows are being appended to is summarized only when it
-- is full (autosummarize: at autovacuum's next round), so a write pays
-- nothing for this index; until then a lookup reads that range whole.
-- Bloom operator classes need PostgreSQL 14 or later: on an older server
-- the index is not made (the filter reads the day, as before) rather than
-- the upgrade failing.
DO $$
BEGIN
	IF current_setting('server_version_num')::int >= 140000 THEN
		CREATE INDEX usage_logs_upstream_request_id ON usage_logs
			USING brin (created_at, upstream_request_id text_bloom_ops)
			WITH (pages_per_range = 32, autosummarize = on);
	ELSE
		RAISE NOTICE 'PostgreSQL before 14 has no bloom operator classes: the upstream request id filter reads whole days';
	END IF;
END
$$;
