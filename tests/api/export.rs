//! The CSV export for accounting: a period's payments, streamed page by page.

use futures::StreamExt;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::*;
use mmc_test_kit::service_test;

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// RFC 4180 records (quoted fields may hold `,`, `""` and line breaks).
fn parse_csv(text: &str) -> Vec<Vec<String>> {
    let (mut records, mut record, mut field) = (Vec::new(), Vec::new(), String::new());
    let mut chars = text.chars().peekable();
    let mut quoted = false;
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                field.push('"');
            }
            (true, '"') => quoted = false,
            (true, c) => field.push(c),
            (false, '"') if field.is_empty() => quoted = true,
            (false, ',') => record.push(std::mem::take(&mut field)),
            (false, '\r') if chars.peek() == Some(&'\n') => {
                chars.next();
                record.push(std::mem::take(&mut field));
                records.push(std::mem::take(&mut record));
            }
            (false, c) => field.push(c),
        }
    }
    assert!(
        field.is_empty() && record.is_empty(),
        "the last record ends with CRLF"
    );
    records
}

struct Export {
    status: u16,
    headers: reqwest::header::HeaderMap,
    body: String,
}

impl Export {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    fn records(&self) -> Vec<Vec<String>> {
        parse_csv(&self.body)
    }

    /// The rows after the header row, as maps by column name.
    fn rows(&self) -> Vec<std::collections::HashMap<String, String>> {
        let records = self.records();
        let (columns, rows) = records.split_first().expect("a header row");
        rows.iter()
            .map(|r| {
                assert_eq!(r.len(), columns.len(), "{r:?}");
                columns.iter().cloned().zip(r.iter().cloned()).collect()
            })
            .collect()
    }

    fn ids(&self) -> Vec<String> {
        self.rows().into_iter().map(|r| r["id"].clone()).collect()
    }
}

async fn export(app: &TestApp, key: &str, query: &str) -> Export {
    export_with(app, key, reqwest::Method::GET, query).await
}

async fn export_with(app: &TestApp, key: &str, method: reqwest::Method, query: &str) -> Export {
    let resp = app
        .client
        .request(
            method,
            app.url(&format!("/api/v1/collect/payments/export{query}")),
        )
        .bearer_auth(key)
        .send()
        .await
        .unwrap();
    Export {
        status: resp.status().as_u16(),
        headers: resp.headers().clone(),
        body: resp.text().await.unwrap(),
    }
}

async fn created(app: &TestApp, key: &str, body: Value) -> Value {
    app.create_ok(key, &body).await.1
}

async fn settled(app: &TestApp, key: &str, p: &Value) -> Value {
    let id = id_of(p);
    app.get(key, &format!("/api/v1/collect/payments/{id}?sync=true"))
        .await
        .1
}

fn direct(reference: &str, country: &str, operator: &str, phone: &str) -> Value {
    json!({"reference": reference, "amount": 1500, "currency": "XOF", "country": country,
           "operator": operator, "customer": {"phone": phone}})
}

#[service_test]
async fn the_export_is_csv_escaped_and_safe_in_a_spreadsheet(app: TestApp) {
    let key = app.test_key("Shop");
    let other = app.test_key("Other");
    let from = now();
    let mut body = direct(
        "=HYPERLINK(\"evil.example\",\"x\")",
        "BJ",
        "mtn-bj",
        "+2290166000001",
    );
    body["description"] = json!("Chairs, \"oak\"\nand tables");
    let completed = settled(&app, &key, &created(&app, &key, body).await).await;
    assert_eq!(completed["status"], "completed", "{completed}");
    let failed = created(
        &app,
        &key,
        direct("+order-2", "BJ", "mtn-bj", "+2290166000002"),
    )
    .await;
    let failed = settled(&app, &key, &failed).await;
    assert_eq!(failed["status"], "failed", "{failed}");
    let mut hosted = json!({"reference": "@order-3", "amount": 2500, "currency": "XOF",
                            "country": "TG", "mode": "hosted", "description": "-5 off"});
    hosted = created(&app, &key, hosted).await;
    created(
        &app,
        &other,
        direct("not-mine", "BJ", "mtn-bj", "+2290166000001"),
    )
    .await;

    let e = export(&app, &key, &format!("?created[gte]={from}")).await;
    assert_eq!(e.status, 200, "{}", e.body);
    assert_eq!(e.header("content-type"), Some("text/csv; charset=utf-8"));
    let disposition = e.header("content-disposition").unwrap().to_string();
    assert!(
        disposition.starts_with("attachment; filename=\"payments-")
            && disposition.ends_with(".csv\""),
        "{disposition}"
    );
    let records = e.records();
    assert_eq!(
        records[0],
        [
            "id",
            "reference",
            "created_at",
            "status",
            "country",
            "operator",
            "mode",
            "amount",
            "currency",
            "refunded_amount",
            "completed_at",
            "failed_at",
            "failure_code",
            "psp_reference",
            "description",
            "expected_fee",
            "net_amount"
        ]
    );
    let rows = e.rows();
    assert_eq!(
        e.ids(),
        [&completed, &failed, &hosted].map(id_of),
        "the merchant's own payments, oldest first"
    );
    // Formulas neutralised with a leading `'`; commas, quotes and line breaks quoted.
    assert_eq!(rows[0]["reference"], "'=HYPERLINK(\"evil.example\",\"x\")");
    assert_eq!(rows[0]["description"], "Chairs, \"oak\"\nand tables");
    assert_eq!(rows[1]["reference"], "'+order-2");
    assert_eq!(rows[2]["reference"], "'@order-3");
    assert_eq!(rows[2]["description"], "'-5 off");
    assert!(
        e.body.contains("\"Chairs, \"\"oak\"\"\nand tables\""),
        "{}",
        e.body
    );
    // What each row says.
    let r = &rows[0];
    assert_eq!(
        (
            r["status"].as_str(),
            r["country"].as_str(),
            r["operator"].as_str()
        ),
        ("completed", "BJ", "mtn-bj")
    );
    assert_eq!(
        (
            r["amount"].as_str(),
            r["currency"].as_str(),
            r["mode"].as_str()
        ),
        ("1500", "XOF", "direct")
    );
    // The simulator's rate card: 1 %; a hosted payment not paid yet has no route, no fee.
    assert_eq!(
        (r["expected_fee"].as_str(), r["net_amount"].as_str()),
        ("15", "1485")
    );
    assert_eq!(rows[2]["expected_fee"], "");
    assert_eq!(r["created_at"], completed["created_at"].as_str().unwrap());
    assert_eq!(
        r["completed_at"],
        completed["completed_at"].as_str().unwrap()
    );
    assert!(r["created_at"].ends_with('Z'), "ISO 8601 UTC: {r:?}");
    assert_eq!(
        (r["failed_at"].as_str(), r["failure_code"].as_str()),
        ("", "")
    );
    let r = &rows[1];
    assert_eq!(
        (r["status"].as_str(), r["failure_code"].as_str()),
        ("failed", failed["failure_code"].as_str().unwrap())
    );
    assert!(r["failed_at"] >= r["created_at"], "{r:?}");
    assert_eq!(r["completed_at"], "");
    let r = &rows[2];
    assert_eq!(
        (
            r["status"].as_str(),
            r["mode"].as_str(),
            r["operator"].as_str()
        ),
        ("awaiting_payment", "hosted", "")
    );

    // HEAD: the GET's status and headers, no body.
    let head = export_with(
        &app,
        &key,
        reqwest::Method::HEAD,
        &format!("?created[gte]={from}"),
    )
    .await;
    assert_eq!(head.status, 200);
    for name in ["content-type", "content-disposition"] {
        assert_eq!(head.header(name), e.header(name), "{name}");
    }
    assert_eq!(head.body, "");
    assert!(head.header("mmc-continue").is_none());
}

#[service_test]
async fn the_export_filters_like_the_list_and_needs_a_start(app: TestApp) {
    let (merchant, key, _) = app.merchant("Shop");
    let from = now();
    let mut made = Vec::new();
    for body in [
        direct("a", "BJ", "mtn-bj", "+2290166000001"),
        direct("b", "BJ", "mtn-bj", "+2290166000002"),
        direct("c", "TG", "togocom-tg", "+22890000001"),
        direct("d", "CI", "orange-ci", "+2250700000001"),
    ] {
        made.push(created(&app, &key, body).await);
    }
    assert_eq!(settled(&app, &key, &made[1]).await["status"], "failed");
    let id = |i: usize| id_of(&made[i]);
    let ids = |q: String| {
        let (app, key) = (&app, key.clone());
        async move {
            let e = export(app, &key, &q).await;
            assert_eq!(e.status, 200, "{q}: {}", e.body);
            e.ids()
        }
    };
    assert_eq!(
        ids(format!("?created[gte]={from}&country=TG")).await,
        [id(2)]
    );
    assert_eq!(
        ids(format!("?created%5Bgte%5D={from}&operator=mtn")).await,
        [id(0), id(1)],
        "an alias, the brackets percent-encoded"
    );
    assert_eq!(
        ids(format!("?created[gte]={from}&status=failed")).await,
        [id(1)]
    );
    // An empty period: the header row alone.
    let e = export(&app, &key, &format!("?created[gte]={}", from + 3600)).await;
    assert_eq!((e.status, e.records().len()), (200, 1), "{}", e.body);
    assert!(e.body.starts_with("id,reference,"), "{}", e.body);
    let e = export(
        &app,
        &key,
        &format!("?created[gte]=0&created[lt]={}", from - 3600),
    )
    .await;
    assert_eq!(e.records().len(), 1, "{}", e.body);
    assert_eq!(
        e.header("content-disposition"),
        Some(
            format!(
                "attachment; filename=\"payments-19700101T000000Z-{}.csv\"",
                compact(from - 3600)
            )
            .as_str()
        )
    );
    assert_eq!(
        ids(format!("?created[gte]=0&created[lt]={}", from + 3600))
            .await
            .len(),
        4
    );

    // No start, or a bad parameter: a 400 in the service's error shape, naming it.
    for (query, code, param) in [
        ("", "parameter_missing", "created[gte]"),
        ("?status=completed", "parameter_missing", "created[gte]"),
        (
            "?created[gte]=yesterday",
            "parameter_invalid",
            "created[gte]",
        ),
        (
            "?created[gte]=0&created[lt]=soon",
            "parameter_invalid",
            "created[lt]",
        ),
        ("?created[gte]=0&status=paid", "parameter_invalid", "status"),
        (
            "?created[gte]=0&country=FR",
            "country_not_supported",
            "country",
        ),
    ] {
        let e = export(&app, &key, query).await;
        let body: Value = serde_json::from_str(&e.body).unwrap();
        assert_eq!(e.status, 400, "{query}: {body}");
        assert_eq!(
            (
                body["error"]["type"].as_str(),
                body["error"]["code"].as_str(),
                body["error"]["param"].as_str()
            ),
            (Some("invalid_request_error"), Some(code), Some(param)),
            "{query}: {body}"
        );
        assert!(
            e.header("content-type")
                .unwrap()
                .starts_with("application/json")
        );
    }

    // Reading payments needs payments:read.
    let writer = app
        .accounts
        .create_key_with(
            &merchant,
            mmc_accounts::Environment::Test,
            Some(mmc_accounts::scopes::Scopes::parse("payments:write").unwrap()),
        )
        .unwrap()
        .key;
    let e = export(&app, &writer, &format!("?created[gte]={from}")).await;
    assert_eq!(e.status, 403, "{}", e.body);
    assert!(e.body.contains("insufficient_scope"), "{}", e.body);
}

/// `1780272000` → `20260601T000000Z`, as the file name has it.
fn compact(secs: u64) -> String {
    let days = secs / 86_400;
    let rem = secs % 86_400;
    // Howard Hinnant's civil_from_days, as the service formats dates.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}{m:02}{d:02}T{:02}{:02}{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// More payments than one page (1,000): every one comes back once, in
/// creation order, in one streamed response.
#[service_test]
async fn a_period_longer_than_a_page_is_streamed_whole_in_order() {
    const N: usize = 2_500;
    let app = spawn_app_with(|c| c.rate_limit.per_second = 0.0).await;
    let key = app.test_key("Shop");
    let from = now();
    // Hosted payments: created without a call to an operator, so quickly.
    let mut ids: Vec<String> = futures::stream::iter(0..N)
        .map(|i| {
            let (app, key) = (&app, key.clone());
            async move {
                let body = json!({"reference": format!("bulk-{i}"), "amount": 100 + i,
                                  "currency": "XOF", "country": "BJ", "mode": "hosted"});
                created(app, &key, body).await["id"]
                    .as_str()
                    .unwrap()
                    .to_string()
            }
        })
        .buffer_unordered(16)
        .collect()
        .await;
    // UUIDv7 ids sort in creation order.
    ids.sort();

    let e = export(&app, &key, &format!("?created[gte]={from}")).await;
    assert_eq!(e.status, 200);
    assert_eq!(
        (e.header("transfer-encoding"), e.header("content-length")),
        (Some("chunked"), None),
        "streamed, not built whole"
    );
    assert!(
        e.header("mmc-continue").is_none(),
        "the host's word stays inside"
    );
    let rows = e.rows();
    let got: Vec<String> = rows.iter().map(|r| r["id"].clone()).collect();
    assert_eq!(got.len(), N, "every payment once");
    assert!(got == ids, "all of them, in creation order (UUIDv7 ids)");
    let header_rows = e.body.matches("id,reference,created_at").count();
    assert_eq!(header_rows, 1, "one header row");
    // A filter that keeps few: pages of the range still stream to the end.
    let e = export(
        &app,
        &key,
        &format!("?created[gte]={from}&status=completed"),
    )
    .await;
    assert_eq!((e.status, e.records().len()), (200, 1), "{}", e.body);
    // Resumed after the 1,200th: the rest, without the header row.
    let e = export(
        &app,
        &key,
        &format!("?created[gte]={from}&starting_after={}", ids[1199]),
    )
    .await;
    let records = e.records();
    assert_eq!(records.len(), N - 1200);
    assert_eq!(records[0][0], ids[1200]);
}

/// A key revoked while its export streams: the stream stops (the client
/// sees it cut, never a file that looks whole) instead of running to its
/// end, even when the revocation is made elsewhere (the CLI, another node)
/// and reaches this node through its key cache.
#[service_test]
async fn an_export_stops_when_its_key_is_revoked() {
    // More than the server's socket buffer holds (4 MiB here): the export
    // is still being made when the key is revoked.
    const N: usize = 16_000;
    let description = "d".repeat(255);
    let app = spawn_app_with(|c| c.rate_limit.per_second = 0.0).await;
    let m = app.accounts.create_merchant("Shop").unwrap();
    let k = app
        .accounts
        .create_key(&m.id, mmc_accounts::Environment::Test)
        .unwrap();
    let from = now();
    futures::stream::iter(0..N)
        .for_each_concurrent(16, |i| {
            let (app, key, description) = (&app, k.key.clone(), &description);
            async move {
                let body = json!({"reference": format!("bulk-{i}"), "amount": 100 + i,
                                  "currency": "XOF", "country": "BJ", "mode": "hosted",
                                  "description": description});
                created(app, &key, body).await;
            }
        })
        .await;

    // A client that reads the first bytes, then nothing for a while, with a
    // small receive buffer: what the server has not sent yet is not in it.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let addr = app.base.trim_start_matches("http://").parse().unwrap();
    let mut stream = socket.connect(addr).await.unwrap();
    let request = format!(
        "GET /api/v1/collect/payments/export?created[gte]={from} HTTP/1.1\r\nHost: mmc\r\n\
         Authorization: Bearer {}\r\nConnection: close\r\n\r\n",
        k.key
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut body = vec![0u8; 4096];
    let n = stream.read(&mut body).await.unwrap();
    body.truncate(n);
    assert!(
        body.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&body)
    );
    app.accounts.revoke_key(&k.id).unwrap();
    let revoked = std::time::Instant::now();
    tokio::time::sleep(std::time::Duration::from_millis(700)).await;
    // Read to the end: the connection's close, cleanly or not.
    let mut rest = Vec::new();
    let _ = stream.read_to_end(&mut rest).await;
    body.extend_from_slice(&rest);
    let text = String::from_utf8_lossy(&body);
    let rows = text.matches(",bulk-").count();
    println!(
        "export cut {:?} after revocation, {rows} of {N} rows received ({} bytes)",
        revoked.elapsed(),
        body.len()
    );
    assert!(
        !text.ends_with("\r\n0\r\n\r\n"),
        "the stream is cut, not ended as a whole file"
    );
    assert!(rows < N, "stopped before its end: {rows} rows of {N}");
    assert!(
        revoked.elapsed() < std::time::Duration::from_secs(2),
        "the cut is there once the client reads again"
    );
}
