//! MTN MoMo's wire formats: which states are final, MTN's reason codes,
//! the notes MTN accepts, and bodies that must never panic the parser.

use mmc_adapter_kit::types::PspStatus;
use momo::transformers::*;

#[test]
fn only_explicit_outcomes_are_final() {
    let t = |s: &str, r: Option<&str>| {
        let json = match r {
            Some(r) => format!(r#"{{"status":"{s}","reason":"{r}"}}"#),
            None => format!(r#"{{"status":"{s}"}}"#),
        };
        status_of(&parse_transaction(json.as_bytes()).unwrap())
    };
    // A success that does not say what was moved cannot be believed.
    assert!(t("SUCCESSFUL", None).is_err());
    match status_of(
        &parse_transaction(
            br#"{"status":"SUCCESSFUL","amount":"1500","currency":"XOF",
                "payer":{"partyIdType":"MSISDN","partyId":"2290166000001"}}"#,
        )
        .unwrap(),
    ) {
        Ok(PspStatus::Completed(s)) => {
            assert_eq!((s.amount.as_str(), s.currency.as_str()), ("1500", "XOF"));
            assert_eq!(s.party.as_deref(), Some("2290166000001"));
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(t("PENDING", None), Ok(PspStatus::Pending)));
    assert!(matches!(t("SOMETHING_NEW", None), Ok(PspStatus::Pending)));
    match t("FAILED", Some("NOT_ENOUGH_FUNDS")).unwrap() {
        PspStatus::Failed(f) => assert_eq!(f.code, "insufficient_funds"),
        other => panic!("{other:?}"),
    }
}

/// MTN's published reason codes → our failure codes: the customer's
/// own doing keeps its meaning; our configuration or MTN's service is
/// `operator_error` with MTN's reason.
#[test]
fn mtn_reason_codes_map_to_our_failure_codes() {
    for (reason, code) in [
        ("APPROVAL_REJECTED", "declined_by_customer"),
        ("PAYMENT_NOT_APPROVED", "declined_by_customer"),
        ("EXPIRED", "approval_expired"),
        // The prompt timed out on the customer's phone.
        ("COULD_NOT_PERFORM_TRANSACTION", "approval_expired"),
        ("NOT_ENOUGH_FUNDS", "insufficient_funds"),
        ("PAYER_NOT_FOUND", "payer_not_found"),
        ("PAYEE_NOT_FOUND", "recipient_not_found"),
        ("PAYER_LIMIT_REACHED", "limit_reached"),
        ("PAYEE_NOT_ALLOWED_TO_RECEIVE", "recipient_not_allowed"),
        ("SENDER_ACCOUNT_NOT_ACTIVE", "account_blocked"),
        ("TRANSACTION_CANCELED", "cancelled"),
        ("NOT_ALLOWED", "operator_error"),
        ("NOT_ALLOWED_TARGET_ENVIRONMENT", "operator_error"),
        ("INVALID_CALLBACK_URL_HOST", "operator_error"),
        ("INVALID_CURRENCY", "operator_error"),
        ("RESOURCE_NOT_FOUND", "operator_error"),
        ("RESOURCE_ALREADY_EXIST", "operator_error"),
        ("SERVICE_UNAVAILABLE", "operator_error"),
        ("INTERNAL_PROCESSING_ERROR", "operator_error"),
        ("SOMETHING_MTN_ADDS_LATER", "operator_error"),
    ] {
        let f = failure_for(Some(reason));
        assert_eq!(f.code, code, "{reason}");
        assert!(!f.message.is_empty(), "{reason}");
        if code == "operator_error" {
            assert!(f.message.contains(reason), "MTN's reason is kept: {f:?}");
        }
        // The same through a status answer, in both shapes of `reason`.
        for body in [
            format!(r#"{{"status":"FAILED","reason":"{reason}"}}"#),
            format!(r#"{{"status":"FAILED","reason":{{"code":"{reason}","message":"x"}}}}"#),
        ] {
            match status_of(&parse_transaction(body.as_bytes()).unwrap()).unwrap() {
                PspStatus::Failed(f) => assert_eq!(f.code, code, "{body}"),
                other => panic!("{body}: {other:?}"),
            }
        }
    }
    assert_eq!(failure_for(None).code, "operator_error");
}

/// MTN answers 400 to some characters in `payerMessage`/`payeeNote`
/// (apostrophes among them) and to notes over 160 characters: a note
/// keeps letters (accents folded), digits, spaces and `. , - _ : /`.
#[test]
fn notes_keep_only_what_mtn_accepts() {
    assert_eq!(
        note("L'épicerie d'Awa: \"promo\" <10%> & co; merci"),
        "Lepicerie dAwa: promo 10  co merci"
    );
    assert_eq!(
        note("Reçu n° 42/2024, Côte d’Ivoire"),
        "Recu n 42/2024, Cote dIvoire"
    );
    assert_eq!(note("order_42-b.c"), "order_42-b.c");
    assert_eq!(note("'\"<>&;"), "");
    let long = "é".repeat(200);
    assert_eq!(note(&long), "e".repeat(NOTE_MAX));
    for text in [
        "a'b",
        "x\"y",
        "<script>",
        "a&b;c",
        "tab\there",
        "emoji 😀 ok",
    ] {
        let n = note(text);
        assert!(
            n.chars().all(|c| c.is_ascii_alphanumeric()
                || matches!(c, ' ' | '.' | ',' | '-' | '_' | ':' | '/')),
            "{text} -> {n}"
        );
    }
}

#[test]
fn reason_may_be_an_object() {
    let t = parse_transaction(
        br#"{"status":"FAILED","reason":{"code":"APPROVAL_REJECTED","message":"no"}}"#,
    )
    .unwrap();
    match status_of(&t).unwrap() {
        PspStatus::Failed(f) => assert_eq!(f.code, "declined_by_customer"),
        other => panic!("{other:?}"),
    }
}

mod props {
    use proptest::prelude::*;

    proptest! {
        /// Callback and status bodies never panic the parser, whatever arrives.
        #[test]
        fn transaction_bodies_never_panic(body in prop::collection::vec(any::<u8>(), 0..300)) {
            if let Ok(t) = momo::transformers::parse_transaction(&body) {
                let _ = momo::transformers::status_of(&t);
            }
        }
    }
}

/// Each of MTN's three money movements names only its own party: a request
/// to pay its payer, a transfer its payee, a refund the request it refunds;
/// and a refund's notes are cleaned as every note is (MTN answers 400 to an
/// apostrophe).
#[test]
fn each_movement_body_names_only_its_own_party() {
    use mmc_adapter_kit::types::{OperationRef, PayoutRequest, RefundRequest};
    let keys = |m: &Movement| {
        let v = serde_json::to_value(m).unwrap();
        let mut keys: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
        keys.sort();
        (keys.join(","), v)
    };
    let payout = PayoutRequest {
        payout_id: "po_1".into(),
        operator: "mtn-bj".into(),
        environment: "live".into(),
        phone: "+2290166000001".into(),
        amount: 2500,
        currency: "XOF".into(),
        beneficiary_name: "Awa Koné".into(),
        reference: "salaire-11".into(),
    };
    let (k, v) = keys(&transfer(&payout));
    assert_eq!(k, "amount,currency,externalId,payee,payeeNote,payerMessage");
    assert_eq!(v["payee"]["partyId"], "2290166000001");
    assert_eq!(v["payee"]["partyIdType"], "MSISDN");
    let asked = RefundRequest {
        refund_id: "rf_1".into(),
        payment: OperationRef {
            id: "pay_1".into(),
            operator: "mtn-bj".into(),
            environment: "live".into(),
            psp_reference: None,
            phone: None,
            amount: 5000,
            currency: "XOF".into(),
        },
        amount: 2000,
        reason: "l'article n'était pas en stock".into(),
    };
    let (k, v) = keys(&refund(&asked, "ref-uuid".into()));
    assert_eq!(
        k,
        "amount,currency,externalId,payeeNote,payerMessage,referenceIdToRefund"
    );
    assert_eq!(v["referenceIdToRefund"], "ref-uuid");
    assert_eq!(v["amount"], "2000");
    assert_eq!(v["payerMessage"], "Refund: larticle netait pas en stock");
    assert_eq!(v["payeeNote"], v["payerMessage"]);
}
