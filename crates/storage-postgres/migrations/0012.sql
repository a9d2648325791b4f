
-- The payment an audited action was about, as the log shows it: its
-- merchant reference and amount, kept at write time so that the log's
-- page reads them with its entries.
ALTER TABLE console_audit ADD COLUMN reference text;
ALTER TABLE console_audit ADD COLUMN amount bigint;
ALTER TABLE console_audit ADD COLUMN currency text;
