//! The overview over real payments made through the API: counts, volume and
//! success rate per operator today, the day's bar in the SVG charts, and the
//! operators' status from the catalogue; every outcome counted once from the
//! dispatched events, and the same figures counted again from the payments.
//! The charts read at a glance: axis values, gridlines, a 0–100 % rate, the
//! 30 days before beside the last 30, and their numbers as tables, in
//! English and French.

use std::time::{Duration, Instant};

use mmc_console_kit::users::Role;
use serde_json::{Value, json};

use super::*;
use crate::support::*;
use mmc_test_kit::service_test;

/// The overview once its "today" table says `today`: the dispatcher counts
/// events a round (200 ms) after they are written. A second later it still
/// says the same: no event is counted twice.
async fn overview_once(person: &Browser, today: &str) -> Page {
    let started = Instant::now();
    loop {
        let page = person.get("/console/overview").await;
        assert_eq!(page.status, 200, "{}", page.body);
        if figures(&page).0.contains(today) {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let again = person.get("/console/overview").await;
            assert_eq!(figures(&again), figures(&page));
            return page;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{today} not in {}",
            page.body
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The page's (today, last 30 days, charts) parts.
fn figures(page: &Page) -> (String, String, String) {
    (
        part(page, "<caption>Today</caption>", "</table>"),
        part(page, "<caption>Last 30 days</caption>", "</table>"),
        part(page, "<div class=\"sides\">", "</section></div>"),
    )
}

/// The page from `start` to the first `end` after it.
fn part(page: &Page, start: &str, end: &str) -> String {
    part_of(&page.body, start, end).to_string()
}

fn part_of<'a>(text: &'a str, start: &str, end: &str) -> &'a str {
    let from = text
        .find(start)
        .unwrap_or_else(|| panic!("no {start} in {text}"));
    let to = from + text[from..].find(end).expect("its end");
    &text[from..to]
}

/// The chart whose caption is `title`, with its table.
fn chart(page: &Page, title: &str) -> String {
    part(
        page,
        &format!("<div class=\"chart\"><h2>{title}</h2>"),
        "</div>",
    )
}

/// A day's short label, as a reader of `lang` writes it: `Dec 5`, `5 déc.`.
fn day_label(lang: &str, day: u64) -> String {
    let date = mmc_domain::time::rfc3339(day * 86_400_000);
    let (month, d): (usize, u32) = (date[5..7].parse().unwrap(), date[8..10].parse().unwrap());
    let en = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let fr = [
        "janv.", "févr.", "mars", "avr.", "mai", "juin", "juil.", "août", "sept.", "oct.", "nov.",
        "déc.",
    ];
    if lang == "fr" {
        format!("{d} {}", fr[month - 1])
    } else {
        format!("{} {d}", en[month - 1])
    }
}

fn this_day() -> u64 {
    mmc_common::clock::system_now_ms() / 86_400_000
}

/// Waits until the payment `id` is in `status` (asking the operator).
async fn settled(app: &TestApp, key: &str, id: &str, status: &str) -> Value {
    let started = Instant::now();
    loop {
        let (_, p) = app
            .get(key, &format!("/api/v1/collect/payments/{id}?sync=1"))
            .await;
        if p["status"] == status {
            return p;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "{p}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[service_test]
async fn the_overview_counts_todays_payments_per_operator_and_draws_them() {
    let app = spawn_app_completing_after(0).await;
    let (merchant, key, _) = app.merchant("Shop");
    // MTN: two paid (1,000 + 1,500), one refused; Moov: one paid (700).
    let mut ids = Vec::new();
    for (phone, amount) in [
        ("+2290166000001", 1000),
        ("+2290166000011", 1500),
        ("+2290166000002", 800),
        ("+2290195000001", 700),
    ] {
        let mut body = direct_payment(phone);
        body["amount"] = json!(amount);
        body.as_object_mut().unwrap().remove("operator");
        if phone.starts_with("+22901950") {
            body["operator"] = json!("moov-bj");
        } else {
            body["operator"] = json!("mtn-bj");
        }
        let (id, _) = app.create_ok(&key, &body).await;
        ids.push(id);
    }
    let started = Instant::now();
    for id in &ids {
        loop {
            let (_, p) = app
                .get(&key, &format!("/api/v1/collect/payments/{id}?sync=1"))
                .await;
            if matches!(p["status"].as_str(), Some("completed" | "failed")) {
                break;
            }
            assert!(started.elapsed() < Duration::from_secs(30), "{p}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    let support = person(&app, &merchant, "agent@shop.bj", Role::Support).await;
    let page = overview_once(&support, "<td>4</td><td>3,200 XOF</td><td>75%</td>").await;
    let today = figures(&page).0;
    assert!(
        today.contains("<tr><td>mtn-bj</td><td>3</td><td>2,500 XOF</td><td>66.7%</td></tr>"),
        "{today}"
    );
    assert!(
        today.contains("<tr><td>moov-bj</td><td>1</td><td>700 XOF</td><td>100%</td></tr>"),
        "{today}"
    );
    assert!(
        today.contains("<tfoot><tr><th>Total</th><td>4</td><td>3,200 XOF</td><td>75%</td></tr>")
    );
    // Today's bar says what it stands for, beside the day 30 days earlier;
    // the charts are inline SVG.
    let (day, earlier) = (
        day_label("en", this_day()),
        day_label("en", this_day() - 30),
    );
    assert!(
        page.body.contains(&format!(
            "<title>{day}: 3,200 XOF, 4 payments; {earlier}: 0 XOF</title>"
        )),
        "{}",
        page.body
    );
    assert!(page.body.contains(&format!(
        "<title>{day}: 75% (3 of 4 with an outcome); {earlier}: –</title>"
    )));
    assert!(
        page.body
            .contains("<title>mtn-bj: 2,500 XOF; the 30 days before: 0 XOF</title>")
    );
    assert_eq!(page.body.matches("<svg").count(), 3);
    assert!(
        !page.body.contains("<script")
            && !page.body.contains("http://")
            && !page.body.contains("https://")
    );
    // The catalogue's operators with their status.
    assert!(
        page.body.contains("(mtn-bj)</td><td>operational</td>"),
        "{}",
        page.body
    );

    // Another merchant's payments are not counted.
    let (other, other_key, _) = app.merchant("Other");
    let (status, _) = app
        .create(&other_key, &new_key(), &direct_payment("+2290166000001"))
        .await;
    assert_eq!(status, 201);
    let theirs = person(&app, &other, "agent@other.bj", Role::Support).await;
    let page = theirs.get("/console/overview?lang=fr").await;
    assert!(
        page.body.contains("<caption>Aujourd&#39;hui</caption>")
            || page.body.contains("<caption>Aujourd'hui</caption>"),
        "{}",
        page.body
    );
    assert!(!page.body.contains("2\u{202f}500"));
}

#[service_test]
async fn every_outcome_counts_once_and_counting_the_payments_again_gives_the_same_figures() {
    let app = spawn_app_completing_after(0).await;
    let (merchant, key, _) = app.merchant("Shop");
    let direct = |phone: &str, operator: &str, amount: u64| {
        let mut body = direct_payment(phone);
        (body["operator"], body["amount"]) = (json!(operator), json!(amount));
        body
    };
    // MTN: paid 1,000 then refunded in part, paid 1,500 then refunded in
    // full, failed (800), cancelled (900), expired (450), still in progress
    // (400). Moov: paid 700.
    let mut id = Vec::new();
    for (phone, operator, amount) in [
        ("+2290166000001", "mtn-bj", 1000),
        ("+2290166000011", "mtn-bj", 1500),
        ("+2290166000002", "mtn-bj", 800),
        ("+2290166000004", "mtn-bj", 900),
        ("+2290166000004", "mtn-bj", 450),
        ("+2290166000004", "mtn-bj", 400),
        ("+2290195000001", "moov-bj", 700),
    ] {
        id.push(
            app.create_ok(&key, &direct(phone, operator, amount))
                .await
                .0,
        );
    }
    for (i, status) in [
        (0, "completed"),
        (1, "completed"),
        (2, "failed"),
        (6, "completed"),
    ] {
        settled(&app, &key, &id[i], status).await;
    }
    for (i, amount) in [(0, 400), (1, 1500)] {
        let (status, r) = app
            .post(
                &key,
                &format!("/api/v1/collect/payments/{}/refunds", id[i]),
                json!({"amount": amount}),
            )
            .await;
        assert!(status == 201 || status == 200, "{status}: {r}");
    }
    settled(&app, &key, &id[1], "refunded").await;
    let (status, c) = app
        .post(
            &key,
            &format!("/api/v1/collect/payments/{}/cancel", id[3]),
            json!({}),
        )
        .await;
    assert_eq!(
        (status, c["status"].as_str()),
        (200, Some("cancelled")),
        "{c}"
    );
    fixtures::overdue(app.data_dir.path(), &id[4]);
    settled(&app, &key, &id[4], "expired").await;
    // Hosted: one whose customer never chose, one who chose MTN and paid 300.
    let hosted = |amount: u64| {
        json!({"reference": format!("h-{}", uuid::Uuid::new_v4()), "amount": amount,
               "currency": "XOF", "country": "BJ", "mode": "hosted"})
    };
    app.create_ok(&key, &hosted(2000)).await;
    let (chosen, p) = app.create_ok(&key, &hosted(300)).await;
    let form = app
        .client
        .post(p["checkout_url"].as_str().unwrap())
        .form(&[("operator", "mtn-bj"), ("phone", "0166000001")])
        .send()
        .await
        .unwrap();
    assert!(form.status().is_success() || form.status().is_redirection());
    settled(&app, &key, &chosen, "completed").await;
    // The legacy generation: MTN, paid 1,200 (its amounts are in hundredths).
    let legacy = app
        .client
        .post(app.url("/api/v1/collect/mobile-money/"))
        .bearer_auth(&key)
        .json(
            &json!({"amount": 120000, "phone": "97000001", "country": "BJ",
                      "operator": "mtn-bj", "reference": format!("leg-{}", uuid::Uuid::new_v4())}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(legacy.status(), 201);
    let legacy: Value = legacy.json().await.unwrap();
    settled(&app, &key, legacy["id"].as_str().unwrap(), "completed").await;
    // MTN: 8 payments, 4 paid (1,000 + 1,500 + 300 + 1,200), 6 finished
    // (the cancelled one in neither, the one in progress not yet).
    let support = person(&app, &merchant, "agent@shop.bj", Role::Support).await;
    let page = overview_once(
        &support,
        "<tfoot><tr><th>Total</th><td>10</td><td>4,700 XOF</td><td>71.4%</td></tr>",
    )
    .await;
    let (today, month, charts) = figures(&page);
    for row in [
        "<tr><td>mtn-bj</td><td>8</td><td>4,000 XOF</td><td>66.7%</td></tr>",
        "<tr><td>moov-bj</td><td>1</td><td>700 XOF</td><td>100%</td></tr>",
        "<tr><td>(not chosen yet)</td><td>1</td><td>0 XOF</td><td>–</td></tr>",
        "<tfoot><tr><th>Total</th><td>10</td><td>4,700 XOF</td><td>71.4%</td></tr>",
    ] {
        assert!(today.contains(row), "{row} in {today}");
        assert!(month.contains(row), "{row} in {month}");
    }
    assert_eq!(today.matches("<tr><td>").count(), 3, "{today}");
    let day = day_label("en", this_day());
    assert!(
        charts.contains(&format!("<title>{day}: 4,700 XOF, 10 payments; ")),
        "{charts}"
    );

    // Counted again from the payments: the same figures.
    let before = figures(&page);
    let rebuilt = mmc_tallies::rebuild(&app.service.site.console.tallies).unwrap();
    assert_eq!(
        (rebuilt.payments, rebuilt.unreadable),
        (10, 0),
        "{rebuilt:?}"
    );
    assert_eq!(figures(&support.get("/console/overview").await), before);
    // And the events after are counted once more each: a new payment, once.
    let (last, _) = app
        .create_ok(&key, &direct("+2290195000001", "moov-bj", 150))
        .await;
    settled(&app, &key, &last, "completed").await;
    let page = overview_once(
        &support,
        "<th>Total</th><td>11</td><td>4,850 XOF</td><td>75%</td>",
    )
    .await;
    assert!(
        figures(&page)
            .0
            .contains("<tr><td>moov-bj</td><td>2</td><td>850 XOF</td>")
    );

    // The live environment counts none of them.
    let switched = support
        .submit(
            "/console/payments",
            "/console/environment",
            &[("environment", "live")],
        )
        .await;
    assert_eq!(switched.status, 303, "{}", switched.body);
    let live = figures(&support.get("/console/overview").await).1;
    assert!(
        live.contains("<tfoot><tr><th>Total</th><td>0</td><td>0 XOF</td><td>–</td></tr>"),
        "{live}"
    );
    assert!(!live.contains("<tr><td>"), "{live}");
}

#[service_test]
async fn payments_stored_without_their_events_are_counted_by_the_rebuild_and_a_store_without_tallies_by_itself()
 {
    let app = spawn_app_completing_after(0).await;
    let (merchant, key, _) = app.merchant("Shop");
    for (phone, amount, status) in [
        ("+2290166000001", 1000, "completed"),
        ("+2290166000002", 800, "failed"),
    ] {
        let mut body = direct_payment(phone);
        body["amount"] = json!(amount);
        let (id, _) = app.create_ok(&key, &body).await;
        settled(&app, &key, &id, status).await;
    }
    let support = person(&app, &merchant, "agent@shop.bj", Role::Support).await;
    let counted = "<tfoot><tr><th>Total</th><td>2</td><td>1,000 XOF</td><td>50%</td></tr>";
    overview_once(&support, counted).await;

    // A paid Moov payment written straight into the store, as a restore or a
    // seeded store has them: no event, so not counted.
    let now = mmc_common::clock::system_now_ms();
    let id = uuid::Uuid::now_v7().to_string();
    let record: mmc_domain::record::Payment = serde_json::from_value(json!({
        "id": id, "merchant_id": merchant, "environment": "test", "reference": "restored",
        "status": "completed", "amount": 500, "currency": "XOF", "country": "BJ",
        "mode": "direct", "operator": "moov-bj", "expires_at_ms": now + 900_000,
        "created_at_ms": now, "updated_at_ms": now, "completed_at_ms": now, "request_hash": "h",
    }))
    .unwrap();
    let storage = test_storage(&base_config(app.data_dir.path()));
    let mut tx = storage.backend.begin("collect").unwrap();
    tx.put(
        "payments",
        &format!("test/{merchant}/{id}"),
        &mmc_domain::record::encode(&record),
    )
    .unwrap();
    tx.commit().unwrap();
    overview_once(&support, counted).await;

    // `mmc console rebuild-overview` counts every stored payment again: at
    // once on PostgreSQL; on SQLite, with the server holding the file, by the
    // server's dispatcher at its next round.
    let dir = app.data_dir.path().to_str().unwrap();
    let said = crate::cli::mmc(&["console", "rebuild-overview", "--data-dir", dir]);
    if on_postgres() {
        assert_eq!(said["overview"]["payments"], 3, "{said}");
    } else {
        assert_eq!(
            said["overview"]["counted"],
            "by the running server, at its next dispatch round"
        );
    }
    let all = "<tfoot><tr><th>Total</th><td>3</td><td>1,500 XOF</td><td>66.7%</td></tr>";
    let rebuilt = figures(&overview_once(&support, all).await);
    assert!(
        rebuilt
            .0
            .contains("<tr><td>moov-bj</td><td>1</td><td>500 XOF</td><td>100%</td></tr>")
    );

    // A store from before the tallies (none, and no cursor): the dispatcher
    // counts its payments at its next round, then their events as before.
    storage
        .sql
        .write(|c| {
            c.execute("DELETE FROM overview_cursor", &[])?;
            c.execute("DELETE FROM overview_tallies", &[])
        })
        .unwrap();
    assert_eq!(figures(&overview_once(&support, all).await), rebuilt);
    let mut body = direct_payment("+2290166000001");
    body["amount"] = json!(500);
    let (id, _) = app.create_ok(&key, &body).await;
    settled(&app, &key, &id, "completed").await;
    overview_once(
        &support,
        "<tfoot><tr><th>Total</th><td>4</td><td>2,000 XOF</td><td>75%</td></tr>",
    )
    .await;
}

/// Adds a tally row for `day` as the dispatcher would have counted it:
/// (payments, succeeded, finished, volume).
fn seed(app: &TestApp, merchant: &str, day: u64, operator: &str, c: (i64, i64, i64, i64)) {
    let (payments, succeeded, finished, volume) = c;
    app.service
        .site
        .console
        .tallies
        .write(|tx| {
            tx.execute(
                &format!(
                    "INSERT INTO overview_tallies
                       (merchant_id, environment, day, operator, payments, succeeded, finished, volume)
                     VALUES ('{merchant}', 'test', {day}, '{operator}', {payments}, {succeeded}, {finished}, {volume})"
                ),
                &[],
            )
        })
        .unwrap();
}

/// How many gridlines a chart draws.
fn gridlines(chart: &str) -> usize {
    part_of(chart, "<g class=\"grid\"", "</g>")
        .matches("<line")
        .count()
}

#[service_test]
async fn the_charts_show_axis_values_gridlines_a_0_to_100_rate_and_the_30_days_before_with_their_numbers()
 {
    let app = spawn_app_completing_after(0).await;
    let (merchant, key, _) = app.merchant("Shop");
    let support = person(&app, &merchant, "agent@shop.bj", Role::Support).await;

    // Nothing yet: each chart says so, and nothing is drawn.
    let empty = support.get("/console/overview").await;
    assert_eq!(empty.body.matches("<svg").count(), 0, "{}", empty.body);
    assert_eq!(
        empty
            .body
            .matches("<p>Nothing to show yet: no figures in this period.</p>")
            .count(),
        3
    );

    // Today: MTN paid 1,500. Three days ago: Moov, 4 payments, 3 paid of 4
    // with an outcome, 12,500. The 30 days before: MTN on the day 30 days
    // before today (2 payments, 1 paid, 5,000), Moov 45 days ago (2 paid,
    // 3,000).
    let mut body = direct_payment("+2290166000001");
    body["amount"] = json!(1500);
    let (id, _) = app.create_ok(&key, &body).await;
    settled(&app, &key, &id, "completed").await;
    overview_once(&support, "<td>1</td><td>1,500 XOF</td><td>100%</td>").await;
    let (day, three_ago) = (this_day(), this_day() - 3);
    seed(&app, &merchant, three_ago, "moov-bj", (4, 3, 4, 12_500));
    seed(&app, &merchant, day - 30, "mtn-bj", (2, 1, 2, 5_000));
    seed(&app, &merchant, day - 45, "moov-bj", (2, 2, 2, 3_000));
    let page = support.get("/console/overview").await;

    // The last 30 days beside the 30 before, with how each figure moved.
    let compared = part(
        &page,
        "<caption>Last 30 days compared with the 30 days before</caption>",
        "</table>",
    );
    for row in [
        "<tr><td>Payments</td><td>5</td><td>4</td><td>+25%</td></tr>",
        "<tr><td>Volume</td><td>14,000 XOF</td><td>8,000 XOF</td><td>+75%</td></tr>",
        "<tr><td>Success rate</td><td>80%</td><td>75%</td><td>+5 pts</td></tr>",
    ] {
        assert!(compared.contains(row), "{row} in {compared}");
    }

    let (today_en, three_ago_en) = (day_label("en", day), day_label("en", three_ago));
    assert_eq!(page.body.matches("<svg").count(), 3);
    assert_eq!(page.body.matches("role=\"img\"").count(), 3);

    // Volume per day: round ticks up to 15,000 with a gridline each; bars
    // on 150 units (12,500 → 125), the 30 days before as lighter bars
    // (5,000 → 50) with a legend; the numbers as a table.
    let volume = chart(&page, "Volume collected per day (XOF)");
    for tick in ["0", "5,000", "10,000", "15,000"] {
        assert!(
            volume.contains(&format!(">{tick}</text>")),
            "{tick} in {volume}"
        );
    }
    assert!(!volume.contains(">20,000</text>"));
    assert_eq!(gridlines(&volume), 4);
    assert!(
        volume.contains("height=\"125.0\" fill=\"#12355b\""),
        "{volume}"
    );
    assert!(volume.contains("height=\"15.0\" fill=\"#12355b\""));
    assert!(volume.contains("height=\"50.0\" fill=\"#9db3cc\""));
    assert!(
        volume.contains(">Last 30 days</text>") && volume.contains(">The 30 days before</text>")
    );
    assert!(
        volume.contains(&format!(">{today_en}</text>")),
        "the last day named"
    );
    assert!(volume.contains(&format!(
        "aria-label=\"Volume collected per day (XOF). 14,000 XOF collected over the last 30 days, \
         8,000 XOF the 30 days before. The best day: {three_ago_en}, with 12,500 XOF.\""
    )));
    assert!(volume.contains("<details><summary>Show the numbers</summary><table"));
    assert!(volume.contains(
        "<thead><tr><th>Day</th><th>Payments</th><th>Volume</th><th>Volume 30 days earlier</th></tr></thead>"
    ));
    assert_eq!(volume.matches("<tr><td>").count(), 30, "a row a day");
    assert!(volume.contains(&format!(
        "<tr><td>{three_ago_en}</td><td>4</td><td>12,500 XOF</td><td>0 XOF</td></tr>"
    )));
    assert!(volume.contains(&format!(
        "<tr><td>{today_en}</td><td>1</td><td>1,500 XOF</td><td>5,000 XOF</td></tr>"
    )));

    // The success rate on 0–100 % whatever the values: 75 % is 112.5 of
    // 150 units, the day 30 days before today's 50 % beside it.
    let rate = chart(&page, "Success rate per day (%)");
    for tick in ["0%", "25%", "50%", "75%", "100%"] {
        assert!(
            rate.contains(&format!(">{tick}</text>")),
            "{tick} in {rate}"
        );
    }
    assert_eq!(gridlines(&rate), 5);
    assert!(rate.contains("height=\"112.5\" fill=\"#12355b\""), "{rate}");
    assert!(rate.contains("height=\"150.0\" fill=\"#12355b\""));
    assert!(rate.contains("height=\"75.0\" fill=\"#9db3cc\""));
    assert!(rate.contains(&format!(
        "<tr><td>{three_ago_en}</td><td>75%</td><td>3</td><td>4</td><td>–</td></tr>"
    )));
    assert!(rate.contains(&format!(
        "<tr><td>{today_en}</td><td>100%</td><td>1</td><td>1</td><td>50%</td></tr>"
    )));

    // Per operator: the largest first, each with its value written and the
    // 30 days before beside it.
    let operators = chart(&page, "Volume collected per operator, last 30 days (XOF)");
    assert!(operators.contains(">moov-bj</text>") && operators.contains(">12,500 XOF</text>"));
    assert!(operators.contains(">15,000</text>") && gridlines(&operators) == 4);
    let (moov, mtn) = (
        operators
            .find("<tr><td>moov-bj</td><td>12,500 XOF</td><td>3,000 XOF</td><td>+316.7%</td></tr>")
            .expect(&operators),
        operators
            .find(
                "<tr><td>mtn-bj</td><td>1,500 XOF</td><td>5,000 XOF</td><td>\u{2212}70%</td></tr>",
            )
            .expect(&operators),
    );
    assert!(moov < mtn);

    // The same in French: grouped with narrow spaces, FCFA, "75 %", "3 déc.".
    let page = support.get("/console/overview?lang=fr").await;
    let compared = part(&page, "<caption>30 derniers jours comparés", "</table>");
    for row in [
        "<tr><td>Paiements</td><td>5</td><td>4</td><td>+25\u{a0}%</td></tr>",
        "<tr><td>Volume</td><td>14\u{202f}000\u{a0}FCFA</td><td>8\u{202f}000\u{a0}FCFA</td><td>+75\u{a0}%</td></tr>",
        "<tr><td>Taux de réussite</td><td>80\u{a0}%</td><td>75\u{a0}%</td><td>+5 pts</td></tr>",
    ] {
        assert!(compared.contains(row), "{row} in {compared}");
    }
    let (today_fr, three_ago_fr) = (day_label("fr", day), day_label("fr", three_ago));
    let volume = chart(&page, "Volume encaissé par jour (FCFA)");
    for tick in ["0", "5\u{202f}000", "10\u{202f}000", "15\u{202f}000"] {
        assert!(
            volume.contains(&format!(">{tick}</text>")),
            "{tick} in {volume}"
        );
    }
    assert_eq!(gridlines(&volume), 4);
    assert!(volume.contains(">30 derniers jours</text>"));
    assert!(
        volume.contains(">Les 30 jours d&#39;avant</text>"),
        "{volume}"
    );
    assert!(volume.contains("<summary>Voir les chiffres</summary>"));
    assert!(volume.contains(
        "<th>Jour</th><th>Paiements</th><th>Volume</th><th>Volume 30 jours plus tôt</th>"
    ));
    assert!(volume.contains(&format!(
        "<tr><td>{three_ago_fr}</td><td>4</td><td>12\u{202f}500\u{a0}FCFA</td><td>0\u{a0}FCFA</td></tr>"
    )));
    assert!(volume.contains(&format!(
        "<tr><td>{today_fr}</td><td>1</td><td>1\u{202f}500\u{a0}FCFA</td><td>5\u{202f}000\u{a0}FCFA</td></tr>"
    )));
    let rate = chart(&page, "Taux de réussite par jour (%)");
    for tick in ["0\u{a0}%", "50\u{a0}%", "100\u{a0}%"] {
        assert!(
            rate.contains(&format!(">{tick}</text>")),
            "{tick} in {rate}"
        );
    }
    assert!(rate.contains(&format!(
        "<tr><td>{three_ago_fr}</td><td>75\u{a0}%</td><td>3</td><td>4</td><td>–</td></tr>"
    )));
    let operators = chart(
        &page,
        "Volume encaissé par opérateur, 30 derniers jours (FCFA)",
    );
    assert!(operators.contains(
        "<tr><td>mtn-bj</td><td>1\u{202f}500\u{a0}FCFA</td><td>5\u{202f}000\u{a0}FCFA</td><td>\u{2212}70\u{a0}%</td></tr>"
    ));
}
