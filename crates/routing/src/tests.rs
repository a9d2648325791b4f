use super::*;
use mmc_config::{RouteHealthConfig, Rule, RuleSet};

fn table(spec: RouteSpec) -> RouteTable {
    RouteTable::new(BTreeMap::from([(
        "live".to_string(),
        BTreeMap::from([("mtn-bj".to_string(), spec)]),
    )]))
}

fn list(names: &[&str]) -> RouteSpec {
    RouteSpec::List(
        names
            .iter()
            .map(|n| Candidate::Name(n.to_string()))
            .collect(),
    )
}

fn health() -> Health {
    Health::new(RouteHealthConfig {
        min_failures: 2,
        open_ms: 1_000,
        trial_every_ms: 1_000,
        ..RouteHealthConfig::default()
    })
}

fn ask<'a>(amount: u64, skip: &'a [String]) -> Ask<'a> {
    Ask {
        environment: "live",
        operator: "mtn-bj",
        merchant: "m_1",
        operation: "collection",
        amount,
        mode: None,
        skip,
    }
}

fn open(status: &str) -> Option<Offer> {
    Some(Offer {
        status: status.into(),
        min_amount: 100,
        max_amount: 1_000_000,
        currency: "XOF".into(),
        takes_mode: true,
        float: None,
    })
}

fn operational(_: &str) -> Option<Offer> {
    open("operational")
}

fn fail(h: &Health, adapter: &str, times: u64) {
    for i in 0..times {
        let key = ("live".into(), adapter.into(), "mtn-bj".into());
        h.record(key, Observed::Failed, 5.0, i);
    }
}

#[test]
fn the_first_listed_route_is_preferred() {
    let t = table(list(&["momo", "pawapay"]));
    let c = t
        .choose(&health(), &ask(500, &[]), operational, 10)
        .unwrap();
    assert_eq!((c.adapter.as_str(), c.reason), ("momo", "preferred"));
    assert_eq!(c.explanation["rule"], "routing.live.mtn-bj");
    assert_eq!(c.explanation["candidates"][1]["verdict"], "passed over");
}

#[test]
fn a_route_that_answered_nothing_was_done_is_not_tried_again() {
    let t = table(list(&["momo", "pawapay"]));
    let tried = ["momo".to_string()];
    let c = t
        .choose(&health(), &ask(500, &tried), operational, 10)
        .unwrap();
    assert_eq!((c.adapter.as_str(), c.reason), ("pawapay", "failover"));
    let none = ["momo".to_string(), "pawapay".to_string()];
    let e = t
        .choose(&health(), &ask(500, &none), operational, 10)
        .unwrap_err();
    assert_eq!(e["reason"], "no route can take it now");
}

#[test]
fn closed_providers_limits_and_missing_adapters_are_skipped_with_a_reason() {
    let t = table(list(&["momo", "pawapay", "fedapay", "wave"]));
    let offer = |a: &str| match a {
        "momo" => open("closed"),
        "pawapay" => Some(Offer {
            min_amount: 100,
            max_amount: 400,
            ..open("operational").unwrap()
        }),
        "fedapay" => None,
        _ => open("operational"),
    };
    let c = t.choose(&health(), &ask(500, &[]), offer, 10).unwrap();
    assert_eq!((c.adapter.as_str(), c.reason), ("wave", "next"));
    let notes: Vec<&str> = (0..3)
        .map(|i| c.explanation["candidates"][i]["note"].as_str().unwrap())
        .collect();
    assert_eq!(notes[0], "closed, says its provider");
    assert_eq!(notes[1], "takes 100 to 400, not 500");
    assert!(notes[2].starts_with("not loaded"), "{}", notes[2]);
}

#[test]
fn an_open_circuit_is_skipped_then_gets_one_trial() {
    let (t, h) = (table(list(&["momo", "pawapay"])), health());
    fail(&h, "momo", 2);
    let c = t.choose(&h, &ask(500, &[]), operational, 10).unwrap();
    assert_eq!((c.adapter.as_str(), c.reason), ("pawapay", "next"));
    assert!(
        c.explanation["candidates"][0]["note"]
            .as_str()
            .unwrap()
            .starts_with("circuit open")
    );
    let c = t.choose(&h, &ask(500, &[]), operational, 1_500).unwrap();
    assert_eq!((c.adapter.as_str(), c.reason), ("momo", "trial"));
    let c = t.choose(&h, &ask(500, &[]), operational, 1_600).unwrap();
    assert_eq!(c.adapter, "pawapay", "one trial at a time");
}

#[test]
fn delayed_or_slow_routes_serve_only_when_nothing_better_can() {
    let t = table(list(&["momo", "pawapay"]));
    let delayed = |a: &str| {
        open(if a == "momo" {
            "delayed"
        } else {
            "operational"
        })
    };
    let c = t.choose(&health(), &ask(500, &[]), delayed, 10).unwrap();
    assert_eq!(c.adapter, "pawapay");
    let all_delayed = |_: &str| open("delayed");
    let c = t
        .choose(&health(), &ask(500, &[]), all_delayed, 10)
        .unwrap();
    assert_eq!((c.adapter.as_str(), c.reason), ("momo", "slow"));
}

#[test]
fn a_split_follows_its_weights() {
    let t = table(RouteSpec::List(vec![
        Candidate::Weighted {
            adapter: "momo".into(),
            weight: Some(3),
        },
        Candidate::Weighted {
            adapter: "pawapay".into(),
            weight: Some(1),
        },
    ]));
    let h = health();
    let picks: Vec<String> = (0..400)
        .map(|_| {
            t.choose(&h, &ask(500, &[]), operational, 10)
                .unwrap()
                .adapter
        })
        .collect();
    assert_eq!(picks.iter().filter(|a| *a == "momo").count(), 300);
    fail(&h, "momo", 2);
    let c = t.choose(&h, &ask(500, &[]), operational, 20).unwrap();
    assert_eq!((c.adapter.as_str(), c.reason), ("pawapay", "weighted"));
}

#[test]
fn the_first_matching_rule_picks_the_routes() {
    let t = table(RouteSpec::Rules(RuleSet {
        rules: vec![
            Rule {
                merchant: None,
                operation: Some("payout".into()),
                min_amount: None,
                max_amount: None,
                routes: vec![Candidate::Name("pawapay".into())],
            },
            Rule {
                merchant: Some("m_1".into()),
                operation: None,
                min_amount: Some(100_000),
                max_amount: None,
                routes: vec![Candidate::Name("fedapay".into())],
            },
        ],
        routes: vec![Candidate::Name("momo".into())],
    }));
    let h = health();
    let c = t.choose(&h, &ask(500, &[]), operational, 10).unwrap();
    assert_eq!(c.adapter, "momo");
    let c = t.choose(&h, &ask(200_000, &[]), operational, 10).unwrap();
    assert_eq!(c.adapter, "fedapay");
    assert_eq!(c.explanation["rule"], "routing.live.mtn-bj.rules[1]");
    let payout = Ask {
        operation: "payout",
        ..ask(200_000, &[])
    };
    assert_eq!(
        t.choose(&h, &payout, operational, 10).unwrap().adapter,
        "pawapay"
    );
    assert_eq!(t.default_routes("live", "mtn-bj")[0].adapter(), "momo");
}

#[test]
fn an_operator_without_routes_is_explained() {
    let t = table(list(&["momo"]));
    let a = Ask {
        operator: "moov-bj",
        ..ask(500, &[])
    };
    let e = t.choose(&health(), &a, operational, 10).unwrap_err();
    assert_eq!(e["reason"], "no route is configured for moov-bj in live");
}

#[test]
fn route_lists_are_checked() {
    assert!(
        list(&["momo", "momo"])
            .check("x")
            .unwrap_err()
            .contains("twice")
    );
    assert!(RouteSpec::List(vec![]).check("x").is_err());
    let half = RouteSpec::List(vec![
        Candidate::Name("momo".into()),
        Candidate::Weighted {
            adapter: "pawapay".into(),
            weight: Some(2),
        },
    ]);
    assert!(half.check("x").unwrap_err().contains("every adapter"));
}

#[test]
fn when_every_route_is_open_a_collection_takes_the_first_and_a_payout_waits() {
    let (t, h) = (table(list(&["momo", "pawapay"])), health());
    fail(&h, "momo", 2);
    fail(&h, "pawapay", 2);
    let c = t.choose(&h, &ask(500, &[]), operational, 10).unwrap();
    assert_eq!((c.adapter.as_str(), c.reason), ("momo", "last_resort"));
    let payout = Ask {
        operation: "payout",
        ..ask(500, &[])
    };
    let e = t.choose(&h, &payout, operational, 10).unwrap_err();
    assert_eq!(e["candidates"][0]["verdict"], "skipped");
}

#[test]
fn a_payout_skips_a_route_whose_wallet_cannot_cover_it_and_waits_when_none_can() {
    let t = table(list(&["momo", "pawapay"]));
    let wallet = |available| float::Wallet {
        name: "mtn-bj disbursement".into(),
        currency: "XOF".into(),
        available,
        pays_out: vec!["mtn-bj".into()],
    };
    let offer = |momo: u64, pawapay: Option<u64>| {
        move |a: &str| {
            let float = match a {
                "momo" => Some(wallet(momo)),
                _ => pawapay.map(wallet),
            };
            Some(Offer {
                float,
                ..open("operational").unwrap()
            })
        }
    };
    let payout = Ask {
        operation: "payout",
        ..ask(5_000, &[])
    };
    let c = t
        .choose(&health(), &payout, offer(4_999, None), 10)
        .unwrap();
    assert_eq!(
        (c.adapter.as_str(), c.reason),
        ("pawapay", "next"),
        "a provider stating no balance is not held back"
    );
    assert_eq!(
        c.explanation["candidates"][0]["note"],
        "insufficient float: its wallet mtn-bj disbursement holds 4999 XOF, not 5000"
    );
    let c = t
        .choose(&health(), &payout, offer(5_000, Some(0)), 10)
        .unwrap();
    assert_eq!(c.adapter, "momo", "exactly enough is enough");
    let e = t
        .choose(&health(), &payout, offer(10, Some(10)), 10)
        .unwrap_err();
    assert_eq!(e["reason"], "no route can take it now", "{e:?}");
}

/// A refusal says what every route refused, by what its provider describes;
/// routes that take the operation but cannot now make it unroutable.
#[test]
fn a_refusal_names_what_every_route_refused() {
    let t = table(list(&["momo", "pawapay"]));
    let (h, none) = (health(), |_: &str| None);
    let refused = |offer: &dyn Fn(&str) -> Option<Offer>, a: &Ask| {
        t.choose(&h, a, offer, 10).unwrap_err().refusal
    };
    assert_eq!(refused(&none, &ask(500, &[])), Refusal::NotOffered);
    assert_eq!(
        refused(&|_| open("closed"), &ask(500, &[])),
        Refusal::Closed
    );
    let limits = |a: &str| {
        Some(Offer {
            min_amount: if a == "momo" { 100 } else { 50 },
            max_amount: if a == "momo" { 1_000 } else { 400 },
            ..open("operational").unwrap()
        })
    };
    assert_eq!(
        refused(&limits, &ask(5_000, &[])),
        Refusal::Amount {
            min: 50,
            max: 1_000,
            currency: "XOF".into()
        },
        "the range every route takes together"
    );
    let hosted = Ask {
        mode: Some("hosted"),
        ..ask(500, &[])
    };
    let direct_only = |_: &str| {
        Some(Offer {
            takes_mode: false,
            ..open("operational").unwrap()
        })
    };
    assert_eq!(refused(&direct_only, &hosted), Refusal::Mode);
    // One closed, one too small: no single reason; one tried: not now.
    let mixed = |a: &str| {
        if a == "momo" {
            open("closed")
        } else {
            limits(a)
        }
    };
    assert_eq!(refused(&mixed, &ask(500, &[])), Refusal::Unroutable);
    let both = ["momo".to_string(), "pawapay".to_string()];
    assert_eq!(refused(&operational, &ask(500, &both)), Refusal::Unroutable);

    // Availability is judged the same way, whatever the routes' health.
    fail(&h, "momo", 2);
    fail(&h, "pawapay", 2);
    assert_eq!(t.available(&ask(500, &[]), operational), Ok(()));
    assert_eq!(t.available(&hosted, direct_only), Err(Refusal::Mode));
    assert_eq!(t.available(&ask(500, &[]), none), Err(Refusal::NotOffered));
    assert_eq!(
        t.available(&ask(300, &[]), mixed),
        Ok(()),
        "pawapay takes 300"
    );
}
