use super::Day;

#[test]
fn a_day_is_read_only_as_a_real_date() {
    assert_eq!(Day::parse("2026-06-01").unwrap().to_string(), "2026-06-01");
    // A day before 1970 is a day: it has no report.
    assert_eq!(Day::parse("0257-12-25").unwrap().to_string(), "0257-12-25");
    for bad in [
        "2026-02-31",
        "2026-6-1",
        "20260601",
        "",
        "2026-06-01T00:00:00Z",
    ] {
        assert!(Day::parse(bad).is_err(), "{bad}");
    }
    let d = Day::parse("2026-06-01").unwrap();
    assert!(d.contains(d.start_ms()) && !d.contains(d.end_ms()));
    assert_eq!(d.before().to_string(), "2026-05-31");
}
