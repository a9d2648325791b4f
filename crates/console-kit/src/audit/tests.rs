use super::table;
use super::*;
use crate::format::Zone;
use crate::html::Lang;
use crate::sessions::Sessions;
use crate::users::{Role, Users};

fn outcomes(log: &AuditLog, merchant: &str) -> Vec<(String, Option<String>, String)> {
    let (entries, _) = log.list(merchant, &Filter::default()).unwrap();
    entries
        .into_iter()
        .rev()
        .map(|e| (e.action, e.detail, e.outcome))
        .collect()
}

#[test]
fn an_entry_is_written_before_its_action_and_a_replay_is_one_change() {
    let dir = tempfile::tempdir().unwrap();
    let (db, m) = crate::test_shop(&dir);
    let user = Users::new(db.clone())
        .invite(&m.id, "f@shop.bj", Role::Finance)
        .unwrap()
        .user;
    let sessions = Sessions::new(db.clone());
    let token = sessions.open(&user.id, true, None).unwrap();
    let s = sessions.find(&token).unwrap().unwrap();
    let log = AuditLog::new(db);

    // Written before the action: a node that stops here leaves the attempt.
    let refund = log
        .begin(&s, "payment.refund", Some("pay_1"), Some("amount 5"), None)
        .unwrap();
    let pending = (
        "payment.refund".to_string(),
        Some("amount 5".into()),
        "pending".into(),
    );
    assert_eq!(outcomes(&log, &m.id), vec![pending.clone()]);
    log.finish_once(refund, "pay_1", "refund re_1 amount 5")
        .unwrap();
    // The replay of the same request: the same refund, one entry.
    let replay = log
        .begin(&s, "payment.refund", Some("pay_1"), Some("amount 5"), None)
        .unwrap();
    log.finish_once(replay, "pay_1", "refund re_1 amount 5")
        .unwrap();
    let cancel = log
        .begin(&s, "payment.cancel", Some("pay_1"), None, None)
        .unwrap();
    log.finish(
        cancel,
        Outcome::Refused,
        None,
        Some("409 payment_not_cancellable"),
    )
    .unwrap();
    let act: Result<(), String> = log
        .act(
            &s,
            ("key.revoke", Some("key_1"), None),
            || Err("no such key".to_string()),
            |_| (None, None),
        )
        .unwrap();
    assert!(act.is_err());
    let stopped = log.begin(&s, "bulk.upload", None, Some("june.csv"), None);
    drop(stopped);
    assert_eq!(
        outcomes(&log, &m.id),
        vec![
            (
                "payment.refund".to_string(),
                Some("refund re_1 amount 5".into()),
                "done".into()
            ),
            (
                "payment.cancel".to_string(),
                Some("409 payment_not_cancellable".into()),
                "refused".into()
            ),
            (
                "key.revoke".to_string(),
                Some("no such key".into()),
                "refused".into()
            ),
            (
                "bulk.upload".to_string(),
                Some("june.csv".into()),
                "pending".into()
            ),
        ]
    );
}

#[test]
fn refusals_sign_ins_and_payments_are_kept_and_the_list_narrows_to_what_is_asked() {
    let dir = tempfile::tempdir().unwrap();
    let (db, m) = crate::test_shop(&dir);
    let users = Users::new(db.clone());
    let agent = users
        .invite(&m.id, "agent@shop.bj", Role::Support)
        .unwrap()
        .user;
    let owner = users
        .invite(&m.id, "owner@shop.bj", Role::Owner)
        .unwrap()
        .user;
    let sessions = Sessions::new(db.clone());
    let session = |id: &str| {
        let token = sessions.open(id, false, None).unwrap();
        sessions.find(&token).unwrap().unwrap()
    };
    let (a, o) = (session(&agent.id), session(&owner.id));
    let log = AuditLog::new(db);

    let payment = Payment {
        reference: Some("order-42".into()),
        amount: Some(15_000),
        currency: Some("XOF".into()),
    };
    log.refused(
        &a,
        ("payment.refund", Some("pay_1"), Some(&payment)),
        "403 insufficient_scope",
        Some("10.0.0.1"),
    )
    .unwrap();
    log.sign_in_refused(" Agent@Shop.bj ", false, None).unwrap();
    log.sign_in_refused("nobody@shop.bj", false, None).unwrap();
    // An owner's reset, then the link it gave: the reset's first password.
    log.record(&o, "user.reset", Some(&agent.id), None, None)
        .unwrap();
    log.link_accepted(&a, None).unwrap();
    log.link_accepted(&o, None).unwrap();
    let lost = log
        .begin(&o, "payment.cancel", Some("pay_2"), None, None)
        .unwrap();
    drop(lost);

    let list = |f: Filter| {
        let (entries, _) = log.list(&m.id, &f).unwrap();
        entries
            .into_iter()
            .rev()
            .map(|e| (e.email, e.action, e.outcome, e.detail))
            .collect::<Vec<_>>()
    };
    let entry = |who: &str, action: &str, outcome: &str, detail: Option<&str>| {
        (
            who.to_string(),
            action.to_string(),
            outcome.to_string(),
            detail.map(str::to_string),
        )
    };
    let refund = entry(
        "agent@shop.bj",
        "payment.refund",
        "refused",
        Some("403 insufficient_scope"),
    );
    let refused_sign_in = entry(
        "agent@shop.bj",
        "session.sign_in",
        "refused",
        Some("wrong password"),
    );
    assert_eq!(
        list(Filter {
            outcome: Some("refused".into()),
            ..Filter::default()
        }),
        vec![refund.clone(), refused_sign_in.clone()],
        "an address nobody has is in no merchant's log"
    );
    assert_eq!(
        list(Filter {
            email: Some("agent@shop.bj".into()),
            ..Filter::default()
        }),
        vec![
            refund,
            refused_sign_in,
            entry("agent@shop.bj", "user.reset_accepted", "done", None),
            entry(
                "agent@shop.bj",
                "session.sign_in",
                "done",
                Some("first password after a reset")
            ),
        ]
    );
    assert_eq!(
        list(Filter {
            action: Some("session.sign_in".into()),
            email: Some("owner@shop.bj".into()),
            ..Filter::default()
        }),
        vec![entry(
            "owner@shop.bj",
            "session.sign_in",
            "done",
            Some("first password of an invitation")
        )]
    );
    // Not known: no answer, or the node stopped before it.
    assert_eq!(
        list(Filter {
            outcome: Some("unknown".into()),
            ..Filter::default()
        }),
        vec![entry("owner@shop.bj", "payment.cancel", "pending", None)]
    );
    let (entries, _) = log
        .list(
            &m.id,
            &Filter {
                action: Some("payment.refund".into()),
                ..Filter::default()
            },
        )
        .unwrap();
    assert_eq!(entries[0].payment.as_ref(), Some(&payment));
    assert_eq!(entries[0].client.as_deref(), Some("10.0.0.1"));
    crate::add_words(&[]); // the frame's words, which the page's table uses
    let page = table(Lang::En, &entries, Zone::Utc);
    assert!(
        page.contains("<a href=\"/console/payments/pay_1\">order-42</a> · 15,000 XOF · <code>403 insufficient_scope</code>")
            && page.contains("Refund <strong>payment.refund</strong>"),
        "{page}"
    );
}

#[test]
fn every_action_offered_has_words_in_both_languages() {
    for action in ACTIONS {
        for l in [Lang::En, Lang::Fr] {
            assert_ne!(action_words(l, action), *action, "{action} in {l:?}");
        }
    }
    let mut keys: Vec<&str> = WORDS.iter().map(|(k, _, _)| *k).collect();
    keys.sort_unstable();
    let n = keys.len();
    keys.dedup();
    assert_eq!(keys.len(), n, "a word listed twice");
}
