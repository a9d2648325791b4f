//! Payment links: a hosted payment made in the console, its QR code served
//! as SVG (decoded back to the checkout link), paid on the checkout page
//! over HTTP with a test number, and its status in the list.

use std::time::{Duration, Instant};

use mmc_console_kit::users::Role;
use serde_json::Value;

use super::*;
use crate::support::*;
use mmc_test_kit::service_test;

/// The QR code of an SVG drawn as `M{x} {y}h1v1h-1z` squares, decoded.
pub(super) fn decode_qr(svg: &str) -> String {
    let side: usize = svg
        .split("viewBox=\"0 0 ")
        .nth(1)
        .and_then(|v| v.split(' ').next())
        .and_then(|n| n.parse().ok())
        .expect("a square viewBox");
    let path = svg
        .split(" d=\"")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap();
    let mut dark = vec![false; side * side];
    for square in path.split('M').filter(|s| !s.is_empty()) {
        let xy = square.strip_suffix("h1v1h-1z").expect("a unit square");
        let (x, y) = xy.split_once(' ').unwrap();
        let (x, y): (usize, usize) = (x.parse().unwrap(), y.parse().unwrap());
        dark[y * side + x] = true;
    }
    // Eight pixels a module, as a camera would see a small screen.
    let scale = 8;
    let mut img =
        rqrr::PreparedImage::prepare_from_greyscale(side * scale, side * scale, |x, y| {
            if dark[(y / scale) * side + x / scale] {
                0
            } else {
                255
            }
        });
    let grids = img.detect_grids();
    assert_eq!(grids.len(), 1, "one QR code in the picture");
    grids[0].decode().expect("it decodes").1
}

/// `YYYY-MM-DDTHH:MM:SS…Z` as Unix seconds (days from civil, H. Hinnant).
fn seconds(t: &str) -> i64 {
    let n = |r: std::ops::Range<usize>| t[r].parse::<i64>().unwrap();
    let (y, m, d) = (n(0..4), n(5..7), n(8..10));
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * ((m + 9) % 12) + 2) / 5 + d - 1;
    let days = era * 146_097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719_468;
    days * 86_400 + n(11..13) * 3600 + n(14..16) * 60 + n(17..19)
}

async fn payment(app: &TestApp, key: &str, id: &str) -> Value {
    app.get(key, &format!("/api/v1/collect/payments/{id}"))
        .await
        .1
}

#[service_test]
async fn a_payment_link_is_made_shown_as_a_qr_code_paid_on_the_checkout_page_and_listed_completed()
{
    let app = spawn_app_completing_after(0).await;
    let (merchant, key, _) = app.merchant("Boutique Awa");
    let finance = person(&app, &merchant, "finance@awa.bj", Role::Finance).await;
    let links = "/console/links";
    let page = finance.get(links).await;
    assert_eq!(page.status, 200, "{}", page.body);

    let too_long = finance
        .submit(
            links,
            links,
            &[("amount", "2500"), ("description", "Robe"), ("days", "31")],
        )
        .await;
    assert_eq!(too_long.status, 400, "{}", too_long.body);
    assert!(too_long.body.contains("1 to 30"), "{}", too_long.body);
    let too_small = finance
        .submit(
            links,
            links,
            &[("amount", "5"), ("description", "Robe"), ("days", "3")],
        )
        .await;
    assert_eq!(
        too_small.status, 400,
        "the API's own rule: {}",
        too_small.body
    );

    let form_page = finance.get(links).await;
    let form = [
        ("csrf", form_page.field("csrf")),
        ("idempotency_key", form_page.field("idempotency_key")),
        ("amount", "2500".into()),
        ("description", "Robe en wax".into()),
        ("days", "30".into()),
        ("country", "BJ".into()),
        ("operator", "mtn-bj".into()),
    ];
    let form: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let made = finance.post(links, &form).await;
    assert_eq!(made.status, 303, "{}", made.body);
    let again = finance.post(links, &form).await;
    assert_eq!(
        made.location(),
        again.location(),
        "a double submit is one link"
    );
    let id = made
        .location()
        .trim_start_matches("/console/links/")
        .to_string();

    let p = payment(&app, &key, &id).await;
    assert_eq!(
        (p["mode"].as_str(), p["status"].as_str()),
        (Some("hosted"), Some("awaiting_payment")),
        "{p}"
    );
    assert_eq!(p["operator"], "mtn-bj");
    let expiry =
        seconds(p["expires_at"].as_str().unwrap()) - seconds(p["created_at"].as_str().unwrap());
    assert!((30 * 86_400 - 2..=30 * 86_400).contains(&expiry), "{p}");
    let checkout = p["checkout_url"].as_str().unwrap().to_string();

    let shown = finance.get(made.location()).await;
    assert!(shown.body.contains(&checkout), "{}", shown.body);
    assert!(
        shown
            .body
            .contains(&format!("src=\"/console/links/{id}/qr.svg\""))
    );
    let qr = finance.get(&format!("/console/links/{id}/qr.svg")).await;
    assert_eq!(qr.headers["content-type"], "image/svg+xml");
    assert_eq!(
        decode_qr(&qr.body),
        checkout,
        "the QR code is the checkout link"
    );

    // The customer, on the checkout page: only the fixed operator is offered.
    let html = app
        .client
        .get(&checkout)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        html.contains("value=\"mtn-bj\"") && !html.contains("value=\"moov-bj\""),
        "{html}"
    );
    let paid = app
        .client
        .post(&checkout)
        .form(&[("operator", "mtn-bj"), ("phone", "+2290166000001")])
        .send()
        .await
        .unwrap();
    assert!(
        paid.status().is_success() || paid.status().is_redirection(),
        "{}",
        paid.status()
    );
    let started = Instant::now();
    loop {
        let (_, p) = app
            .get(&key, &format!("/api/v1/collect/payments/{id}?sync=1"))
            .await;
        if p["status"] == "completed" {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "not paid: {p}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let listed = finance.get(links).await;
    assert!(
        listed.body.contains("Robe en wax") && listed.body.contains(">Completed</span>"),
        "{}",
        listed.body
    );
    assert_eq!(listed.body.matches("Robe en wax").count(), 1, "listed once");

    let fr = finance.get("/console/links?lang=fr").await;
    assert!(
        fr.body.contains("Créer un lien") && fr.body.contains("Liens de paiement"),
        "{}",
        fr.body
    );

    // Support reads the links; the server refuses them a new one.
    let support = person(&app, &merchant, "agent@awa.bj", Role::Support).await;
    let read = support.get(links).await;
    assert!(read.body.contains("Robe en wax") && !read.body.contains("action=\"/console/links\""));
    let refused = support
        .submit(
            links,
            links,
            &[("amount", "2500"), ("description", "x"), ("days", "1")],
        )
        .await;
    assert_eq!(refused.status, 403, "{}", refused.body);
    assert!(
        refused.body.contains("does not allow this"),
        "{}",
        refused.body
    );
}
