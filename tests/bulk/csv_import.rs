//! CSV import: multipart and text/csv bodies, the 1,000-line run end to
//! end, every bad line reported by number, header rules, size limits.

use std::time::Duration;

use serde_json::json;

use crate::helpers::*;
use crate::support::*;

const HEADER: &str = "beneficiary_name,phone,amount,currency,reference";

/// Line `i` (0-based data line) of the 1,000-line file: Benin, Togo and
/// Côte d'Ivoire in turn, numbers ending 1000–1999 (the simulator pays them),
/// some names quoted with a comma inside, some numbers in 00 form.
fn payroll_line(i: u32) -> (String, u64) {
    let amount = 100 + i as u64;
    let phone = match i % 3 {
        0 => format!("+2290166{:06}", 101_000 + i),
        1 => format!("00228 90{:06}", 101_000 + i),
        _ => format!("+22507{:08}", 10_101_000 + i),
    };
    let name = if i.is_multiple_of(10) {
        format!("\"Koné, Awa {i}\"")
    } else {
        format!("Employee {i}")
    };
    (
        format!("{name},{phone},{amount},XOF,PAY-2026-06-{i:04}"),
        amount,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_1000_line_csv_is_imported_validated_and_paid_to_the_end() {
    let app = spawn_app().await;
    let (_, key, _) = app.merchant("Big Employer");
    // As Excel writes it: byte-order mark, CRLF, a final line break.
    let mut csv = String::from("\u{feff}");
    csv.push_str(HEADER);
    csv.push_str("\r\n");
    let mut total = 0;
    for i in 0..1000 {
        let (line, amount) = payroll_line(i);
        csv.push_str(&line);
        csv.push_str("\r\n");
        total += amount;
    }
    let (content_type, body) = multipart(
        &[
            ("name", "Salaries June"),
            ("description", "1,000 employees"),
        ],
        Some(("payroll.csv", csv.as_bytes())),
    );
    let (status, b) = send(
        &app,
        &key,
        reqwest::Method::POST,
        &format!("{ROOT}import_csv/"),
        Some(&content_type),
        body,
    )
    .await;
    assert_eq!(status, 201, "{b}");
    assert_eq!(b["source"], "csv");
    assert_eq!(b["name"], "Salaries June");
    assert_eq!(b["description"], "1,000 employees");
    assert_eq!(b["item_count"], 1000);
    assert_eq!(b["total_amount"], total);
    assert_eq!(b["status"], "pending_validation");
    let id = b["id"].as_str().unwrap();

    let (status, v) = validate(&app, &key, id).await;
    assert_eq!(status, 200, "{v}");
    let done = wait_until_final(&app, &key, id, Duration::from_secs(120)).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(
        done["items_by_status"],
        json!({"pending": 0, "processing": 0, "completed": 1000, "failed": 0})
    );
    assert_eq!(done["amount_completed"], total);
    assert_eq!(done["amount_remaining"], 0);

    let items = all_items(&app, &key, id, "").await;
    assert_eq!(items.len(), 1000);
    let mut ids = std::collections::HashSet::new();
    for (i, item) in items.iter().enumerate() {
        assert!(ids.insert(item["id"].as_str().unwrap().to_string()));
        assert_eq!(item["status"], "completed", "{item}");
        assert_eq!(item["attempts"], 1, "paid once: {item}");
        // Header is line 1.
        assert_eq!(item["line"], i as u64 + 2);
        assert_eq!(item["reference"], format!("PAY-2026-06-{i:04}"));
        assert_eq!(item["country"], ["BJ", "TG", "CI"][i % 3]);
    }
    assert_eq!(items[0]["beneficiary_name"], "Koné, Awa 0");
    assert_eq!(items[1]["phone"], "+22890101001");
    assert_eq!(items[1]["operator"], "togocom-tg");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_bad_csv_line_is_reported_with_its_number_and_nothing_is_created() {
    let app = spawn_app().await;
    let (_, key, _) = app.merchant("Typos");
    let csv = [
        HEADER,                                   // 1
        "Awa,+2290166001001,5000,XOF,R1",         // 2 ok
        "Kofi,+2290166001002,5000,XOF",           // 3 a field missing
        "Ama,0166001003,5000,XOF,R3",             // 4 no country code
        "",                                       // 5 blank: skipped
        "Yao,+22890001004,5 000,XOF,R5",          // 6 amount with a space
        "\"Multi",                                // 7 quoted name over two lines…
        "line\",+22890001005,6000,XOF,R1",        // 8 …and a duplicate reference
        "Adjo,+2250700001006,1000,XAF,R9",        // 9 wrong currency
        "Kwame,+2250700001007,abc,EUR,",          // 10 three problems
        "\"Unclosed,+2250700001008,1000,XOF,R11", // 11 quote never closed
        "Late,+2250700001009,1000,XOF,R12",       // 12 (inside the open quote)
    ]
    .join("\n");
    let (status, e) = send(
        &app,
        &key,
        reqwest::Method::POST,
        &format!("{ROOT}import_csv/?name=June%20salaries"),
        Some("text/csv"),
        csv.into_bytes(),
    )
    .await;
    assert_eq!(status, 400, "{e}");
    assert_eq!(e["error"]["code"], "invalid_csv");
    assert_eq!(e["error"]["param"], "file");
    let expected: Vec<(u64, String)> = [
        (3, "csv_field_count"),
        (4, "phone_invalid"),
        (6, "amount_invalid"),
        (7, "reference_duplicate"),
        (9, "currency_not_supported"),
        (10, "amount_invalid"),
        (10, "currency_not_supported"),
        (10, "parameter_missing"),
        (11, "csv_syntax"),
    ]
    .iter()
    .map(|(l, c)| (*l, c.to_string()))
    .collect();
    let mut found = error_lines(&e);
    // Within a line the order is by field; compare as sorted pairs.
    found.sort();
    assert_eq!(found, expected, "{e}");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("7 lines are invalid"),
        "{e}"
    );
    let errors = e["error"]["errors"].as_array().unwrap();
    let duplicate = errors.iter().find(|x| x["line"] == 7).unwrap();
    assert_eq!(duplicate["column"], "reference");
    assert!(
        duplicate["message"].as_str().unwrap().contains("line 2"),
        "{duplicate}"
    );
    let syntax = errors.iter().find(|x| x["line"] == 11).unwrap();
    assert!(syntax["column"].is_null());
    assert!(syntax["message"].as_str().unwrap().contains("not closed"));
    assert_eq!(batch_count(&app, &key).await, 0, "nothing was created");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_header_row_is_required_and_checked() {
    let app = spawn_app().await;
    let (_, key, _) = app.merchant("Headless");
    let import = |body: &str| {
        let body = body.as_bytes().to_vec();
        let app = &app;
        let key = &key;
        async move {
            send(
                app,
                key,
                reqwest::Method::POST,
                &format!("{ROOT}import_csv/?name=x"),
                Some("text/csv; charset=utf-8"),
                body,
            )
            .await
        }
    };
    // Data on line 1: every column is unknown and the required ones are missing.
    let (status, e) = import("Awa,+2290166001001,5000,XOF,R1\n").await;
    assert_eq!(status, 400, "{e}");
    let lines = error_lines(&e);
    assert!(lines.iter().all(|(l, _)| *l == 1), "{e}");
    assert!(lines.iter().any(|(_, c)| c == "csv_column_unknown"));
    assert!(lines.iter().any(|(_, c)| c == "csv_column_missing"));

    let (status, e) = import("beneficiary_name,phone,amount,reference,reference\n").await;
    assert_eq!(status, 400);
    let codes: Vec<String> = error_lines(&e).into_iter().map(|(_, c)| c).collect();
    assert_eq!(codes, ["csv_column_duplicate", "csv_column_missing"], "{e}");

    let (status, e) = import("").await;
    assert_eq!(
        (status, e["error"]["code"].as_str()),
        (400, Some("csv_empty"))
    );
    let (status, e) = import(&format!("{HEADER}\r\n\r\n")).await;
    assert_eq!(
        (status, e["error"]["code"].as_str()),
        (400, Some("csv_no_rows"))
    );

    // Spreadsheet spellings of the header, semicolons, an optional operator column.
    let (status, b) = import(
        "Beneficiary Name;Phone;Amount;Currency;Reference;Operator\nAwa;+2250100000010;1000;xof;R1;wave\n",
    )
    .await;
    assert_eq!(status, 201, "{b}");
    let items = all_items(&app, &key, b["id"].as_str().unwrap(), "").await;
    assert_eq!(items[0]["operator"], "wave-ci");
    assert_eq!(items[0]["currency"], "XOF");
    assert_eq!(items[0]["line"], 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn import_requests_are_checked_before_the_file() {
    let app = spawn_app().await;
    let (_, key, _) = app.merchant("Uploader");
    let csv = format!("{HEADER}\nAwa,+2290166001001,5000,XOF,R1\n");
    let path = format!("{ROOT}import_csv/");
    let post_as = |content_type: Option<&'static str>, path: String, body: Vec<u8>| {
        let (app, key) = (&app, &key);
        async move { send(app, key, reqwest::Method::POST, &path, content_type, body).await }
    };

    let (status, e) = post_as(Some("text/csv"), path.clone(), csv.clone().into_bytes()).await;
    assert_eq!(
        (status, e["error"]["param"].as_str()),
        (400, Some("name")),
        "{e}"
    );
    let (status, e) = post_as(Some("application/json"), path.clone(), b"{}".to_vec()).await;
    assert_eq!(status, 415, "{e}");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("multipart/form-data")
    );
    let (status, _) = post_as(None, path.clone(), csv.clone().into_bytes()).await;
    assert_eq!(status, 415);

    let (ct, body) = multipart(&[("name", "x")], None);
    let (status, e) = send(&app, &key, reqwest::Method::POST, &path, Some(&ct), body).await;
    assert_eq!(
        (status, e["error"]["param"].as_str()),
        (400, Some("file")),
        "{e}"
    );
    let (ct, body) = multipart(
        &[("name", "x"), ("color", "red")],
        Some(("a.csv", csv.as_bytes())),
    );
    let (status, e) = send(&app, &key, reqwest::Method::POST, &path, Some(&ct), body).await;
    assert_eq!(
        (status, e["error"]["param"].as_str()),
        (400, Some("color")),
        "{e}"
    );
    let (status, e) = post_as(
        Some("multipart/form-data"),
        path.clone(),
        csv.clone().into_bytes(),
    )
    .await;
    assert_eq!(
        (status, e["error"]["code"].as_str()),
        (400, Some("multipart_invalid")),
        "{e}"
    );

    // text/csv with the name in the query, percent-encoded.
    let (status, b) = post_as(
        Some("text/csv"),
        format!("{path}?name=Fournisseurs%20%C3%A9t%C3%A9&description=lot+2"),
        csv.clone().into_bytes(),
    )
    .await;
    assert_eq!(status, 201, "{b}");
    assert_eq!(b["name"], "Fournisseurs été");
    assert_eq!(b["description"], "lot 2");

    // A form without name or description takes them from the query; a
    // form's own field wins over the query's.
    let (ct, body) = multipart(&[("description", "lot 3")], Some(("a.csv", csv.as_bytes())));
    let (status, b) = send(
        &app,
        &key,
        reqwest::Method::POST,
        &format!("{path}?name=Query+name&description=ignored"),
        Some(&ct),
        body,
    )
    .await;
    assert_eq!(status, 201, "{b}");
    assert_eq!(
        (b["name"].as_str(), b["description"].as_str()),
        (Some("Query name"), Some("lot 3"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_beyond_the_size_or_item_limits_are_413() {
    let app =
        spawn_app_with(|c| bulk_settings(c, &[("max_csv_bytes", "300"), ("max_items", "5")])).await;
    let (_, key, _) = app.merchant("Heavy");
    let path = format!("{ROOT}import_csv/?name=big");
    let lines = |n: u32| {
        let mut csv = format!("{HEADER}\n");
        for i in 0..n {
            csv.push_str(&format!("A,+2290166{:06},1000,XOF,R{i}\n", 101_000 + i));
        }
        csv.into_bytes()
    };
    // A 49-byte header and lines of about 30 bytes: 6 lines are within 300 bytes, beyond 5 items.
    let (status, e) = send(
        &app,
        &key,
        reqwest::Method::POST,
        &path,
        Some("text/csv"),
        lines(6),
    )
    .await;
    assert_eq!(status, 413, "{e}");
    assert_eq!(e["error"]["code"], "too_many_items");
    // 12 lines: beyond 300 bytes, refused before reading.
    let big = lines(12);
    assert!(big.len() > 300);
    let (status, e) = send(
        &app,
        &key,
        reqwest::Method::POST,
        &path,
        Some("text/csv"),
        big.clone(),
    )
    .await;
    assert_eq!(status, 413, "{e}");
    assert_eq!(e["error"]["code"], "csv_too_large");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("limit is 300 bytes")
    );
    let (ct, body) = multipart(&[("name", "big")], Some(("big.csv", &big)));
    let (status, e) = send(
        &app,
        &key,
        reqwest::Method::POST,
        &format!("{ROOT}import_csv/"),
        Some(&ct),
        body,
    )
    .await;
    assert_eq!(
        (status, e["error"]["code"].as_str()),
        (413, Some("csv_too_large"))
    );
    assert_eq!(batch_count(&app, &key).await, 0);

    let (status, b) = send(
        &app,
        &key,
        reqwest::Method::POST,
        &path,
        Some("text/csv"),
        lines(5),
    )
    .await;
    assert_eq!(status, 201, "{b}");
}
