-- PostgreSQL's step 40 announces credits to the other gateway instances
-- on the database (LISTEN/NOTIFY). A SQLite file has one gateway, whose
-- ledger hears of its own credits: nothing to do here, and the step is
-- kept so that version 40 means the same in both stores.
SELECT 1;
