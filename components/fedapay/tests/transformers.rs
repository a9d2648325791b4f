//! The wire formats read as FedaPay sends them: bare or wrapped objects, the
//! statuses and failure codes, and bodies that must never panic the parser.

use fedapay::transformers::*;
use mmc_adapter_kit::types::PspStatus;

#[test]
fn the_xof_modes_are_read_from_a_bare_or_wrapped_list() {
    let bare = br#"[{"iso":"GNF","modes":["mtn_open"]},{"id":1,"iso":"XOF","modes":["MTN_OPEN"," sbin"]}]"#;
    let wrapped = br#"{"v1/currencies":[{"iso":"xof","modes":["moov"]}]}"#;
    let read = |b: &[u8]| xof_modes(&many::<CurrencyModes>("currencies", b).unwrap());
    assert_eq!(read(bare), Some(vec!["mtn_open".into(), "sbin".into()]));
    assert_eq!(read(wrapped), Some(vec!["moov".into()]));
    assert_eq!(read(br#"[{"iso":"GNF","modes":["mtn_open"]}]"#), None);
}

fn xof(id: u64) -> Option<String> {
    (id == 1).then(|| "XOF".to_string())
}

#[test]
fn currencies_without_modes_say_nothing_of_modes() {
    let listed = many::<CurrencyModes>(
        "currencies",
        br#"[{"id":1,"iso":"XOF","name":"FCFA"},{"id":2,"iso":"GNF","modes":["mtn_open"]}]"#,
    )
    .unwrap();
    assert_eq!(xof_modes(&listed), None, "no modes listed is not no modes");
    assert_eq!(iso_of(&listed, 1).as_deref(), Some("XOF"));
    assert_eq!(iso_of(&listed, 3), None);
    let none =
        many::<CurrencyModes>("currencies", br#"[{"id":1,"iso":"XOF","modes":[]}]"#).unwrap();
    assert_eq!(xof_modes(&none), Some(vec![]), "an empty list is a list");
}

#[test]
fn a_payouts_error_code_may_be_a_number() {
    let p: Payout = one(
        "payout",
        br#"{"id":4,"status":"failed","last_error_code":4001,"last_error_message":"No account"}"#,
    )
    .unwrap();
    assert_eq!(p.last_error_code.as_deref(), Some("4001"));
    match p.status(&xof).unwrap() {
        PspStatus::Failed(f) => assert!(f.message.contains("No account"), "{f:?}"),
        other => panic!("{other:?}"),
    }
    let p: Payout = one(
        "payout",
        br#"{"id":4,"status":"sent","amount":"700","currency_id":1,
            "customer":{"phone_number":{"number":"+22997000001"}}}"#,
    )
    .unwrap();
    match p.status(&xof).unwrap() {
        PspStatus::Completed(s) => {
            assert_eq!(s.amount, "700");
            assert_eq!(s.party.as_deref(), Some("+22997000001"));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn wrapped_and_bare_objects_are_read() {
    let t: Transaction = one(
        "transaction",
        br#"{"v1/transaction":{"id":7,"status":"pending"}}"#,
    )
    .unwrap();
    assert_eq!(t.id, 7);
    let t: Transaction = one(
        "transaction",
        br#"{"id":8,"status":"approved","amount":1500,"currency_id":1}"#,
    )
    .unwrap();
    match t.status(&xof).unwrap() {
        PspStatus::Completed(s) => {
            assert_eq!((s.amount.as_str(), s.currency.as_str()), ("1500", "XOF"))
        }
        other => panic!("{other:?}"),
    }
    // Paid, but in a currency that cannot be told, or for no stated amount: unreadable.
    let t: Transaction = one(
        "transaction",
        br#"{"id":8,"status":"approved","amount":1500,"currency_id":9}"#,
    )
    .unwrap();
    assert!(t.status(&xof).is_err());
    let t: Transaction = one("transaction", br#"{"id":8,"status":"approved"}"#).unwrap();
    assert!(t.status(&xof).is_err());
    let list: Vec<Transaction> = many(
        "transactions",
        br#"{"v1/transactions":[{"id":1,"status":"declined"}],"meta":{"page":1}}"#,
    )
    .unwrap();
    assert_eq!(list.len(), 1);
    assert!(many::<Transaction>("transactions", br#"{"meta":{}}"#).is_err());
    assert!(one::<Transaction>("transaction", b"<html>").is_err());
}

#[test]
fn only_explicit_states_are_final() {
    let t = |status: &str, code: Option<&str>| Transaction {
        id: 1,
        status: status.into(),
        last_error_code: code.map(str::to_string),
        amount: Some("100".into()),
        currency_id: Some(1),
        ..Transaction::default()
    };
    let status = |t: Transaction| t.status(&xof).unwrap();
    assert!(matches!(status(t("pending", None)), PspStatus::Pending));
    assert!(matches!(
        status(t("something_new", None)),
        PspStatus::Pending
    ));
    assert!(matches!(
        status(t("transferred", None)),
        PspStatus::Completed(_)
    ));
    match status(t("declined", Some("INSUFFICIENT_FUND_ERROR"))) {
        PspStatus::Failed(f) => assert_eq!(f.code, "insufficient_funds"),
        other => panic!("{other:?}"),
    }
    match status(t("canceled", None)) {
        PspStatus::Failed(f) => assert_eq!(f.code, "cancelled"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn our_id_comes_from_custom_metadata() {
    assert_eq!(our_id(&Some(metadata("pay-1"))).as_deref(), Some("pay-1"));
    assert_eq!(our_id(&None), None);
    assert_eq!(split_name("Awa Koné Diallo").1, "Koné Diallo");
    assert_eq!(split_name("Awa").0, "Awa");
}

mod props {
    use proptest::prelude::*;

    proptest! {
        /// Callback bodies never panic the parser, whatever arrives (the
        /// signature header's parser is the adapter kit's, tested there).
        #[test]
        fn bodies_never_panic(body in prop::collection::vec(any::<u8>(), 0..200)) {
            let _ = fedapay::transformers::parse::<fedapay::transformers::Event>("webhook", &body);
            let _ = fedapay::transformers::one::<fedapay::transformers::Transaction>("transaction", &body);
        }
    }
}
