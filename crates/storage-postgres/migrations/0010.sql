
-- The console user who made a key (maker-checker counts it as that
-- person); NULL = a service key, made with the command line.
ALTER TABLE api_keys ADD COLUMN created_by_user text;
-- Until when a console user may approve no payout (their access was
-- reset); NULL = no hold.
ALTER TABLE console_users ADD COLUMN approvals_held_until_ms bigint;
