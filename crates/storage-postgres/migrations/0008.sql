
-- The console overview's tallies, kept by the outbox dispatcher (the host's
-- `tallies`): per merchant, environment, UTC day of creation (days since
-- 1970-01-01) and operator ('' = not chosen yet).
CREATE TABLE overview_tallies (
    merchant_id  text NOT NULL,
    environment  text NOT NULL,
    day          bigint NOT NULL,
    operator     text NOT NULL,
    payments     bigint NOT NULL,
    succeeded    bigint NOT NULL,
    finished     bigint NOT NULL,
    volume       bigint NOT NULL,
    PRIMARY KEY (merchant_id, environment, day, operator)
);
-- The operator row each hosted payment in progress is counted in.
CREATE TABLE overview_hosted (
    payment_id  text PRIMARY KEY,
    operator    text NOT NULL
);
-- The last outbox event counted; no row: never counted (the dispatcher
-- counts the stored payments first).
CREATE TABLE overview_cursor (
    id   integer PRIMARY KEY CHECK (id = 1),
    seq  bigint NOT NULL
);
