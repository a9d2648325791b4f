
-- A disabled webhook endpoint receives no new event; NULL = enabled.
ALTER TABLE webhook_endpoints ADD COLUMN disabled_ms bigint;
