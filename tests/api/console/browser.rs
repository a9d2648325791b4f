//! The console in headless Chromium (`tests/browser/console.mjs`, installed
//! by `make browser`): a person signs in, finds a payment by its reference
//! and refunds part of it at a phone's width and at a desktop's, signs out;
//! every page passes axe-core with nothing serious or critical and nothing
//! overflowing sideways. The screenshots go to target/console-screenshots;
//! `make screenshots` writes them into the book (docs/console/) instead.

use mmc_console_kit::users::Role;
use serde_json::{Value, json};

use super::*;
use crate::support::*;
use mmc_test_kit::service_test;

/// Where the browser runs save their screenshots: the directory named by
/// `MMC_CONSOLE_SCREENSHOTS` (the book's, for `make screenshots`), else one
/// under target/, so that a test run leaves the work tree as it found it.
fn shots_dir() -> std::path::PathBuf {
    let dir = match std::env::var_os("MMC_CONSOLE_SCREENSHOTS") {
        Some(d) => root().join(d),
        None => target_dir().join("console-screenshots"),
    };
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[service_test]
async fn in_chromium_a_person_finds_and_refunds_a_payment_and_every_page_passes_axe() {
    assert!(
        root().join("tests/browser/node_modules/axe-core").exists(),
        "run `make browser` (make test does)"
    );
    let app = spawn_app_completing_after(0).await;
    let (merchant, key, _) = app.merchant("Boutique Awa");
    let (id, reference) = completed_payment(&app, &key).await;
    let owner = person(&app, &merchant, "owner@awa.bj", Role::Owner).await;
    // Something on every page: a link, a batch, an endpoint and its event.
    let links = owner.get("/console/links").await;
    let made = owner
        .post(
            "/console/links",
            &[
                ("csrf", &links.field("csrf")),
                ("idempotency_key", &links.field("idempotency_key")),
                ("amount", "2500"),
                ("description", "Robe en wax"),
                ("days", "7"),
                ("country", "BJ"),
            ],
        )
        .await;
    assert_eq!(made.status, 303, "{}", made.body);
    let csv = "beneficiary_name,phone,amount,currency,reference\nAwa Koné,+2290166001001,1000,XOF,jun-1\n";
    let uploaded = owner
        .upload(
            "/console/bulk/upload",
            &[("csrf", &links.field("csrf")), ("name", "June payroll")],
            ("june.csv", csv.as_bytes()),
        )
        .await;
    assert_eq!(uploaded.status, 303, "{}", uploaded.body);
    let (status, _) = app
        .post(
            &key,
            "/api/v1/webhook-endpoints",
            json!({"url": "http://127.0.0.1:9/hook"}),
        )
        .await;
    assert_eq!(status, 201);
    let (_, events) = app.get(&key, &format!("/api/v1/events?payment={id}")).await;
    let event = id_of(&events["data"][0]);

    let shots = shots_dir();
    let mut args: Vec<String> = vec![
        "console.mjs".into(),
        app.base.clone(),
        "owner@awa.bj".into(),
        PASSWORD.into(),
        reference.clone(),
        shots.display().to_string(),
    ];
    for path in [
        "/console/overview".to_string(),
        "/console/payments".into(),
        format!("/console/payments/{id}/refund"),
        "/console/links".into(),
        made.location().into(),
        "/console/bulk".into(),
        uploaded.location().split('?').next().unwrap().into(),
        "/console/developers".into(),
        "/console/developers/webhooks".into(),
        "/console/developers/events".into(),
        format!("/console/developers/events/{event}"),
        "/console/team".into(),
        "/console/audit".into(),
        "/console/security".into(),
    ] {
        args.push(path);
    }
    let out = crate::checkout::node_json(args).await;
    println!("{out}");
    for width in ["390", "1280"] {
        let run: &Value = &out[width];
        assert_eq!(
            run["found"], 1,
            "{width}: the search finds the payment: {run}"
        );
        assert!(
            run["confirmation"]
                .as_str()
                .unwrap()
                .starts_with("Refund 100 XOF of payment"),
            "{width}: {run}"
        );
        assert!(
            run["done"]
                .as_str()
                .unwrap()
                .starts_with("Refund requested"),
            "{width}: {run}"
        );
        assert_eq!(run["signedOut"], true, "{width}");
        let audits = run["audits"].as_object().unwrap();
        assert_eq!(audits.len(), 16, "every page audited: {run}");
        let french = run["fr"].as_object().unwrap();
        assert_eq!(french.len(), 15, "every page audited in French: {run}");
        for (path, a) in audits.iter().chain(french) {
            assert_eq!(a["serious"], json!([]), "{width} {path}: {a}");
            assert_eq!(a["overflow"], false, "{width} {path} overflows sideways");
            assert_eq!(a["hidden"], json!([]), "{width} {path}: values cut off");
        }
        for (path, a) in french {
            assert_eq!(a["lang"], "fr", "{width} {path}");
        }
    }
    // Two refunds of 100, one per width, each the API's.
    let (_, refunds) = app
        .get(&key, &format!("/api/v1/collect/payments/{id}/refunds"))
        .await;
    let amounts: Vec<u64> = refunds["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["amount"].as_u64().unwrap())
        .collect();
    assert_eq!(amounts, [100, 100], "{refunds}");
    for shot in [
        "payments-390.png",
        "refund-confirm-390.png",
        "payment-1280.png",
        "overview-1280.png",
    ] {
        let png = std::fs::read(shots.join(shot)).unwrap();
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "{shot}");
    }
}

#[service_test]
async fn in_chromium_a_link_is_paid_a_batch_is_approved_by_another_person_and_a_key_revoked() {
    assert!(
        root()
            .join("tests/browser/node_modules/playwright-core")
            .exists(),
        "run `make browser` (make test does)"
    );
    let app = spawn_app_completing_after(0).await;
    let (merchant, key, _) = app.merchant("Boutique Awa");
    app.accounts
        .set_require_second_approver(&merchant, mmc_accounts::Environment::Test, true)
        .unwrap();
    for (email, role) in [
        ("awa@awa.bj", Role::Finance),
        ("koffi@awa.bj", Role::Finance),
        ("dev@awa.bj", Role::Developer),
    ] {
        person(&app, &merchant, email, role).await;
    }
    let csv = app.data_dir.path().join("june.csv");
    std::fs::write(
        &csv,
        "beneficiary_name,phone,amount,currency,reference\nAwa Koné,+2290166001001,1000,XOF,jun-1\nKoffi Mensah,+2290166001002,2500,XOF,jun-2\n",
    )
    .unwrap();
    let shots = shots_dir();
    let out = crate::checkout::node_json(vec![
        "console_flows.mjs".into(),
        app.base.clone(),
        PASSWORD.into(),
        "awa@awa.bj".into(),
        "koffi@awa.bj".into(),
        "dev@awa.bj".into(),
        csv.display().to_string(),
        shots.display().to_string(),
    ])
    .await;
    println!("{out}");

    // The link: shown with its QR code, paid, listed completed.
    assert_eq!(
        (out["qrShown"].as_bool(), out["paid"].as_str()),
        (Some(true), Some("completed")),
        "{out}"
    );
    assert_eq!(out["listed"], 1, "{out}");
    let link = out["link"]
        .as_str()
        .unwrap()
        .trim_start_matches("/console/links/");
    let (_, p) = app
        .get(&key, &format!("/api/v1/collect/payments/{link}"))
        .await;
    assert_eq!(
        (p["status"].as_str(), p["mode"].as_str()),
        (Some("completed"), Some("hosted")),
        "{p}"
    );
    assert_eq!(p["checkout_url"], out["checkout"]);

    // The batch: A is not offered to approve it and is refused by the
    // server all the same; B's approval, confirmed, paid it.
    assert_eq!(out["approveOffered"], 0, "{out}");
    assert!(
        out["approvalAsks"]
            .as_str()
            .unwrap()
            .starts_with("Approve batch June payroll: 2 payouts, 3,500 XOF in all?"),
        "{out}"
    );
    assert_eq!(out["selfApproval"], 403, "{out}");
    assert!(
        out["selfApprovalSays"]
            .as_str()
            .unwrap()
            .contains("another person"),
        "{out}"
    );
    assert_eq!(out["itemsCompleted"], 2, "{out}");
    let batch = out["batch"]
        .as_str()
        .unwrap()
        .trim_start_matches("/console/bulk/");
    let (_, b) = app
        .get(&key, &format!("/api/v1/bulk-payments/{batch}/"))
        .await;
    assert_eq!(b["items_by_status"]["completed"], 2, "{b}");
    assert_ne!(b["created_by_key_id"], b["validated_by_key_id"], "{b}");

    // The key: made in the browser, revoked there, refused by the API.
    let made = out["key"].as_str().unwrap();
    assert!(made.starts_with("mk_test_"), "{out}");
    assert_eq!(out["revokedShown"], 1, "{out}");
    let (status, _) = app.get(made, "/api/v1/collect/payments").await;
    assert_eq!(status, 401, "a revoked key is refused");
}
