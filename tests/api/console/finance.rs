//! Finance in the console: the test environment's simulator balances, a
//! reconciled day counted over the merchant's records, its open cases, a
//! case's page with both books side by side, resolving with a note (in the
//! audit log), and the day as CSV; for the finance and owner roles only.

use std::time::Duration;

use mmc_console_kit::users::Role;

use super::*;
use crate::support::*;
use mmc_test_kit::service_test;

#[service_test]
async fn finance_sees_the_days_differences_settles_a_case_and_exports_the_day() {
    let app = spawn_app_with(|c| c.admin_token = Some(ADMIN.into())).await;
    let (merchant, test, _) = app.merchant("Shop");
    let mut ids = Vec::new();
    for digits in ["0001", "0008"] {
        let body = direct_payment(&format!("+229016600{digits}"));
        let (id, _) = app.create_ok(&test, &body).await;
        let (_, synced) = app
            .get(&test, &format!("/api/v1/collect/payments/{id}?sync=1"))
            .await;
        assert_eq!(synced["status"], "completed", "{synced}");
        ids.push(id);
    }
    tokio::time::sleep(Duration::from_millis(300)).await; // the simulator's journal
    let date = mmc_domain::time::date(mmc_common::clock::system_now_ms());
    let finance = person(&app, &merchant, "finance@shop.bj", Role::Finance).await;
    let before = finance.get(&format!("/console/finance?date={date}")).await;
    assert!(
        before.body.contains("not been reconciled yet"),
        "{}",
        before.body
    );
    // The day run from the console, on demand.
    let from = format!("/console/finance?date={date}");
    let ran = finance
        .submit(&from, "/console/finance/run", &[("date", &date)])
        .await;
    assert_eq!(
        (ran.status, ran.location()),
        (303, from.as_str()),
        "{}",
        ran.body
    );

    let page = finance.get(&format!("/console/finance?date={date}")).await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(
        page.body.contains("<td>simulator</td>"),
        "the balance: {}",
        page.body
    );
    assert!(
        page.body
            .contains("category=duplicate\">Duplicate</a></td><td>1</td>"),
        "{}",
        page.body
    );
    assert!(
        page.body
            .contains("category=matched\">Matched</a></td><td>1</td>"),
        "{}",
        page.body
    );
    assert!(page.body.contains("<svg"), "the chart");
    let case_link = page
        .body
        .split("href=\"/console/finance/cases/")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("an open case")
        .to_string();
    let only_amounts = finance
        .get(&format!(
            "/console/finance?date={date}&category=amount_differs"
        ))
        .await;
    assert!(
        !only_amounts.body.contains("/console/finance/cases/"),
        "filtered out"
    );
    let bad = finance.get("/console/finance?category=everything").await;
    assert_eq!(bad.status, 400);

    // The payment's own page says what the books say of it.
    let payment = finance.get(&format!("/console/payments/{}", ids[1])).await;
    assert!(
        payment
            .body
            .contains("Fee by the rate card: 15 XOF · Net: 1,485 XOF"),
        "{}",
        payment.body
    );
    assert!(
        payment.body.contains("<strong>Duplicate</strong>"),
        "{}",
        payment.body
    );
    assert!(
        payment
            .body
            .contains(&format!("/console/finance/cases/{case_link}"))
    );

    let path = format!("/console/finance/cases/{case_link}");
    let case = finance.get(&path).await;
    assert_eq!(case.status, 200, "{}", case.body);
    assert!(
        case.body.contains("Our books") && case.body.contains("The provider&#x27;s books")
            || case.body.contains("The provider's books"),
        "{}",
        case.body
    );
    assert_eq!(
        case.body.matches("simtx-").count(),
        2,
        "the provider moved it twice: {}",
        case.body
    );
    assert!(case.body.contains(&ids[1]));

    let empty = finance
        .submit(&path, &format!("{path}/resolve"), &[("note", " ")])
        .await;
    assert_eq!(empty.status, 400, "{}", empty.body);
    let done = finance
        .submit(
            &path,
            &format!("{path}/resolve"),
            &[("note", "Refund of the second debit asked of the provider")],
        )
        .await;
    assert_eq!(done.status, 303, "{}", done.body);
    let resolved = finance.get(&path).await;
    assert!(
        resolved.body.contains("finance@shop.bj"),
        "who settled it: {}",
        resolved.body
    );
    assert!(
        !resolved.body.contains("/resolve\""),
        "no form once resolved"
    );
    let (_, api) = app
        .get(&test, &format!("/api/v1/reconciliation/cases/{case_link}"))
        .await;
    assert_eq!(api["status"], "resolved", "{api}");

    let owner = person(&app, &merchant, "owner@shop.bj", Role::Owner).await;
    let audit = owner.get("/console/audit").await;
    assert_eq!(
        audit.audited("reconciliation.case.resolve", "done"),
        1,
        "{}",
        audit.body
    );

    let csv = finance
        .get(&format!("/console/finance.csv?date={date}"))
        .await;
    assert_eq!(csv.status, 200);
    let rows: Vec<&str> = csv.body.lines().collect();
    assert_eq!(
        rows[0],
        "date,account,record,kind,category,our_status,amount,currency,provider_ids,provider_amount,provider_fee,expected_fee,net"
    );
    assert_eq!(rows.len(), 3, "{}", csv.body);
    let dup = rows.iter().find(|r| r.contains(&ids[1])).unwrap();
    assert!(dup.contains(",duplicate,completed,1500,XOF,"), "{dup}");
    let one = rows.iter().find(|r| r.contains(&ids[0])).unwrap();
    assert!(
        one.ends_with(",1500,15,15,1485"),
        "amount, fee, expected fee, net: {one}"
    );

    let support = person(&app, &merchant, "agent@shop.bj", Role::Support).await;
    assert_eq!(support.get("/console/finance").await.status, 403);
    assert_eq!(support.get(&path).await.status, 403);
    assert!(
        !support
            .get("/console/payments")
            .await
            .body
            .contains("/console/finance")
    );
}
