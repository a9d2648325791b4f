//! Wave's wire formats: what a checkout session's state says, and bodies
//! that must never panic the parser.

use mmc_adapter_kit::types::PspStatus;
use wave::transformers::*;

use mmc_adapter_kit::wire::parse;

#[test]
fn a_paid_session_says_what_it_took() {
    let s: Session = parse(
        "session",
        br#"{"id":"cos-1","checkout_status":"complete","payment_status":"succeeded",
            "amount":"2500","currency":"XOF"}"#,
    )
    .unwrap();
    match session_status(&s).unwrap() {
        PspStatus::Completed(t) => {
            assert_eq!((t.amount.as_str(), t.currency.as_str()), ("2500", "XOF"))
        }
        other => panic!("{other:?}"),
    }
    let s: Session = parse(
        "session",
        br#"{"id":"cos-1","checkout_status":"complete","payment_status":"succeeded"}"#,
    )
    .unwrap();
    assert!(
        session_status(&s).is_err(),
        "a success that does not say what it took"
    );
}

#[test]
fn an_open_session_with_a_failed_attempt_is_still_pending() {
    let s: Session = parse(
        "session",
        br#"{"id":"cos-1","checkout_status":"open","payment_status":"processing",
            "last_payment_error":{"code":"insufficient-funds","message":"low"}}"#,
    )
    .unwrap();
    assert!(matches!(session_status(&s), Ok(PspStatus::Pending)));
    let s: Session = parse(
        "session",
        br#"{"id":"cos-1","checkout_status":"expired","payment_status":"cancelled",
            "last_payment_error":{"code":"insufficient-funds","message":"low"}}"#,
    )
    .unwrap();
    match session_status(&s).unwrap() {
        PspStatus::Failed(f) => assert_eq!(f.code, "insufficient_funds"),
        other => panic!("{other:?}"),
    }
}

mod props {
    use proptest::prelude::*;

    proptest! {
        /// Webhook bodies never panic the parser, whatever arrives.
        #[test]
        fn bodies_never_panic(body in prop::collection::vec(any::<u8>(), 0..200)) {
            if let Ok(s) = serde_json::from_slice::<wave::transformers::Session>(&body) {
                let _ = wave::transformers::session_status(&s);
            }
        }
    }
}
