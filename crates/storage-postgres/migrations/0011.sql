
-- A session that may enrol a second factor: opened by an invitation or
-- reset link, or one that just passed the current factor.
ALTER TABLE console_sessions ADD COLUMN may_enrol integer NOT NULL DEFAULT 0;
-- What the last code asked again before an action was given for: the
-- same request submitted twice carries the same code.
ALTER TABLE console_users ADD COLUMN totp_last_purpose text;
