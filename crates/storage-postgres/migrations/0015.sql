
-- A prepared transaction in one round trip, without a namespace-wide lock
-- between prepared transactions: each key it checks or writes is locked in
-- (table, key) order (an existing row FOR UPDATE; an absent one by
-- inserting it, its final value or a placeholder deleted at once, which
-- holds the key against any other writer until this commits), its checks
-- are judged on what is locked, and its last write per key is applied. The
-- namespace's lock is taken shared: only an open (interactive) transaction,
-- which takes it whole, waits for prepared ones and is waited for.
-- A check that does not hold raises MM001 (the storage layer answers
-- "refused"): what was written before it is rolled back with the statement.
-- Events are written without a lock: see the outbox's numbering below.
CREATE FUNCTION mmc_apply_keyed(
    p_ns text, p_ns_key bigint,
    c_tbl text[], c_k bytea[], c_v bytea[],
    w_tbl text[], w_k bytea[], w_v bytea[],
    e_id text[], e_type text[], e_merchant text[], e_env text[], e_subject text[],
    e_url text[], e_payload bytea[], e_created bigint
) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    key record;
    cur bytea;
    absent boolean;
    inserted integer;
    final bytea;
BEGIN
    PERFORM pg_advisory_xact_lock_shared(p_ns_key);
    FOR key IN
        SELECT u.tbl, u.k, (SELECT max(w.n) FROM unnest(w_tbl, w_k) WITH ORDINALITY w(tbl, k, n)
                            WHERE w.tbl = u.tbl AND w.k = u.k) AS last_write
        FROM (SELECT DISTINCT tbl, k FROM (
                SELECT * FROM unnest(c_tbl, c_k) UNION ALL SELECT * FROM unnest(w_tbl, w_k)
              ) a(tbl, k)) u
        ORDER BY u.tbl, u.k
    LOOP
        final := CASE WHEN key.last_write IS NULL THEN NULL ELSE w_v[key.last_write] END;
        LOOP
            SELECT v INTO cur FROM kv WHERE ns = p_ns AND tbl = key.tbl AND k = key.k FOR UPDATE;
            IF FOUND THEN
                absent := false;
                EXIT;
            END IF;
            INSERT INTO kv (ns, tbl, k, v)
                VALUES (p_ns, key.tbl, key.k, coalesce(final, '\x'::bytea))
                ON CONFLICT (ns, tbl, k) DO NOTHING;
            GET DIAGNOSTICS inserted = ROW_COUNT;
            IF inserted = 1 THEN
                absent := true;
                cur := NULL;
                EXIT;
            END IF;
            -- Another writer made the key meanwhile: lock what it wrote.
        END LOOP;
        FOR i IN 1 .. coalesce(array_length(c_k, 1), 0) LOOP
            IF c_tbl[i] = key.tbl AND c_k[i] = key.k AND cur IS DISTINCT FROM c_v[i] THEN
                RAISE EXCEPTION USING ERRCODE = 'MM001', MESSAGE = 'mmc_apply_keyed: a check does not hold';
            END IF;
        END LOOP;
        IF final IS NULL AND (absent OR key.last_write IS NOT NULL) THEN
            -- Deleted, or a placeholder: gone, the key still held until commit.
            DELETE FROM kv WHERE ns = p_ns AND tbl = key.tbl AND k = key.k;
        ELSIF NOT absent AND key.last_write IS NOT NULL THEN
            UPDATE kv SET v = final WHERE ns = p_ns AND tbl = key.tbl AND k = key.k;
        END IF;
    END LOOP;
    FOR i IN 1 .. coalesce(array_length(e_id, 1), 0) LOOP
        INSERT INTO outbox
            (id, event_type, merchant_id, environment, subject_id, extra_url, payload, created_ms, seq)
            VALUES (e_id[i], e_type[i], e_merchant[i], e_env[i], e_subject[i], e_url[i],
                    e_payload[i], e_created, NULL);
    END LOOP;
    RETURN true;
END
$$;

-- The outbox without a fleet-wide lock: events are written as they come,
-- each with its insertion number (`ins`, the former `seq`), and `seq` is
-- given by the one dispatcher at a time (SEQUENCE_OUTBOX, lib.rs) to the
-- events committed since its last round, before it reads past its cursor.
-- An event committed late is numbered late, so a cursor on `seq` never
-- skips it; readers never see an event without its number (`seq` NULL
-- matches no comparison). Nodes of older versions keep writing events
-- under the outbox lock, numbered as they are written (the column's
-- default), and reading by `seq`; the dispatcher numbers under that lock
-- too, so neither order is broken while versions are mixed.
ALTER TABLE outbox RENAME COLUMN seq TO ins;
ALTER TABLE outbox ADD COLUMN seq bigint;
UPDATE outbox SET seq = ins;
CREATE SEQUENCE outbox_seq;
SELECT setval('outbox_seq', coalesce((SELECT max(ins) FROM outbox), 0) + 1, false);
ALTER TABLE outbox ALTER COLUMN seq SET DEFAULT nextval('outbox_seq');
CREATE UNIQUE INDEX outbox_seq_unique ON outbox (seq);
CREATE INDEX outbox_unnumbered ON outbox (ins) WHERE seq IS NULL;
-- A merchant's events, newest first as written (`ins`): listed at once,
-- before the dispatcher numbers them. The index follows the renamed column.
