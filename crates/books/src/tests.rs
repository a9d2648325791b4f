use super::*;

fn ours(status: OurStatus) -> Ours {
    Ours {
        id: "p1".into(),
        kind: Kind::Collection,
        merchant_id: "m".into(),
        environment: "live".into(),
        operator: Some("wave-ci".into()),
        amount: 1000,
        currency: "XOF".into(),
        status,
        stated: "completed".into(),
        psp_reference: Some("cos-1".into()),
        created_at_ms: 0,
        settled_at_ms: None,
        batch_id: None,
    }
}

fn line(amount: &str, fee: &str, status: &str) -> Line {
    Line {
        provider_id: "T1".into(),
        our_id: Some("p1".into()),
        psp_reference: None,
        kind: Kind::Collection,
        amount: Amount::parse(amount).unwrap(),
        fee: Amount::parse(fee),
        currency: "XOF".into(),
        status: status.into(),
        operator_transaction_id: None,
        at_ms: 0,
        wallet: None,
        balance_after: None,
    }
}

#[test]
fn the_same_money_on_both_sides_is_matched() {
    let done = ours(OurStatus::Completed);
    assert_eq!(
        judge(Some(&done), &[&line("1000", "10", "completed")], Some(10)),
        Category::Matched
    );
    assert_eq!(
        judge(Some(&done), &[&line("1000.00", "10", "completed")], None),
        Category::Matched
    );
    // Nothing moved on either side.
    assert_eq!(
        judge(Some(&ours(OurStatus::Failed)), &[], None),
        Category::Matched
    );
    assert_eq!(
        judge(Some(&ours(OurStatus::InProgress)), &[], None),
        Category::Matched
    );
}

#[test]
fn money_we_recorded_that_the_provider_never_moved_is_missing_at_the_provider() {
    assert_eq!(
        judge(Some(&ours(OurStatus::Completed)), &[], None),
        Category::MissingAtProvider
    );
}

#[test]
fn money_the_provider_moved_that_we_never_recorded_is_missing_here() {
    assert_eq!(
        judge(None, &[&line("1000", "0", "completed")], None),
        Category::MissingHere
    );
    // A failed attempt moved nothing.
    assert_eq!(
        judge(None, &[&line("1000", "0", "failed")], None),
        Category::Matched
    );
}

#[test]
fn a_late_arrival_and_its_reverse_are_status_differences() {
    let executed = line("1000", "0", "completed");
    assert_eq!(
        judge(Some(&ours(OurStatus::Failed)), &[&executed], None),
        Category::StatusDiffers
    );
    assert_eq!(
        judge(Some(&ours(OurStatus::InProgress)), &[&executed], None),
        Category::StatusDiffers
    );
    let failed = line("1000", "0", "failed");
    assert_eq!(
        judge(Some(&ours(OurStatus::Completed)), &[&failed], None),
        Category::StatusDiffers
    );
    // Executed then reversed: nothing moved in the end.
    let reversal = line("1000", "0", "reversed");
    let done = ours(OurStatus::Completed);
    assert_eq!(
        judge(Some(&done), &[&executed, &reversal], None),
        Category::StatusDiffers
    );
    assert_eq!(
        judge(
            Some(&ours(OurStatus::Failed)),
            &[&executed, &reversal],
            None
        ),
        Category::Matched
    );
}

#[test]
fn another_amount_or_currency_is_an_amount_difference() {
    let done = ours(OurStatus::Completed);
    assert_eq!(
        judge(Some(&done), &[&line("999", "0", "completed")], None),
        Category::AmountDiffers
    );
    let mut euros = line("1000", "0", "completed");
    euros.currency = "EUR".into();
    assert_eq!(judge(Some(&done), &[&euros], None), Category::AmountDiffers);
}

#[test]
fn a_fee_off_the_rate_card_is_a_fee_difference_only_where_a_card_applies() {
    let done = ours(OurStatus::Completed);
    assert_eq!(
        judge(Some(&done), &[&line("1000", "12", "completed")], Some(10)),
        Category::FeeDiffers
    );
    assert_eq!(
        judge(Some(&done), &[&line("1000", "12", "completed")], None),
        Category::Matched
    );
}

#[test]
fn money_moved_twice_is_a_duplicate_before_anything_else() {
    let done = ours(OurStatus::Completed);
    let first = line("1000", "10", "completed");
    let mut second = line("900", "10", "completed");
    second.provider_id = "T2".into();
    assert_eq!(
        judge(Some(&done), &[&first, &second], Some(10)),
        Category::Duplicate
    );
}

#[test]
fn a_tally_counts_every_category_and_the_providers_totals() {
    let mut t = Tally::new();
    t.count(Category::Matched);
    t.count(Category::Duplicate);
    t.movement(&line("1000", "10", "completed"));
    t.movement(&line("500", "5", "completed"));
    t.movement(&line("500", "0", "failed"));
    assert_eq!(t.counts.len(), 7);
    assert_eq!(t.of(Category::Matched), 1);
    assert_eq!(t.mismatches(), 1);
    let c = t.provider_total(Kind::Collection);
    assert_eq!(
        (c.count, c.amount, c.fee),
        (2, Amount::whole(1500), Amount::whole(15))
    );
}
