
-- A prepared transaction (`apply`) in one round trip: its checks, writes
-- and events run in the server under the same two locks, so the namespace
-- lock is held for them and the commit, not for five round trips to a node.
-- Checks: `c_v` NULL means the key must be absent. Writes, in order: `w_v`
-- NULL deletes. Events get `seq` in array order, under the outbox lock.
-- The writes are those of PUT, DELETE and EMIT in lib.rs: keep them alike.
CREATE FUNCTION mmc_apply(
    p_ns text, p_ns_key bigint, p_outbox_key bigint,
    c_tbl text[], c_k bytea[], c_v bytea[],
    w_tbl text[], w_k bytea[], w_v bytea[],
    e_id text[], e_type text[], e_merchant text[], e_env text[], e_subject text[],
    e_url text[], e_payload bytea[], e_created bigint
) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    cur bytea;
BEGIN
    PERFORM pg_advisory_xact_lock(p_ns_key);
    FOR i IN 1 .. coalesce(array_length(c_k, 1), 0) LOOP
        SELECT v INTO cur FROM kv WHERE ns = p_ns AND tbl = c_tbl[i] AND k = c_k[i];
        IF cur IS DISTINCT FROM c_v[i] THEN
            RETURN false;
        END IF;
    END LOOP;
    FOR i IN 1 .. coalesce(array_length(w_k, 1), 0) LOOP
        IF w_v[i] IS NULL THEN
            DELETE FROM kv WHERE ns = p_ns AND tbl = w_tbl[i] AND k = w_k[i];
        ELSE
            INSERT INTO kv (ns, tbl, k, v) VALUES (p_ns, w_tbl[i], w_k[i], w_v[i])
                ON CONFLICT (ns, tbl, k) DO UPDATE SET v = EXCLUDED.v;
        END IF;
    END LOOP;
    IF coalesce(array_length(e_id, 1), 0) > 0 THEN
        PERFORM pg_advisory_xact_lock(p_outbox_key);
        FOR i IN 1 .. array_length(e_id, 1) LOOP
            INSERT INTO outbox
                (id, event_type, merchant_id, environment, subject_id, extra_url, payload, created_ms)
                VALUES (e_id[i], e_type[i], e_merchant[i], e_env[i], e_subject[i], e_url[i],
                        e_payload[i], e_created);
        END LOOP;
    END IF;
    RETURN true;
END
$$;
