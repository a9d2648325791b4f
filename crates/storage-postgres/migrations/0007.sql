
-- Failed console sign-ins per account and per client address (SHA-256 keys),
-- counted here so that every node of a fleet shares one limit.
CREATE TABLE console_sign_in_failures (
    key_hash  text PRIMARY KEY,
    failures  integer NOT NULL,
    since_ms  bigint NOT NULL
);
CREATE INDEX console_sign_in_failures_since ON console_sign_in_failures (since_ms);
