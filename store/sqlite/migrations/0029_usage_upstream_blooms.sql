-- Bloom filters of the upstream request ids of the rows the usage writer
-- put in a day table, a filter for each run of consecutive ids it wrote
-- (first_id .. last_id; a day's ids are day * 2^32 + n), cut in parts by
-- the ids' hash and kept by part, so that a lookup by an upstream id
-- (vendors make them at random, so they have no index) reads its part of
-- a day's filters, a few pages, and searches only the ranges whose filter
-- may hold it and the ranges no filter covers
-- (store/sqlite/upstreamblooms.go). A day's filters go with its table.
CREATE TABLE usage_upstream_blooms (
    part     INTEGER NOT NULL,
    first_id INTEGER NOT NULL,
    last_id  INTEGER NOT NULL,
    bits     BLOB    NOT NULL,
    PRIMARY KEY (part, first_id)
) WITHOUT ROWID;
