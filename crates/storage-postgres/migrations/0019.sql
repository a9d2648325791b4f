
-- A prepared transaction in one function: what migrations 15 to 18 compose
-- in three (yield to open transactions, the written tables' locks shared in
-- one order, the keys locked in order, the checks, the writes, the events
-- last), with the same answers, in fewer statements. The node sends each
-- key once, with its final value and what its checks expect, so the keys
-- are read in one pass, sorted, with no per-key subquery or loop over the
-- checks. A key is inserted first and looked up only when it exists: most
-- keys a create writes are new, so one statement each instead of a lookup
-- that finds nothing and then the insert. Keys are still locked one at a
-- time in (table, key) order, as by the older functions, so two writers of
-- the same keys wait for each other, never for each other's other keys
-- first. `mmc_apply_yielding` stays for nodes of older versions.
CREATE OR REPLACE FUNCTION mmc_apply_prepared(
    p_tbl_keys bigint[],
    p_ns text, p_ns_key bigint,
    k_tbl text[], k_k bytea[], k_v bytea[], k_written boolean[],
    k_checked boolean[], k_expect bytea[],
    e_id text[], e_type text[], e_merchant text[], e_env text[], e_subject text[],
    e_url text[], e_payload bytea[], e_created bigint
) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    key record;
    cur bytea;
    absent boolean;
    inserted integer;
    i integer;
BEGIN
    -- Yield to open transactions (migration 18).
    PERFORM set_config('lock_timeout',
        greatest(1, (extract(epoch FROM current_setting('deadlock_timeout')::interval) * 500)::bigint)::text,
        true);
    PERFORM pg_advisory_xact_lock_shared(t)
        FROM (SELECT DISTINCT t FROM unnest(p_tbl_keys) t ORDER BY t) tables;
    PERFORM pg_advisory_xact_lock_shared(p_ns_key);
    FOR key IN
        SELECT * FROM unnest(k_tbl, k_k, k_v, k_written, k_checked, k_expect)
            u(tbl, k, v, written, checked, expect)
        ORDER BY tbl, k
    LOOP
        LOOP
            -- Absent: made with its final value (or a placeholder), and held.
            INSERT INTO kv (ns, tbl, k, v)
                VALUES (p_ns, key.tbl, key.k, coalesce(key.v, '\x'::bytea))
                ON CONFLICT (ns, tbl, k) DO NOTHING;
            GET DIAGNOSTICS inserted = ROW_COUNT;
            IF inserted = 1 THEN
                absent := true;
                cur := NULL;
                EXIT;
            END IF;
            SELECT kv.v INTO cur FROM kv WHERE ns = p_ns AND tbl = key.tbl AND k = key.k FOR UPDATE;
            IF FOUND THEN
                absent := false;
                EXIT;
            END IF;
            -- Another writer deleted the key meanwhile: make it again.
        END LOOP;
        IF key.checked AND cur IS DISTINCT FROM key.expect THEN
            RAISE EXCEPTION USING ERRCODE = 'MM001', MESSAGE = 'mmc_apply_prepared: a check does not hold';
        END IF;
        IF key.v IS NULL AND (absent OR key.written) THEN
            -- Deleted, or a placeholder: gone, the key still held until commit.
            DELETE FROM kv WHERE ns = p_ns AND tbl = key.tbl AND k = key.k;
        ELSIF NOT absent AND key.written THEN
            UPDATE kv SET v = key.v WHERE ns = p_ns AND tbl = key.tbl AND k = key.k;
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
