
-- A console user's recovery codes (each stands in for an authenticator
-- code once): only their SHA-256, and when and for what each was used.
CREATE TABLE console_recovery_codes (
    user_id     text NOT NULL,
    code_hash   text NOT NULL,
    created_ms  bigint NOT NULL,
    used_ms     bigint,
    used_for    text,
    PRIMARY KEY (user_id, code_hash)
);
-- What a page shows once after a form, sealed under the browser's session
-- token, and gone at its first read.
CREATE TABLE console_shown_once (
    token_hash  text NOT NULL,
    what        text NOT NULL,
    sealed      text NOT NULL,
    expires_ms  bigint NOT NULL,
    PRIMARY KEY (token_hash, what)
);
-- A key's name, visible prefix, last use (to the minute), and the console
-- form's idempotency key it was made with.
ALTER TABLE api_keys ADD COLUMN name text;
ALTER TABLE api_keys ADD COLUMN shown_prefix text;
ALTER TABLE api_keys ADD COLUMN last_used_ms bigint;
ALTER TABLE api_keys ADD COLUMN request_key text;
