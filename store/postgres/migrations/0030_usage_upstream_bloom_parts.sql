-- The upstream request id's bloom filters (0028) split in 16 parts by a
-- hash of the id: part k is a BRIN index of the rows whose
-- hashtext(upstream_request_id) & 15 is k, and a lookup (listUsage) names
-- its id's part with the literal k, so the planner reads that part's
-- index alone. Over all time the one index read every day's filters
-- whole (0.7 MB a day, 67 MB at 50 million rows: 12,171 buffers); a
-- part's filters are a sixteenth of the ids (1,178 buffers; bench/README.md,
-- "PostgreSQL: the upstream request id over all time").
--
-- A part's filter of a range is sized for its share of the range's ids
-- (n_distinct_per_range; the default would size every part for all of
-- them) at a lower false-positive rate than 0028's 1 %: the heap pages of
-- the ranges wrongly said "maybe" were becoming the larger part of the
-- read. 128 pages a range, not 32: each part's summary of a range has
-- about 50 bytes of its own besides its filter. The writer pays the 16
-- predicates (a hash of the id each) and at most one part's summary, as
-- it paid 0028's (no cost above the noise in BenchmarkInsertUsage).
--
-- The parents are made ON ONLY and each day's parts built day by day, so
-- a day's heap is read 16 times while it is in the cache rather than the
-- whole table 16 times; usage writes wait meanwhile (upgrade in a quiet
-- hour). Days made later get the parts from the parents (makeDay's and
-- the bulk load's ATTACH PARTITION). Before PostgreSQL 14 (no bloom
-- operator classes, and 0028 made no index) there is nothing to split.
DO $$
DECLARE
	part record;
	k int;
	spec text := 'USING brin (created_at, upstream_request_id text_bloom_ops (n_distinct_per_range = 256, false_positive_rate = 0.0002))'
		' WITH (pages_per_range = 128, autosummarize = on) WHERE (hashtext(upstream_request_id) & 15) = ';
BEGIN
	IF current_setting('server_version_num')::int < 140000 THEN
		RETURN;
	END IF;
	FOR k IN 0..15 LOOP
		EXECUTE format('CREATE INDEX %I ON ONLY usage_logs %s %s', 'usage_logs_upstream_part' || k, spec, k);
	END LOOP;
	FOR part IN SELECT c.oid::regclass AS tab, c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		WHERE i.inhparent = 'usage_logs'::regclass ORDER BY c.relname LOOP
		FOR k IN 0..15 LOOP
			EXECUTE format('CREATE INDEX %I ON %s %s %s', part.relname || '_upstream_part' || k, part.tab, spec, k);
			EXECUTE format('ALTER INDEX %I ATTACH PARTITION %I', 'usage_logs_upstream_part' || k, part.relname || '_upstream_part' || k);
		END LOOP;
	END LOOP;
	DROP INDEX IF EXISTS usage_logs_upstream_request_id;
END
$$;
