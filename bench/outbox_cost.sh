#!/usr/bin/env bash
# `bench/outbox_cost.sh [EVENTS]`: what one outbox event costs the PostgreSQL
# server (the test server of scripts/test-postgres.sh), in WAL bytes and server
# time, written two ways into copies of the outbox of a freshly migrated store:
#   numbered   as the nodes write it: inserted without `seq`, then numbered by
#              the dispatcher (SEQUENCE_OUTBOX, 100 a round): an update that
#              copies the row and adds its index entries;
#   by xid     inserted once with its transaction id (`pg_current_xact_id()`,
#              indexed with the insertion number), as a dispatcher reading in
#              (transaction id, insertion) order below the oldest transaction
#              still running would need: no second write.
# Each event is its own transaction (committed without waiting for the disk:
# the flush is the same either way and is not what is compared); EVENTS
# (default 20000) of ~600 payload bytes, the size a payment event has. Runs
# each way twice, alternated. MMC: the binary that migrates the store
# (default target/bench-release/mmc).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh # fresh_database, drop_database
EVENTS=${1:-20000}
MMC=${MMC:-${CARGO_TARGET_DIR:-target}/bench-release/mmc}
PGURL=$(./scripts/test-postgres.sh)
DB=mmc_outbox_cost
URL=$(fresh_database "$PGURL" $DB)
data=$(mktemp -d)
trap 'rm -rf "$data"; drop_database "$PGURL" $DB' EXIT
# Any command that opens the store migrates it.
MMC_STORAGE__URL=$URL "$MMC" merchants create --name Cost --data-dir "$data" >/dev/null

psql "$URL" -qAt -v ON_ERROR_STOP=1 -v events="$EVENTS" <<'SQL'
SET client_min_messages = warning;
CREATE TABLE numbered (LIKE outbox INCLUDING ALL);
-- The same columns with the same defaults, the same key, id and owner
-- indexes; the order kept by the transaction id instead of `seq`.
CREATE TABLE by_xid (LIKE outbox INCLUDING DEFAULTS INCLUDING IDENTITY);
ALTER TABLE by_xid ADD PRIMARY KEY (ins), ADD UNIQUE (id);
CREATE INDEX ON by_xid (merchant_id, environment, ins);
ALTER TABLE by_xid ADD COLUMN tx xid8 NOT NULL DEFAULT pg_current_xact_id();
CREATE INDEX ON by_xid (tx, ins);
CREATE TABLE payload AS
  SELECT decode(string_agg(lpad(to_hex((random() * 255)::int), 2, '0'), ''), 'hex') AS p
  FROM generate_series(1, 600);
CREATE TABLE results (way text, wal_per_event numeric, us_per_event numeric);

CREATE PROCEDURE write_events(tbl text, n int, number boolean) LANGUAGE plpgsql AS $$
DECLARE
  l0 pg_lsn := pg_current_wal_insert_lsn();
  t0 timestamptz := clock_timestamp();
  body bytea := (SELECT p FROM payload);
BEGIN
  SET LOCAL synchronous_commit = off;
  FOR i IN 1 .. n LOOP
    EXECUTE format('INSERT INTO %I (id, event_type, merchant_id, environment, subject_id, payload, created_ms, seq)
                    VALUES ($1, ''payment.processing'', ''mer_01jcost'', ''test'', $2, $3, 0, NULL)', tbl)
      USING gen_random_uuid()::text, gen_random_uuid()::text, body;
    COMMIT;
    SET LOCAL synchronous_commit = off;
  END LOOP;
  IF number THEN
    FOR r IN 1 .. ceil(n / 100.0) LOOP
      -- The dispatcher's numbering (SEQUENCE_OUTBOX in crates/storage-postgres/src/lib.rs).
      EXECUTE format('WITH next AS (
          SELECT ins, nextval(''outbox_seq'') AS seq
          FROM (SELECT ins FROM %I WHERE seq IS NULL ORDER BY ins LIMIT 100) unnumbered)
        UPDATE %I SET seq = next.seq FROM next WHERE %I.ins = next.ins', tbl, tbl, tbl);
      COMMIT;
      SET LOCAL synchronous_commit = off;
    END LOOP;
  END IF;
  INSERT INTO results VALUES (tbl,
    pg_wal_lsn_diff(pg_current_wal_insert_lsn(), l0) / n,
    extract(epoch FROM clock_timestamp() - t0) * 1e6 / n);
  COMMIT;
END $$;

CALL write_events('numbered', :events, true);
CALL write_events('by_xid', :events, false);
CALL write_events('numbered', :events, true);
CALL write_events('by_xid', :events, false);
SELECT format('%s: %s WAL bytes, %s µs of server time per event (mean of two runs); table and indexes %s',
              way, round(avg(wal_per_event)), round(avg(us_per_event), 1),
              pg_size_pretty(pg_total_relation_size(way::regclass)))
FROM results GROUP BY way ORDER BY way DESC;
SQL
