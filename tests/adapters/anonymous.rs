//! Anonymous surfaces cost no more operator calls than one request does: a
//! flood of forged callbacks, or of views of the checkout page, for one
//! payment in progress asks its operator at most once per interval.

use std::time::Duration;

use serde_json::json;

use crate::support::fakes::mtn::FakeMtn;
use crate::support::fakes::{Callbacks, Outcome};
use crate::support::*;
use crate::*;
use mmc_test_kit::service_test;

const STAYS: &str = "+2290166000004";

async fn mtn_app(fake: &FakeMtn) -> TestApp {
    app_with_adapter("momo", &["mtn-bj"], fake.component_config(), |_| {}).await
}

fn status_queries(fake: &FakeMtn, id: &str) -> usize {
    fake.requests_for("requesttopay_status", &operator_id(id))
        .len()
}

#[service_test]
async fn a_hundred_forged_callbacks_ask_mtn_no_more_than_reconciliation_does() {
    let fake = FakeMtn::start().await;
    fake.set_outcome(&STAYS[1..], Outcome::Stay);
    fake.callbacks(Callbacks::Lost);
    let app = mtn_app(&fake).await;
    let live = app.live_key("Shop");
    let p = create(&app, &live, &live_payment("BJ", "mtn-bj", STAYS)).await;
    let id = id_of(&p);
    tokio::time::sleep(Duration::from_millis(300)).await;

    let before = status_queries(&fake, &id);
    let started = std::time::Instant::now();
    let forged = serde_json::to_vec(&json!({"externalId": id, "amount": "1500",
        "currency": "XOF", "financialTransactionId": "1", "status": "SUCCESSFUL"}))
    .unwrap();
    let answers = futures::future::join_all(
        (0..100).map(|_| notify(&app, "mtn-bj", "PUT", &[], forged.clone())),
    )
    .await;
    assert!(
        answers.iter().all(|(s, _)| *s == 200),
        "each is acknowledged"
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let asked = status_queries(&fake, &id) - before;
    let rounds = started.elapsed().as_secs() as usize + 1;
    println!(
        "100 callbacks in {:?}: {asked} status queries",
        started.elapsed()
    );
    assert!(
        asked <= rounds + 1,
        "{asked} queries for 100 callbacks (reconciliation rounds: {rounds})"
    );
    // Nothing believed: MTN says the payment is still pending.
    assert_eq!(payment(&app, &live, &id).await["status"], "processing");
}

#[service_test]
async fn forty_views_of_a_checkout_page_ask_the_operator_once() {
    let fake = FakeMtn::start().await;
    fake.set_outcome(&STAYS[1..], Outcome::Stay);
    fake.callbacks(Callbacks::Lost);
    let app = mtn_app(&fake).await;
    let live = app.live_key("Shop");
    let hosted = json!({"reference": format!("h-{}", uuid::Uuid::new_v4()), "amount": 1500,
                        "currency": "XOF", "country": "BJ", "mode": "hosted"});
    let p = create(&app, &live, &hosted).await;
    let id = id_of(&p);
    let page = format!("{}/checkout/{id}", app.base);
    let chosen = app
        .client
        .post(&page)
        .form(&[("operator", "mtn-bj"), ("phone", STAYS)])
        .send()
        .await
        .unwrap();
    assert_eq!(chosen.status(), 200);
    assert_eq!(payment(&app, &live, &id).await["status"], "processing");
    // The page the customer landed on may have asked already: let its 5 s pass.
    tokio::time::sleep(Duration::from_millis(5200)).await;

    let before = status_queries(&fake, &id);
    let started = std::time::Instant::now();
    let views = futures::future::join_all((0..40).map(|_| app.client.get(&page).send())).await;
    for v in views {
        assert_eq!(v.unwrap().status(), 200);
    }
    let asked = status_queries(&fake, &id) - before;
    let took = started.elapsed();
    println!("40 views in {took:?}: {asked} status queries");
    // One for the views (5 s apart at most), plus what reconciliation asked meanwhile.
    let rounds = took.as_secs() as usize + 1;
    assert!(
        asked <= 1 + rounds,
        "{asked} queries for 40 views in {took:?}"
    );
}
