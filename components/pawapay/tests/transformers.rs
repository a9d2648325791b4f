//! pawaPay's wire formats: which states are final, the account's active
//! configuration, and the customer message's rules.

use mmc_adapter_kit::types::PspStatus;
use mmc_adapter_kit::wire::parse;
use pawapay::transformers::*;

#[test]
fn only_completed_and_failed_are_final() {
    let check = |json: &str| check_status(&parse::<Check>("check", json.as_bytes()).unwrap());
    match check(
        r#"{"status":"FOUND","data":{"status":"COMPLETED","amount":"1000.00","currency":"XOF",
            "payer":{"type":"MMO","accountDetails":{"phoneNumber":"22997000001","provider":"MOOV_BEN"}}}}"#,
    ) {
        Ok(PspStatus::Completed(s)) => {
            assert_eq!((s.amount.as_str(), s.currency.as_str()), ("1000.00", "XOF"));
            assert_eq!(s.party.as_deref(), Some("22997000001"));
        }
        other => panic!("{other:?}"),
    }
    // A success that does not say what was moved cannot be believed.
    assert!(check(r#"{"status":"FOUND","data":{"status":"COMPLETED"}}"#).is_err());
    assert!(matches!(
        check(r#"{"status":"FOUND","data":{"status":"IN_RECONCILIATION"}}"#),
        Ok(PspStatus::Pending)
    ));
    // Not found is not final by itself: the caller weighs it against the request's window.
    assert!(matches!(
        check(r#"{"status":"NOT_FOUND"}"#),
        Ok(PspStatus::NotFound)
    ));
    match check(
        r#"{"status":"FOUND","data":{"status":"FAILED","failureReason":{"failureCode":"INSUFFICIENT_BALANCE"}}}"#,
    ) {
        Ok(PspStatus::Failed(f)) => assert_eq!(f.code, "insufficient_funds"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn active_conf_deposits_are_read_in_both_documented_forms() {
    let conf: ActiveConf = parse(
        "conf",
        br#"{"companyName":"M","countries":[{"country":"BEN","providers":[
          {"provider":"MOOV_BEN","currencies":[{"currency":"XOF","operationTypes":[
            {"DEPOSIT":{"authType":"PROVIDER_AUTH","minTransactionLimit":"100.5","maxTransactionLimit":"50000","status":"DELAYED"}},
            {"operationType":"PAYOUT","minTransactionLimit":"1","maxTransactionLimit":"9","status":"CLOSED"}]}]},
          {"provider":"MTN_MOMO_BEN","currencies":[{"currency":"XOF","operationTypes":[
            {"operationType":"DEPOSIT","minTransactionLimit":"200","maxTransactionLimit":"900.99","status":"CLOSED"}]}]},
          {"provider":"PAYOUT_ONLY","currencies":[{"currency":"XOF","operationTypes":[
            {"operationType":"PAYOUT","minTransactionLimit":"1","maxTransactionLimit":"9"}]}]}]}]}"#,
    )
    .unwrap();
    let d = deposit_conf(&conf);
    assert_eq!(
        d["MOOV_BEN"],
        DepositConf {
            min: Some(101),
            max: Some(50000),
            status: Some("DELAYED".into()),
            auth_type: Some("PROVIDER_AUTH".into()),
        }
    );
    assert_eq!(
        (d["MTN_MOMO_BEN"].min, d["MTN_MOMO_BEN"].max),
        (Some(200), Some(900))
    );
    assert!(!d.contains_key("PAYOUT_ONLY"));
    assert_eq!(availability(Some("CLOSED")), "closed");
    assert!(parse::<ActiveConf>("conf", b"{}").is_err());
}

#[test]
fn customer_message_fits_the_rules() {
    assert_eq!(
        customer_message(Some("Order #42 — thanks!")).unwrap(),
        "Order 42  thanks"
    );
    assert_eq!(customer_message(Some("é")), None);
    assert_eq!(customer_message(None), None);
}
