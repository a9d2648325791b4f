
-- Open transactions without a namespace-wide lock: they lock the keys they
-- read and write, as prepared transactions do (migration 15), and a scan
-- inside one locks its table whole against writers, so what it saw stays
-- true until it commits (no phantom). Every writer of a table holds the
-- table's lock shared. The namespace's lock is taken shared by every
-- transaction of this version: it only excludes nodes of older versions,
-- whose open transactions take it whole.

-- Reads a key inside an open transaction and holds it until commit: an
-- existing row FOR UPDATE; an absent key by inserting a placeholder (the
-- node deletes it at commit unless the transaction wrote the key), which
-- holds the key against any other writer. `placeholder` says which.
CREATE FUNCTION mmc_lock_key(p_ns text, p_tbl text, p_k bytea,
                             OUT v bytea, OUT placeholder boolean)
LANGUAGE plpgsql AS $$
DECLARE
    inserted integer;
BEGIN
    LOOP
        SELECT kv.v INTO v FROM kv WHERE ns = p_ns AND tbl = p_tbl AND k = p_k FOR UPDATE;
        IF FOUND THEN
            placeholder := false;
            RETURN;
        END IF;
        INSERT INTO kv (ns, tbl, k, v) VALUES (p_ns, p_tbl, p_k, '\x'::bytea)
            ON CONFLICT (ns, tbl, k) DO NOTHING;
        GET DIAGNOSTICS inserted = ROW_COUNT;
        IF inserted = 1 THEN
            v := NULL;
            placeholder := true;
            RETURN;
        END IF;
        -- Another writer made the key meanwhile: lock what it wrote.
    END LOOP;
END
$$;

-- A prepared transaction (migration 15's, unchanged) after the locks of the
-- tables it writes, taken shared in one order: it waits only for an open
-- transaction that scanned one of them.
CREATE FUNCTION mmc_apply_rows(
    p_tbl_keys bigint[],
    p_ns text, p_ns_key bigint,
    c_tbl text[], c_k bytea[], c_v bytea[],
    w_tbl text[], w_k bytea[], w_v bytea[],
    e_id text[], e_type text[], e_merchant text[], e_env text[], e_subject text[],
    e_url text[], e_payload bytea[], e_created bigint
) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    t bigint;
BEGIN
    FOR t IN SELECT DISTINCT x FROM unnest(p_tbl_keys) x ORDER BY x LOOP
        PERFORM pg_advisory_xact_lock_shared(t);
    END LOOP;
    RETURN mmc_apply_keyed(p_ns, p_ns_key, c_tbl, c_k, c_v, w_tbl, w_k, w_v,
                           e_id, e_type, e_merchant, e_env, e_subject, e_url, e_payload, e_created);
END
$$;
