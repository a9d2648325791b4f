
-- A prepared transaction yields to open ones: it waits for each lock at
-- most half the server's deadlock_timeout, then is rolled back (lock
-- timeout) and the node tries it again. An open transaction locks in its
-- component's order and may need a key a prepared one holds while that one
-- waits for a key the open one holds: the server's deadlock check, a
-- deadlock_timeout into the wait, would fail either. The prepared one gives
-- up first, holding nothing, and the open one — which may be recording an
-- operator's answer — goes on. Migration 16's function stays for nodes of
-- older versions.
CREATE OR REPLACE FUNCTION mmc_apply_yielding(
    p_tbl_keys bigint[],
    p_ns text, p_ns_key bigint,
    c_tbl text[], c_k bytea[], c_v bytea[],
    w_tbl text[], w_k bytea[], w_v bytea[],
    e_id text[], e_type text[], e_merchant text[], e_env text[], e_subject text[],
    e_url text[], e_payload bytea[], e_created bigint
) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    PERFORM set_config('lock_timeout',
        greatest(1, (extract(epoch FROM current_setting('deadlock_timeout')::interval) * 500)::bigint)::text,
        true);
    RETURN mmc_apply_rows(p_tbl_keys, p_ns, p_ns_key, c_tbl, c_k, c_v, w_tbl, w_k, w_v,
                          e_id, e_type, e_merchant, e_env, e_subject, e_url, e_payload, e_created);
END
$$;
