
-- Migration 15's prepared transaction, the same in what it does, linear in
-- its size: past a handful of keys, each key's last write and its checks
-- are found by grouping (one pass), where a correlated subquery and a loop
-- over every check per key made a transaction of n keys cost n² (a books
-- batch of a thousand keys: a million comparisons). A create's few keys
-- keep the plain form, quicker at that size. Same signature: nodes of
-- older versions calling it get the same answers, sooner.
CREATE OR REPLACE FUNCTION mmc_apply_keyed(
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
    i integer;
    keys refcursor;
    -- A create's handful of keys: the plain form is the quicker there.
    small boolean := coalesce(array_length(c_k, 1), 0) + coalesce(array_length(w_k, 1), 0) <= 64;
BEGIN
    PERFORM pg_advisory_xact_lock_shared(p_ns_key);
    IF small THEN
        OPEN keys FOR
            SELECT u.tbl, u.k,
                   (SELECT max(w.n)::integer FROM unnest(w_tbl, w_k) WITH ORDINALITY w(tbl, k, n)
                    WHERE w.tbl = u.tbl AND w.k = u.k) AS last_write,
                   NULL::integer[] AS checks
            FROM (SELECT DISTINCT tbl, k FROM (
                    SELECT * FROM unnest(c_tbl, c_k) UNION ALL SELECT * FROM unnest(w_tbl, w_k)
                  ) a(tbl, k)) u
            ORDER BY u.tbl, u.k;
    ELSE
        OPEN keys FOR
            WITH w AS (SELECT tbl, k, max(n)::integer AS last_write
                       FROM unnest(w_tbl, w_k) WITH ORDINALITY w(tbl, k, n) GROUP BY tbl, k),
                 c AS (SELECT tbl, k, array_agg(n::integer) AS checks
                       FROM unnest(c_tbl, c_k) WITH ORDINALITY c(tbl, k, n) GROUP BY tbl, k)
            SELECT coalesce(w.tbl, c.tbl) AS tbl, coalesce(w.k, c.k) AS k, w.last_write, c.checks
            FROM w FULL JOIN c ON c.tbl = w.tbl AND c.k = w.k
            ORDER BY 1, 2;
    END IF;
    LOOP
        FETCH keys INTO key;
        EXIT WHEN NOT FOUND;
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
        IF small THEN
            FOR i IN 1 .. coalesce(array_length(c_k, 1), 0) LOOP
                IF c_tbl[i] = key.tbl AND c_k[i] = key.k AND cur IS DISTINCT FROM c_v[i] THEN
                    RAISE EXCEPTION USING ERRCODE = 'MM001', MESSAGE = 'mmc_apply_keyed: a check does not hold';
                END IF;
            END LOOP;
        ELSE
            FOREACH i IN ARRAY coalesce(key.checks, '{}'::integer[]) LOOP
                IF cur IS DISTINCT FROM c_v[i] THEN
                    RAISE EXCEPTION USING ERRCODE = 'MM001', MESSAGE = 'mmc_apply_keyed: a check does not hold';
                END IF;
            END LOOP;
        END IF;
        IF final IS NULL AND (absent OR key.last_write IS NOT NULL) THEN
            -- Deleted, or a placeholder: gone, the key still held until commit.
            DELETE FROM kv WHERE ns = p_ns AND tbl = key.tbl AND k = key.k;
        ELSIF NOT absent AND key.last_write IS NOT NULL THEN
            UPDATE kv SET v = final WHERE ns = p_ns AND tbl = key.tbl AND k = key.k;
        END IF;
    END LOOP;
    CLOSE keys;
    FOR i IN 1 .. coalesce(array_length(e_id, 1), 0) LOOP
        INSERT INTO outbox
            (id, event_type, merchant_id, environment, subject_id, extra_url, payload, created_ms, seq)
            VALUES (e_id[i], e_type[i], e_merchant[i], e_env[i], e_subject[i], e_url[i],
                    e_payload[i], e_created, NULL);
    END LOOP;
    RETURN true;
END
$$;
