use super::*;

fn counts(payments: i64, succeeded: i64, finished: i64, volume: i64) -> Counts {
    Counts {
        payments,
        succeeded,
        finished,
        volume,
    }
}

#[test]
fn rows_count_in_their_day_and_operator_and_rates_leave_out_the_unfinished() {
    crate::words::add();
    // An hour into a day, in milliseconds since the epoch.
    let now = 1_780_272_000_000 + 3_600_000;
    let (today, first) = (20_605, 20_605 - 29);
    let row = |day: i64, op: &str, c: Counts| (day, op.to_string(), c);
    let f = figures(
        &[
            row(today, "mtn-bj", counts(2, 1, 2, 1000)),
            row(today, "moov-bj", counts(1, 0, 0, 0)),
            row(first, "mtn-bj", counts(1, 1, 1, 2000)),
            // The period before: 31 and 60 days ago; 61 days ago is out.
            row(first - 1, "mtn-bj", counts(1, 1, 1, 9999)),
            row(first - 30, "orange-ci", counts(2, 1, 2, 500)),
            row(first - 31, "mtn-bj", counts(1, 1, 1, 7777)),
            // A hosted payment's row once its customer chose: empty.
            row(today, NOT_CHOSEN, counts(0, 0, 0, 0)),
            row(first, NOT_CHOSEN, counts(1, 0, 1, 0)),
        ],
        now,
    );
    assert_eq!(
        (f.days[0].day, f.days[29].day, f.days.len()),
        (first, today, 30)
    );
    assert_eq!(
        (
            day_label(html::Lang::En, first),
            day_label(html::Lang::Fr, today)
        ),
        ("May 3".to_string(), "1 juin".to_string())
    );
    assert_eq!(f.days[29].counts, counts(3, 1, 2, 1000));
    assert_eq!(f.days[29].counts.rate(), Some(50.0));
    assert_eq!(f.days[0].counts, counts(2, 1, 2, 2000));
    assert_eq!(f.month["mtn-bj"].volume, 3000);
    assert_eq!(f.today["moov-bj"].rate(), None, "nothing finished yet");
    assert!(
        !f.today.contains_key(NOT_CHOSEN),
        "no payment left there today"
    );
    assert_eq!(f.month[NOT_CHOSEN], counts(1, 0, 1, 0));
    assert_eq!(f.days.iter().map(|d| d.counts.payments).sum::<i64>(), 5);
    // Each day beside the day 30 days earlier.
    assert_eq!(f.days[29].before, counts(1, 1, 1, 9999));
    assert_eq!(f.days[0].before, counts(2, 1, 2, 500));
    assert_eq!(f.before.len(), 2);
    assert_eq!(Figures::total(&f.before), counts(3, 2, 3, 10_499));
}

#[test]
fn changes_say_their_direction_in_the_reader_s_language() {
    crate::words::add();
    use html::Lang::{En, Fr};
    assert_eq!(change(En, 5, 2), "+150%");
    assert_eq!(change(Fr, 4, 5), "\u{2212}20\u{a0}%");
    assert_eq!(change(En, 5, 5), "0%");
    assert_eq!(change(En, 5, 0), "–", "nothing to compare with");
    assert_eq!(change_points(En, Some(80.0), Some(50.0)), "+30 pts");
    assert_eq!(
        change_points(Fr, Some(62.5), Some(75.0)),
        "\u{2212}12,5 pts"
    );
    assert_eq!(change_points(En, Some(80.0), None), "–");
    assert_eq!(unit(Fr, "XOF"), "FCFA");
    assert_eq!(unit(En, "XOF"), "XOF");
}
