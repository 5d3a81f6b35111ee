-- PostgreSQL's step 13 announces changes to keys and users to the other
-- gateway instances on the database (LISTEN/NOTIFY). A SQLite file has one
-- gateway, which drops its cached entries itself: nothing to do here, and
-- the step is kept so that version 13 means the same in both stores.
SELECT 1;
