-- Sign-in beyond a password: one-time challenges (an administrator's
-- password reset link, a login waiting for its second factor, a passkey
-- ceremony, the mark of a session single sign-on made), each kept by the
-- hash of its secret and dead after expires_at (unix milliseconds);
-- expired rows are deleted when the next is made.
CREATE TABLE signin_challenges (
    id_hash    TEXT    PRIMARY KEY,
    kind       TEXT    NOT NULL,
    user_id    BIGINT  NOT NULL DEFAULT 0,
    data       TEXT    NOT NULL DEFAULT '',
    expires_at BIGINT  NOT NULL,
    created_at BIGINT  NOT NULL
);
CREATE INDEX signin_challenges_user ON signin_challenges (user_id, kind);
CREATE INDEX signin_challenges_expires_at ON signin_challenges (expires_at);

-- A user's TOTP secret: confirmed_at 0 while enrolment waits for its first
-- code; last_step is the last 30-second step a code was accepted for, so a
-- code is good once.
CREATE TABLE totp_secrets (
    user_id      BIGINT  PRIMARY KEY REFERENCES users (id) ON DELETE CASCADE,
    secret       TEXT    NOT NULL,
    confirmed_at BIGINT  NOT NULL DEFAULT 0,
    last_step    BIGINT  NOT NULL DEFAULT 0,
    created_at   BIGINT  NOT NULL
);

-- Recovery codes, by hash; a used one is deleted.
CREATE TABLE recovery_codes (
    user_id   BIGINT  NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    code_hash TEXT    NOT NULL,
    PRIMARY KEY (user_id, code_hash)
);

-- WebAuthn credentials (passkeys): data is the library's credential as
-- JSON (public key, sign count, flags); no secret is kept.
CREATE TABLE passkeys (
    id            INTEGER PRIMARY KEY,
    user_id       BIGINT  NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    credential_id TEXT    NOT NULL UNIQUE,
    name          TEXT    NOT NULL DEFAULT '',
    data          TEXT    NOT NULL,
    created_at    BIGINT  NOT NULL,
    last_used_at  BIGINT  NOT NULL DEFAULT 0
);
CREATE INDEX passkeys_user_id ON passkeys (user_id);

-- An account an administrator linked to a single sign-on identity: the
-- provider's subject, or until the first sign-in only the email it vouches
-- for (the first sign-in with that email fills the subject in).
CREATE TABLE sso_links (
    user_id    BIGINT  PRIMARY KEY REFERENCES users (id) ON DELETE CASCADE,
    issuer     TEXT    NOT NULL,
    subject    TEXT    NOT NULL DEFAULT '',
    email      TEXT    NOT NULL DEFAULT '',
    created_at BIGINT  NOT NULL
);
CREATE UNIQUE INDEX sso_links_subject ON sso_links (issuer, subject) WHERE subject <> '';
CREATE UNIQUE INDEX sso_links_email ON sso_links (issuer, email) WHERE subject = '';
