-- The gateway's first schema.
--
-- Kept close to portable SQL so the PostgreSQL store can start from a copy:
-- BIGINT, INTEGER and TEXT only; booleans are 0/1 INTEGERs; times are unix
-- milliseconds in BIGINT columns, NULL where "no time" has a meaning. Only the
-- id columns are SQLite's own (PostgreSQL: BIGINT GENERATED ALWAYS AS IDENTITY).

-- AUTOINCREMENT on users, tokens and codes so a deleted row's id is never
-- handed out again: caches and logs refer to these ids.
CREATE TABLE users (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    username         TEXT    NOT NULL UNIQUE,
    password_hash    TEXT    NOT NULL DEFAULT '',
    role             TEXT    NOT NULL DEFAULT 'user',
    status           TEXT    NOT NULL DEFAULT 'enabled',
    quota            BIGINT  NOT NULL DEFAULT 0,
    used_quota       BIGINT  NOT NULL DEFAULT 0,
    request_count    BIGINT  NOT NULL DEFAULT 0,
    -- NULL rather than '' when the user has no code, so UNIQUE holds only
    -- among real codes.
    invite_code      TEXT    UNIQUE,
    invited_by       BIGINT  NOT NULL DEFAULT 0,
    invitation_quota BIGINT  NOT NULL DEFAULT 0,
    created_at       BIGINT  NOT NULL
);

CREATE TABLE tokens (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id     BIGINT  NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    name        TEXT    NOT NULL DEFAULT '',
    key_hash    TEXT    NOT NULL UNIQUE,
    key_prefix  TEXT    NOT NULL DEFAULT '',
    status      TEXT    NOT NULL DEFAULT 'enabled',
    expires_at  BIGINT,                         -- NULL: never expires
    quota_limit BIGINT  NOT NULL DEFAULT 0,
    used_quota  BIGINT  NOT NULL DEFAULT 0,
    models      TEXT    NOT NULL DEFAULT '',    -- JSON array; '' means every model
    created_at  BIGINT  NOT NULL
);
CREATE INDEX tokens_user_id ON tokens (user_id);

CREATE TABLE redemption_codes (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    code        TEXT    NOT NULL UNIQUE,
    quota       BIGINT  NOT NULL,
    used_by     BIGINT  NOT NULL DEFAULT 0,     -- 0 while unused
    created_at  BIGINT  NOT NULL,
    redeemed_at BIGINT                          -- NULL while unused
);

CREATE TABLE sessions (
    id_hash    TEXT    PRIMARY KEY,
    user_id    BIGINT  NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    expires_at BIGINT  NOT NULL,
    created_at BIGINT  NOT NULL
);
CREATE INDEX sessions_expires_at ON sessions (expires_at);

-- Usage and tasks are history: no foreign keys, so deleting a user never
-- fails or rewrites the books, and one stray row cannot fail a whole batch.
CREATE TABLE usage_logs (
    id                INTEGER PRIMARY KEY,
    created_at        BIGINT  NOT NULL,
    user_id           BIGINT  NOT NULL,
    token_id          BIGINT  NOT NULL DEFAULT 0,
    model             TEXT    NOT NULL DEFAULT '',
    channel           TEXT    NOT NULL DEFAULT '',
    endpoint          TEXT    NOT NULL DEFAULT '',
    prompt_tokens     BIGINT  NOT NULL DEFAULT 0,
    completion_tokens BIGINT  NOT NULL DEFAULT 0,
    cached_tokens     BIGINT  NOT NULL DEFAULT 0,
    reasoning_tokens  BIGINT  NOT NULL DEFAULT 0,
    cost              BIGINT  NOT NULL DEFAULT 0,
    status            INTEGER NOT NULL DEFAULT 0,
    estimated         INTEGER NOT NULL DEFAULT 0,
    stream            INTEGER NOT NULL DEFAULT 0,
    latency_ms        BIGINT  NOT NULL DEFAULT 0,
    ttfb_ms           BIGINT  NOT NULL DEFAULT 0,
    error             TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX usage_logs_user_id_created_at ON usage_logs (user_id, created_at);
CREATE INDEX usage_logs_created_at ON usage_logs (created_at);

CREATE TABLE tasks (
    id          TEXT    PRIMARY KEY,
    user_id     BIGINT  NOT NULL,
    token_id    BIGINT  NOT NULL DEFAULT 0,
    channel     TEXT    NOT NULL DEFAULT '',
    model       TEXT    NOT NULL DEFAULT '',
    upstream_id TEXT    NOT NULL DEFAULT '',
    status      TEXT    NOT NULL,
    reserved    BIGINT  NOT NULL DEFAULT 0,
    result      TEXT    NOT NULL DEFAULT '',
    created_at  BIGINT  NOT NULL,
    updated_at  BIGINT  NOT NULL
);
CREATE INDEX tasks_status_updated_at ON tasks (status, updated_at);
