//! The next-tick function against the daylight-saving vectors of five zones
//! (in `tests/vectors.rs`, computed independently with Python's `zoneinfo`),
//! leap days, and the classifier.

use super::*;

mod vectors;
use vectors::*;

/// The instant written `s` (RFC 3339).
fn ts(s: &str) -> Timestamp {
    s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
}

/// The `n` ticks of `expr` in `zone` after `from`, as RFC 3339 strings.
fn ticks(expr: &str, zone: &str, from: &str, n: usize) -> Vec<String> {
    let cal = Calendar::new(expr, zone).unwrap();
    let mut at = ts(from);
    let mut out = Vec::new();
    for _ in 0..n {
        at = cal
            .next_tick(at)
            .unwrap_or_else(|| panic!("{expr} in {zone}: no tick after {at}"));
        out.push(at.to_string());
    }
    out
}

/// Shorthand: the expected ticks, minutes always written out.
fn want(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| ts(s).to_string()).collect()
}

/// The ticks of `v` are `v.ticks`, and the one after them lies past
/// `v.until`.
fn check(v: &Vector) {
    let mut got = ticks(v.expr, v.zone, v.from, v.ticks.len() + 1);
    let next = got.pop().unwrap();
    assert_eq!(got, want(v.ticks), "{} in {}", v.expr, v.zone);
    assert!(
        ts(&next) > ts(v.until),
        "{} in {}: {next} is not after {}",
        v.expr,
        v.zone,
        v.until
    );
}

#[test]
fn new_york_spring_fixed_runs_at_the_end_of_the_gap_without_drift() {
    check(&NEW_YORK_SPRING_FIXED);
}

#[test]
fn new_york_spring_interval_keeps_real_spacing() {
    check(&NEW_YORK_SPRING_INTERVAL);
}

#[test]
fn two_fixed_times_resolving_to_one_instant_run_once() {
    check(&NEW_YORK_SPRING_TWO_TIMES_ONE_INSTANT);
}

#[test]
fn new_york_fall_fixed_runs_at_the_first_occurrence_only() {
    check(&NEW_YORK_FALL_FIXED);
}

#[test]
fn new_york_fall_interval_runs_both_passes_in_order() {
    check(&NEW_YORK_FALL_INTERVAL);
    assert_eq!(
        ticks("0 * * * *", "America/New_York", "2026-11-01T04:30Z", 3),
        want(&[
            "2026-11-01T05:00Z",
            "2026-11-01T06:00Z",
            "2026-11-01T07:00Z"
        ])
    );
}

#[test]
fn an_interval_search_from_inside_the_first_pass_finds_the_second() {
    // 05:50Z is 01:50 EDT; 01:00 EST (06:00Z) comes next, though its local
    // time is earlier.
    assert_eq!(
        ticks("*/15 * * * *", "America/New_York", "2026-11-01T05:50Z", 2),
        want(&["2026-11-01T06:00Z", "2026-11-01T06:15Z"])
    );
    // From inside the second pass, the first pass is past.
    assert_eq!(
        ticks("*/15 * * * *", "America/New_York", "2026-11-01T06:20Z", 1),
        want(&["2026-11-01T06:30Z"])
    );
}

#[test]
fn a_list_of_plain_hours_is_fixed_through_the_fold() {
    // cronie's reading (croner's differs: it runs 01:30 twice).
    assert!(Calendar::new("30 1,13 * * *", "America/New_York")
        .unwrap()
        .is_fixed());
    assert_eq!(
        ticks("30 1,13 * * *", "America/New_York", "2026-11-01T00:00Z", 2),
        want(&["2026-11-01T05:30Z", "2026-11-01T18:30Z"])
    );
}

#[test]
fn berlin_both_transitions() {
    BERLIN.iter().for_each(check);
}

#[test]
fn sydney_both_transitions() {
    SYDNEY.iter().for_each(check);
}

#[test]
fn lord_howe_half_hour_shifts() {
    LORD_HOWE.iter().for_each(check);
}

#[test]
fn santiago_missing_midnight() {
    check(&SANTIAGO);
}

#[test]
fn leap_days() {
    assert_eq!(
        ticks("0 12 29 2 *", "America/New_York", "2026-01-01T00:00Z", 2),
        want(&["2028-02-29T17:00Z", "2032-02-29T17:00Z"])
    );
    assert_eq!(
        ticks("0 0 L 2 *", "America/New_York", "2027-01-01T00:00Z", 3),
        want(&[
            "2027-02-28T05:00Z",
            "2028-02-29T05:00Z",
            "2029-02-28T05:00Z"
        ])
    );
}

#[test]
fn seconds_field_and_descriptors() {
    assert_eq!(
        ticks("*/20 * * * * *", "UTC", "2026-01-01T00:00:05Z", 3),
        want(&[
            "2026-01-01T00:00:20Z",
            "2026-01-01T00:00:40Z",
            "2026-01-01T00:01:00Z"
        ])
    );
    // The second Friday of each month at 18:00.
    assert_eq!(
        ticks("0 18 * * FRI#2", "UTC", "2026-01-01T00:00Z", 2),
        want(&["2026-01-09T18:00Z", "2026-02-13T18:00Z"])
    );
    // The weekday nearest the 15th: 2026-02-15 is a Sunday.
    assert_eq!(
        ticks("0 8 15W * *", "UTC", "2026-02-01T00:00Z", 1),
        want(&["2026-02-16T08:00Z"])
    );
}

#[test]
fn a_tick_is_strictly_after_and_tick_from_is_inclusive() {
    let cal = Calendar::new("0 9 * * *", "UTC").unwrap();
    let nine = ts("2026-05-05T09:00Z");
    assert_eq!(cal.next_tick(nine), Some(ts("2026-05-06T09:00Z")));
    assert_eq!(cal.tick_from(nine), Some(nine));
    // Sub-second positions do not round onto a tick already passed.
    let just_after = ts("2026-05-05T09:00:00.5Z");
    assert_eq!(cal.next_tick(just_after), Some(ts("2026-05-06T09:00Z")));
}

#[test]
fn classifier() {
    for (expr, fixed) in [
        ("0 9 * * *", true),
        ("30 1,13 * * *", true),
        ("0 30 2 * * *", true),
        ("0 0 9 * * * 2030", true),
        ("@daily", true),
        ("@weekly", true),
        ("@hourly", false),
        ("*/15 * * * *", false),
        ("0 9-17 * * *", false),
        ("0 */2 * * *", false),
        ("* 9 * * *", false),
        ("*/10 0 9 * * *", false),
    ] {
        assert_eq!(
            Calendar::new(expr, "UTC").unwrap().is_fixed(),
            fixed,
            "{expr}"
        );
    }
}

#[test]
fn bad_expressions_and_zones_are_refused_with_the_reason() {
    for expr in [
        "",
        "61 * * * *",
        "* * * *",
        "0 9 * * FUNDAY",
        "@fortnightly",
        "0 0 30 2 *",
        "0 0 1 1 * 2001",
    ] {
        match Calendar::new(expr, "UTC") {
            Err(CalendarError::Expression { expression, reason }) => {
                assert_eq!(expression, expr);
                assert!(!reason.is_empty());
            }
            other => panic!("{expr:?}: {other:?}"),
        }
    }
    for zone in ["", "Mars/Olympus", "Europe/Berlinn", "+02:00"] {
        match Calendar::new("0 9 * * *", zone) {
            Err(CalendarError::Zone { zone: z, reason }) => {
                assert_eq!(z, zone);
                assert!(!reason.is_empty());
            }
            other => panic!("{zone:?}: {other:?}"),
        }
    }
    let e = Calendar::new("0 9 * * *", "Mars/Olympus").unwrap_err();
    assert!(e.to_string().contains("Mars/Olympus"), "{e}");
}

#[test]
fn odd_inputs_are_values_not_panics() {
    let odd = [
        "L L L L L",
        "0 0 31W * *",
        "0 0 ? * 7#6",
        "*/0 * * * *",
        "0-59/0 * * * *",
        "5-1 * * * *",
        "@",
        "@ daily",
        "0 0 LW * *",
        "99999999999 * * * *",
        "0 0 0 0 0",
        "- * * * *",
        ", * * * *",
        "0 0 * * MON#0",
        "0 0 1 1 * 99999",
        "\u{0}\u{1} * * * *",
        "0 9 * * MON-FRI extra fields here",
        ", * * * *",
        "0 1, * * *",
        "0 0 1,,2 * *",
    ];
    for expr in odd {
        // Either answer is fine; a panic is not, and an accepted calendar
        // finds its next tick (or says there is none) without one.
        if let Ok(cal) = Calendar::new(expr, "America/New_York") {
            let _ = cal.next_tick(ts("2026-03-08T06:00Z"));
        }
    }
    // Those that are plainly wrong are refused.
    for expr in [
        "*/0 * * * *",
        "@",
        "0 0 0 0 0",
        "99999999999 * * * *",
        ", * * * *",
        "0 1, * * *",
    ] {
        assert!(Calendar::new(expr, "UTC").is_err(), "{expr}");
    }
}
