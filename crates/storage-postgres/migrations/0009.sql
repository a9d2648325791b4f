
-- A console action's outcome: `pending` until it is known (the entry is
-- written before the action), `done`, `refused` or `unknown`.
ALTER TABLE console_audit ADD COLUMN outcome text NOT NULL DEFAULT 'done';
