
-- The IANA zone the console shows a merchant's times in; NULL = UTC.
ALTER TABLE merchants ADD COLUMN time_zone text;
-- Console forms already carried out (a reload finds them done), by the
-- SHA-256 of merchant and form key; forgotten after a day.
CREATE TABLE console_forms_done (
    key_hash  text PRIMARY KEY,
    at_ms     bigint NOT NULL
);
CREATE INDEX console_forms_done_at ON console_forms_done (at_ms);
