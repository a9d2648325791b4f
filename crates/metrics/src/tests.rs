use super::*;

#[test]
fn series_are_counted_per_label_set_and_rendered_in_label_order() {
    let m = Metrics::default();
    let ms = Duration::from_millis(1);
    m.request("collect", 201, ms);
    m.request("admin", 200, ms);
    m.request("collect", 200, ms);
    m.request("collect", 201, ms);
    m.component_call("collect", "ok", ms);
    m.component_call("collect", "trap", ms);
    m.component_call("bulk", "ok", ms);
    m.storage_rows_written("collect", [2, 0, 1]);
    m.storage_rows_written("collect", [1, 1, 0]);
    m.storage_transaction("collect", "applied");
    m.storage_transaction("collect", "applied");
    m.storage_transaction("collect", "interactive");
    let out = m.render();
    let lines: Vec<&str> = out.lines().filter(|l| !l.starts_with('#')).collect();
    let pos = |s: &str| {
        lines
            .iter()
            .position(|l| *l == s)
            .unwrap_or_else(|| panic!("{s} missing from:\n{out}"))
    };
    let requests = [
        r#"mmc_http_requests_total{route="admin",status="200"} 1"#,
        r#"mmc_http_requests_total{route="collect",status="200"} 1"#,
        r#"mmc_http_requests_total{route="collect",status="201"} 2"#,
    ];
    assert!(pos(requests[0]) < pos(requests[1]) && pos(requests[1]) < pos(requests[2]));
    pos(r#"mmc_http_request_duration_seconds_count{route="collect"} 3"#);
    pos(r#"mmc_component_calls_total{component="bulk",outcome="ok"} 1"#);
    pos(r#"mmc_component_calls_total{component="collect",outcome="trap"} 1"#);
    pos(r#"mmc_component_traps_total{component="collect",kind="trap"} 1"#);
    assert!(
        !out.contains(r#"mmc_component_traps_total{component="bulk""#),
        "{out}"
    );
    pos(r#"mmc_storage_rows_written_total{component="collect",kind="put"} 3"#);
    pos(r#"mmc_storage_rows_written_total{component="collect",kind="delete"} 1"#);
    pos(r#"mmc_storage_rows_written_total{component="collect",kind="emit"} 1"#);
    pos(r#"mmc_storage_transactions_total{component="collect",kind="applied"} 2"#);
    pos(r#"mmc_storage_transactions_total{component="collect",kind="interactive"} 1"#);
}
